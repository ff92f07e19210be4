"""The participant client ``client/evalserver_cli.py``, run as participants run it: a separate
process talking HTTP to a live server (pytest-django's ``live_server``; scoring runs in the
server's thread right after the upload commits, as without a broker)."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import orjson
import pytest

from tests.conftest import World, make_world, run_bytes

CLI = Path(__file__).resolve().parent.parent / "client" / "evalserver_cli.py"
SLUG = "demo-task"


@dataclass
class Served:
    world: World
    url: str


@pytest.fixture
def served(transactional_db: Any, live_server: Any) -> Served:
    return Served(make_world(), live_server.url)


def cli(*args: str, server: str | None = None, token: str | None = None, timeout: float = 30,
        python: str = sys.executable, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The client in a fresh interpreter, with no settings leaking in from this machine."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("EVALSERVER_") and not key.lower().endswith("_proxy")}
    env["PYTHONIOENCODING"] = "utf-8"
    if server:
        env["EVALSERVER_URL"] = server
    if token:
        env["EVALSERVER_TOKEN"] = token
    return subprocess.run([python, str(CLI), *args], capture_output=True, text=True, encoding="utf-8",
                          env=env, timeout=timeout, check=False, cwd=cwd)


def api(served: Served, path: str, token: str | None = None) -> Any:
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    with urlopen(Request(served.url + path, headers=headers), timeout=15) as response:
        return json.loads(response.read())


def write_run(tmp_path: Path, world: World, noise: float = 0.3, seed: int = 1, name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_bytes(run_bytes(world.gold, noise, seed))
    return path


def submit(served: Served, path: Path, *args: str, token: str | None = None) -> int:
    """Submit through the client and return the new run's id."""
    result = cli("submit", SLUG, str(path), *args, server=served.url, token=token or served.world.alice_token)
    assert result.returncode == 0, result.stderr
    return run_id_in(result.stdout)


def run_id_in(stdout: str) -> int:
    match = re.search(r"^run (\d+) ", stdout, re.MULTILINE)
    assert match, stdout
    return int(match.group(1))


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def table_row(text: str, first_cell: str) -> list[str]:
    rows = [line.split() for line in text.splitlines() if line.split()[:1] == [first_cell]]
    assert len(rows) == 1, (first_cell, text)
    return rows[0]


def test_submit_and_wait_prints_the_scores_the_api_reports(served: Served, tmp_path: Path) -> None:
    token = served.world.alice_token
    result = cli("--server", served.url, "--token", token, "submit", SLUG, str(write_run(tmp_path, served.world)),
                 "--name", "aurora-cli", "--description", "BERT + label smoothing", "--priority", "1",
                 "--private", "--wait", "--digits", "6")
    assert result.returncode == 0, result.stderr
    run_id = run_id_in(result.stdout)
    assert f"url: {served.url}/api/v1/runs/{run_id}/" in result.stdout
    assert "status:      done" in result.stdout
    run = api(served, f"/api/v1/runs/{run_id}/", token)
    assert (run["name"], run["description"], run["priority"], run["is_public"]) == (
        "aurora-cli", "BERT + label smoothing", 1, False)
    measures = run["scores"]["measures"]
    assert len(measures) == 3 * 6 + 3
    titles = {entry["key"]: entry["title"] for entry in run["measures"]}
    for key, value in measures.items():
        row = table_row(result.stdout, key)
        # key, the measure's title, the value to 6 places, its direction (every one a distance)
        assert row[-4:] == [f"{value:.6f}", "lower", "is", "better"]
        assert " ".join(row[1:-4]) == titles[key]
    assert "scores over 30 items" in result.stdout
    assert token not in result.stdout + result.stderr


def test_an_invalid_file_exits_2_and_prints_every_error_line(served: Served, tmp_path: Path) -> None:
    entries = orjson.loads(run_bytes(served.world.gold, 0.2))
    entries[0]["quality"]["A"]["2"] = float("nan")
    entries[1]["nugget"][0] = {"HNUG": 1.0}
    entries[2]["id"] = "not-a-dialogue"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(entries))
    result = cli("submit", SLUG, str(path), "--wait", server=served.url, token=served.world.alice_token)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "HTTP 400" in result.stderr
    lines = result.stderr.splitlines()
    expected = ['[0].quality.A["2"]: value nan is not a finite number',
                '[2].id: dialogue "not-a-dialogue" is not in the gold data of this task']
    for line in expected:
        assert f"  {line}" in lines
    assert any(line.startswith('  [1].nugget[0]: label "HNUG" is not allowed on a customer turn') for line in lines)
    assert any(line.startswith("  $: the run misses 1 of the 30 gold dialogue(s)") for line in lines)
    assert api(served, f"/api/v1/tasks/{SLUG}/my-runs/", served.world.alice_token)["runs"] == []


def test_a_bad_token_exits_2_with_the_servers_message(served: Served, tmp_path: Path) -> None:
    bad_token = "f" * 40
    for args in (["submit", SLUG, str(write_run(tmp_path, served.world))], ["status", "1"], ["runs", SLUG]):
        result = cli("--token", bad_token, *args, server=served.url)
        assert result.returncode == 2, (args, result.stderr)
        assert "HTTP 401" in result.stderr
        assert "  Invalid token." in result.stderr.splitlines()
        assert bad_token not in result.stdout + result.stderr
    # The board is public: a stale token does not hide it.
    board = cli("leaderboard", SLUG, server=served.url, token=bad_token)
    assert board.returncode == 0, board.stderr
    assert "refused your token" in board.stderr


def test_an_unreachable_server_exits_3_with_a_clear_message(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    path = tmp_path / "run.json"
    path.write_text("[]")
    for args in (["submit", SLUG, str(path)], ["status", "7"], ["leaderboard", SLUG]):
        result = cli("--server", url, *args, token="a" * 40)
        assert result.returncode == 3, result.stderr
        assert f"cannot connect to {url}/api/v1/" in result.stderr
        assert "connection refused" in result.stderr
        assert "Traceback" not in result.stderr


def test_a_silent_server_times_out_with_exit_3() -> None:
    with socket.socket() as listener:  # accepts connections (backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        result = cli("--server", url, "--timeout", "0.5", "leaderboard", SLUG)
    assert result.returncode == 3
    assert "within 0.5 s" in result.stderr


def test_local_checks_refuse_bad_input_before_sending(tmp_path: Path) -> None:
    # A closed port: exit status 2 (not 3) proves nothing was sent.
    url = f"http://127.0.0.1:{closed_port()}"
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b" " * 3000 + b"]")
    cases = [
        (["submit", SLUG, str(tmp_path / "missing.json")], "missing.json: no such file"),
        (["submit", SLUG, str(tmp_path)], "is a directory"),
        (["submit", SLUG, str(big), "--max-size", "2k"], "3002 bytes (3.0 kB) is over the limit of 2000 bytes"),
        (["submit", SLUG, str(big), "--description-file", str(tmp_path / "nope.txt")], "nope.txt: cannot be read"),
    ]
    for args, message in cases:
        result = cli("--server", url, *args, token="a" * 40)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr
    no_token = cli("--server", url, "runs", SLUG)
    assert no_token.returncode == 2
    assert "no API token" in no_token.stderr
    bad_priority = cli("--server", url, "submit", SLUG, str(big), "--priority", "0", token="a" * 40)
    assert bad_priority.returncode == 2
    assert "must be 1 or more" in bad_priority.stderr


def test_a_file_over_the_servers_limit_exits_2_with_its_message(served: Served, tmp_path: Path,
                                                                 settings: Any) -> None:
    # The server answers 413 before reading a body this large and closes the connection.
    settings.RUN_UPLOAD_MAX_BYTES = 10_000
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b" " * 3_000_000 + b"]")
    result = cli("submit", SLUG, str(path), server=served.url, token=served.world.alice_token)
    assert result.returncode == 2, result.stderr
    assert "HTTP 413" in result.stderr
    assert "over the upload limit of 10000 bytes" in result.stderr


def test_status_runs_and_leaderboard_show_the_runs_and_their_numbers(served: Served, tmp_path: Path) -> None:
    world = served.world
    first = submit(served, write_run(tmp_path, world, 0.1, 1, "a.json"), "--name", "aurora-close", "--priority", "1")
    second = submit(served, write_run(tmp_path, world, 0.9, 2, "b.json"), "--name", "aurora-noisy")
    rival = submit(served, write_run(tmp_path, world, 0.5, 3, "c.json"), "--name", "borealis-mid",
                   token=world.bob_token)

    status = cli("status", str(first), server=served.url, token=world.alice_token)
    assert status.returncode == 0, status.stderr
    scores = api(served, f"/api/v1/runs/{first}/", world.alice_token)["scores"]
    assert f"run {first}  Aurora / aurora-close" in status.stdout
    assert f"{scores['measures']['quality.S.nmd']:.4f}" in table_row(status.stdout, "quality.S.nmd")
    assert cli("status", str(rival), server=served.url, token=world.alice_token).returncode == 2  # not her team's

    runs = cli("runs", SLUG, server=served.url, token=world.alice_token)
    assert runs.returncode == 0, runs.stderr
    assert "borealis-mid" not in runs.stdout
    row = table_row(runs.stdout, str(first))
    assert row[1:4] == ["aurora-close", "-", "done"]  # a task without phases: no phase
    header = table_row(runs.stdout, "id")
    assert row[header.index("JSD")] == f"{scores['measures']['nugget.jsd']:.4f}"
    assert [name for name in header if "." in name] == ["A.RSNOD", "A.NMD", "S.RSNOD", "S.NMD", "E.RSNOD", "E.NMD"]
    assert table_row(runs.stdout, str(second))[1] == "aurora-noisy"
    # A task without phases takes runs at any time: no quota, and not "no submission phase is open".
    assert runs.stdout.splitlines()[-1] == ("quota: none; this task has no phases: it accepts runs at any time, "
                                            "with no quota")

    board = api(served, f"/api/v1/tasks/{SLUG}/leaderboard/")
    by_jsd = sorted(board["runs"], key=lambda entry: (entry["scores"]["measures"]["nugget.jsd"], entry["id"]))
    shown = cli("leaderboard", SLUG, "--sort", "nugget.jsd", server=served.url)
    assert shown.returncode == 0, shown.stderr
    assert "sorted by nugget.jsd; lower is better" in shown.stdout
    ids = [int(line.split()[1]) for line in shown.stdout.splitlines() if re.match(r"\s*\d+\s+\d+\s", line)]
    assert ids == [entry["id"] for entry in by_jsd]
    assert {first, second, rival} <= set(ids)
    assert len(ids) == len(board["runs"]) == 5  # with the two baselines
    rival_row = table_row(shown.stdout, str(next(e["ranks"]["nugget.jsd"] for e in board["runs"] if e["id"] == rival)))
    assert rival_row[2:4] == ["Borealis", "borealis-mid"]
    rival_scores = next(entry["scores"] for entry in board["runs"] if entry["id"] == rival)
    board_header = table_row(shown.stdout, "rank")
    assert rival_row[board_header.index("A.RSNOD")] == f"{rival_scores['measures']['quality.A.rsnod']:.4f}"

    short = cli("leaderboard", SLUG, "--sort", "s.NMD", "--all", server=served.url)
    assert "sorted by quality.S.nmd" in short.stdout
    assert "A.SNOD" in short.stdout
    unknown = cli("leaderboard", SLUG, "--sort", "bleu", server=served.url)
    assert unknown.returncode == 2
    assert "quality.A.rsnod" in unknown.stderr  # the choices, from the board itself


def test_json_outputs_parse_and_equal_the_api(served: Served, tmp_path: Path) -> None:
    world = served.world
    submitted = cli("submit", SLUG, str(write_run(tmp_path, world)), "--json", server=served.url,
                    token=world.alice_token)
    assert submitted.returncode == 0, submitted.stderr
    created = json.loads(submitted.stdout)
    assert created["status"] == "queued"
    run_id = created["id"]
    token = world.alice_token
    expected = {
        ("status", str(run_id), "--json"): api(served, f"/api/v1/runs/{run_id}/", token),
        ("status", str(run_id), "--wait", "--json"): api(served, f"/api/v1/runs/{run_id}/", token),
        ("runs", SLUG, "--json"): api(served, f"/api/v1/tasks/{SLUG}/my-runs/", token),
        ("leaderboard", SLUG, "--json"): api(served, f"/api/v1/tasks/{SLUG}/leaderboard/"),
        ("tasks", "--json"): api(served, "/api/v1/tasks/", token),
    }
    for args, data in expected.items():
        result = cli(*args, server=served.url, token=token)
        assert result.returncode == 0, (args, result.stderr)
        assert json.loads(result.stdout) == data, args
    tasks = cli("tasks", server=served.url)
    assert table_row(tasks.stdout, SLUG)[1:] == ["Demo", "task"]


def test_the_progress_bar_reaches_100_percent_on_stderr(served: Served, tmp_path: Path) -> None:
    path = write_run(tmp_path, served.world)
    result = cli("submit", SLUG, str(path), "--progress", server=served.url, token=served.world.alice_token)
    assert result.returncode == 0, result.stderr
    frames = [frame for frame in re.split(r"[\r\n]", result.stderr) if frame.startswith("[")]
    assert frames, result.stderr
    assert re.fullmatch(r"\[#{30}\] 100% (\d+\.\d)/\1 kB", frames[-1]), frames[-1]
    assert "%" not in result.stdout
    quiet = cli("submit", SLUG, str(path), server=served.url, token=served.world.alice_token)
    assert "100%" not in quiet.stderr  # stderr is not a terminal here


def test_file_names_reach_the_server_escaped(served: Served, tmp_path: Path) -> None:
    token = served.world.alice_token
    for filename, name in (("run é (v2).json", "run é (v2)"), ('a"b.json', "a%22b")):
        run_id = submit(served, write_run(tmp_path, served.world, name=filename))
        assert api(served, f"/api/v1/runs/{run_id}/", token)["name"] == name


def test_a_failed_run_exits_1_and_shows_its_errors(served: Served, tmp_path: Path) -> None:
    from tasks.models import Run

    run_id = submit(served, write_run(tmp_path, served.world))
    Run.objects.filter(pk=run_id).update(status=Run.FAILED, errors=["scoring: worker lost"])
    result = cli("status", str(run_id), "--wait", server=served.url, token=served.world.alice_token)
    assert result.returncode == 1
    assert "status:      failed" in result.stdout
    assert "  scoring: worker lost" in result.stdout.splitlines()


class Redirector(BaseHTTPRequestHandler):
    target = ""

    def redirect(self) -> None:
        self.send_response(307)
        self.send_header("Location", self.target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = redirect

    def log_message(self, *args: Any) -> None:
        pass


def test_redirects_are_followed_but_never_carry_the_token_elsewhere(served: Served, tmp_path: Path) -> None:
    handler = type("ToLiveServer", (Redirector,), {"target": served.url})
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as redirector:
        threading.Thread(target=redirector.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{redirector.server_address[1]}"
            board = cli("leaderboard", SLUG, "--json", server=url)
            assert board.returncode == 0, board.stderr
            assert json.loads(board.stdout)["task"] == SLUG
            refused = cli("submit", SLUG, str(write_run(tmp_path, served.world)), server=url,
                          token=served.world.alice_token)
            assert refused.returncode == 3
            assert f"use --server {served.url}" in refused.stderr
            assert served.world.alice_token not in refused.stderr
        finally:
            redirector.shutdown()


def test_the_server_serves_this_client_for_download(served: Served) -> None:
    with urlopen(f"{served.url}/client/evalserver_cli.py", timeout=15) as response:
        assert response.read() == CLI.read_bytes()


def test_every_command_has_help() -> None:
    for command in ("submit", "status", "runs", "leaderboard", "tasks", "data"):
        result = cli(command, "--help")
        assert result.returncode == 0
        assert "example" in result.stdout
    assert "exit status" in cli("--help").stdout


def python_3_8() -> str | None:
    """Participants run the client on their own machines: the oldest Python it supports, when this
    machine has one (on PATH or installed by pyenv)."""
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python")))
    candidates = [shutil.which("python3.8"), *pyenv]
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 8)"],
                                        capture_output=True, check=False).returncode == 0:
            return candidate
    return None


def test_the_client_runs_under_python_3_8(served: Served, tmp_path: Path) -> None:
    python = python_3_8()
    if python is None:
        pytest.skip("no Python 3.8 on this machine")
    world = served.world
    submitted = cli("submit", SLUG, str(write_run(tmp_path, world)), "--name", "py38", "--wait", "--progress",
                    server=served.url, token=world.alice_token, python=python)
    assert submitted.returncode == 0, submitted.stderr
    assert "status:      done" in submitted.stdout
    assert "100%" in submitted.stderr
    board = cli("leaderboard", SLUG, "--sort", "nugget.jsd", server=served.url, python=python)
    assert "py38" in board.stdout
    data = cli("data", SLUG, "--out", str(tmp_path / "data"), server=served.url, python=python)
    assert data.returncode == 0, data.stderr
    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == [
        "format.json", "participant-data.json", "sample-run.json"]
    refused = cli("--server", f"http://127.0.0.1:{closed_port()}", "tasks", python=python)
    assert (refused.returncode, "connection refused" in refused.stderr) == (3, True)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        silent = cli("--server", f"http://127.0.0.1:{listener.getsockname()[1]}", "--timeout", "0.5", "tasks",
                     python=python)
    assert (silent.returncode, "within 0.5 s" in silent.stderr) == (3, True), silent.stderr


def test_submit_sends_the_file_again_when_the_server_is_busy_validating(served: Served, tmp_path: Path,
                                                                        settings: Any) -> None:
    """A server validating other uploads answers 503 with Retry-After and stores nothing; the
    client waits as told and sends the file again, once, and the run is accepted."""
    from tasks import submissions

    settings.EVALSERVER_VALIDATION_SLOTS = 1
    settings.EVALSERVER_VALIDATION_WAIT_SECONDS = 0  # refuse at once instead of waiting for the slot
    with submissions.validation_slot():  # created on first use
        pass
    slot = submissions._validation_slots[1]
    assert slot.acquire(timeout=5)  # another upload is being validated in the server's process
    threading.Timer(1.0, slot.release).start()
    path = write_run(tmp_path, served.world)
    result = cli("submit", SLUG, str(path), "--name", "patient", server=served.url, token=served.world.alice_token)
    assert result.returncode == 0, result.stderr
    assert "the server is busy (the server is validating 1 other upload(s); nothing was stored" in result.stderr
    assert "sending the file again in 5 s (try 1 of 10)" in result.stderr
    from tasks.models import Run

    assert list(Run.objects.filter(name="patient").values_list("status", flat=True)) == ["done"]


# data --------------------------------------------------------------------------------------

def api_bytes(served: Served, path: str, token: str | None = None) -> bytes:
    headers = {"Authorization": f"Token {token}"} if token else {}
    with urlopen(Request(served.url + path, headers=headers), timeout=15) as response:
        return response.read()


def add_file(served: Served, name: str, content: bytes, phase: Any = None) -> None:
    import io

    from tasks.datafiles import add_data_file

    add_data_file(served.world.task, name, io.BytesIO(content), phase=phase)


def test_data_downloads_every_file_checked_and_skips_what_is_there(served: Served, tmp_path: Path) -> None:
    add_file(served, "guidelines.txt", "Annotate with care: ✓\n".encode())
    out = tmp_path / "data"
    result = cli("data", SLUG, "--out", str(out), server=served.url)
    assert result.returncode == 0, result.stderr
    names = ["participant-data.json", "format.json", "sample-run.json", "guidelines.txt"]
    assert sorted(path.name for path in out.iterdir()) == sorted(names)
    for name in names:
        assert (out / name).read_bytes() == api_bytes(served, f"/api/v1/tasks/{SLUG}/data/{name}")
        assert re.search(rf"^{re.escape(str(out / name))}: [0-9.]+ (kB|B), SHA-256 checked$", result.stdout,
                         re.MULTILINE), result.stdout
    data = json.loads((out / "participant-data.json").read_text())
    assert [entry["id"] for entry in data] == [dialogue["id"] for dialogue in served.world.gold]
    assert "annotations" not in (out / "participant-data.json").read_text()
    assert result.stdout.splitlines()[0] == f"{SLUG}: data of no phases, gold version 1"
    again = cli("data", SLUG, "--out", str(out), server=served.url)
    assert again.returncode == 0
    assert again.stdout.count(": up to date (") == 4
    # The default folder: the task's (and the phase's) name.
    default = cli("data", SLUG, server=served.url, cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    assert sorted(path.name for path in (tmp_path / f"{SLUG}-data").iterdir()) == sorted(names)


def test_data_of_a_phase_for_registered_teams_needs_the_token(served: Served, tmp_path: Path) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from tasks.models import Phase

    now = timezone.now()
    Phase.objects.create(task=served.world.task, name="test 1", kind=Phase.TEST, data_registered_only=True,
                         gold_version=served.world.gold_version, starts_at=now - timedelta(hours=1),
                         ends_at=now + timedelta(days=1))
    anonymous = cli("data", SLUG, "--out", str(tmp_path / "a"), "--no-progress", server=served.url)
    assert anonymous.returncode == 2
    assert sorted(path.name for path in (tmp_path / "a").iterdir()) == ["format.json"]
    assert anonymous.stderr.splitlines() == [
        "error: not downloaded: participant-data.json, sample-run.json",
        "  The data of the test 1 phase is for registered teams only: sign in as a member of a team."]
    member = cli("data", SLUG, "--phase", "test 1", "--progress", server=served.url,
                 token=served.world.alice_token, cwd=tmp_path)
    assert member.returncode == 0, member.stderr
    assert sorted(path.name for path in (tmp_path / f"{SLUG}-test_1-data").iterdir()) == [
        "format.json", "participant-data.json", "sample-run.json"]
    assert "100%" in member.stderr
    assert member.stdout.splitlines()[0] == f"{SLUG}: data of phase test 1, gold version 1"
    listed = cli("data", SLUG, "--list", server=served.url)
    assert listed.returncode == 0
    assert table_row(listed.stdout, "participant-data.json")[-3:] == ["no", "Participants'", "data"]
    assert "not available: The data of the test 1 phase is for registered teams only" in listed.stdout
    as_json = cli("data", SLUG, "--json", server=served.url, token=served.world.alice_token)
    assert json.loads(as_json.stdout) == api(served, f"/api/v1/tasks/{SLUG}/data/", served.world.alice_token)
    unknown = cli("data", SLUG, "--phase", "Test 1", server=served.url)
    assert unknown.returncode == 2
    assert "  no such phase in this task" in unknown.stderr.splitlines()
    from tasks.models import AccessLog

    assert list(AccessLog.objects.values_list("what", flat=True).order_by("pk")) == [
        "data file participant-data.json of phase test 1", "data file sample-run.json of phase test 1"]


class LyingServer(BaseHTTPRequestHandler):
    """A listing whose files do not match it, or whose names are not safe."""

    files: dict[str, bytes] = {}
    listed: list[dict[str, Any]] = []

    def do_GET(self) -> None:  # noqa: N802 - the handler's API
        path = self.path.split("?")[0]
        if path.endswith("/data/"):
            content = json.dumps({"task": SLUG, "phase": None, "files": self.listed, "notes": []}).encode()
        else:
            content = self.files.get(path.rsplit("/", 1)[-1], b"")
        self.send_response(200)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, *args: Any) -> None:
        pass


def test_data_refuses_a_corrupted_download_and_unsafe_names(tmp_path: Path) -> None:
    import hashlib

    entry = {"name": "data.json", "size": 4, "sha256": hashlib.sha256(b"[1]\n").hexdigest(), "available": True}
    cases = [({"data.json": b"[2]\n"}, [entry], "data.json: the download does not match the listing"),
             ({"data.json": b"[1]"}, [entry], "(3 of 4 bytes, or another SHA-256)"),
             ({}, [{**entry, "name": "../evil.json"}], "which is not a safe file name"),
             ({}, [{**entry, "name": "sub/evil.json"}], "which is not a safe file name")]
    for files, listed, message in cases:
        handler = type("Lying", (LyingServer,), {"files": files, "listed": listed})
        with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
            threading.Thread(target=server.serve_forever, daemon=True).start()
            out = tmp_path / "out"
            result = cli("data", SLUG, "--out", str(out), server=f"http://127.0.0.1:{server.server_address[1]}")
            server.shutdown()
        assert result.returncode == 3, result.stderr
        assert message in result.stderr
        assert [path.name for path in tmp_path.rglob("*") if path.is_file()] == []  # no partial file anywhere


class FloodingServer(LyingServer):
    """Lists a 6-byte file and sends 64 MB for it, with no Content-Length (issue 24: 200 MB were
    written for a file listed as 6 bytes)."""

    def do_GET(self) -> None:  # noqa: N802 - the handler's API
        if self.path.split("?")[0].endswith("/data/"):
            return super().do_GET()
        self.send_response(200)
        self.end_headers()
        try:
            for _ in range(1024):
                self.wfile.write(b"x" * 65536)
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading, as it should
            pass
        return None


def lying(tmp_path: Path, files: dict[str, bytes], listed: list[dict[str, Any]], handler: Any = LyingServer,
          notes: list[str] | None = None, task: str = SLUG) -> subprocess.CompletedProcess[str]:
    attributes = {"files": files, "listed": listed}
    if notes is not None or task != SLUG:
        def do_get(self: Any) -> None:
            if self.path.split("?")[0].endswith("/data/"):
                content = json.dumps({"task": task, "phase": None, "files": listed, "notes": notes or []}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)
            else:
                handler.do_GET(self)
        attributes["do_GET"] = do_get
    made = type("Hostile", (handler,), attributes)
    with ThreadingHTTPServer(("127.0.0.1", 0), made) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        result = cli("data", SLUG, "--out", str(tmp_path / "out"), server=f"http://127.0.0.1:{server.server_address[1]}")
        server.shutdown()
    return result


def test_data_against_a_hostile_server(tmp_path: Path) -> None:
    """Issue 24: the client against a server that sends more than it lists, lists a name that is a
    Windows device, a name that was the client's own temporary file, or terminal escapes."""
    import hashlib

    def entry(name: str, content: bytes) -> dict[str, Any]:
        return {"name": name, "size": len(content), "sha256": hashlib.sha256(content).hexdigest(), "available": True}

    flood = lying(tmp_path / "flood", {}, [entry("x.txt", b"hello\n")], FloodingServer)
    assert flood.returncode == 3
    assert "error: x.txt: the server sent more than the 6 bytes it listed; stopped, nothing kept" in flood.stderr
    assert [path for path in (tmp_path / "flood").rglob("*") if path.is_file()] == []

    for name in ("con.txt", "NUL", "com1.json", "lpt9.tar.gz", "aux", "data.json."):
        refused = lying(tmp_path / "names", {}, [entry(name, b"1")])
        assert refused.returncode == 3 and "which is not a safe file name" in refused.stderr, name

    # x.txt.part first, then x.txt: x.txt's temporary file used to be x.txt.part, which it replaced.
    files = {"x.txt.part": b"the listed part file\n", "x.txt": b"the text\n"}
    both = lying(tmp_path / "part", files, [entry(name, content) for name, content in files.items()])
    assert both.returncode == 0, both.stderr
    assert {path.name: path.read_bytes() for path in (tmp_path / "part" / "out").iterdir()} == files

    # OSC 52 (write to the clipboard), a screen clear and an 8-bit CSI, in a note and the task's name.
    escapes = lying(tmp_path / "escapes", {}, [], notes=["\x1b]52;c;ZXZpbA==\x07 read me", "8-bit \x9b2J"],
                    task="t\x1b[2Jx")
    assert escapes.returncode == 0, escapes.stderr
    assert not any(character in escapes.stdout + escapes.stderr for character in "\x1b\x07\x9b")
    assert "note: \\u001b]52;c;ZXZpbA==\\u0007 read me" in escapes.stdout
    assert "note: 8-bit \\u009b2J" in escapes.stdout
    assert escapes.stdout.startswith("t\\u001b[2Jx: data of no phases")


def test_runs_says_why_submissions_are_closed_and_submit_shows_the_quota(served: Served, tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from tasks.models import Phase

    start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
    phase = Phase.objects.create(task=served.world.task, name="test", kind=Phase.TEST, daily_quota=2, total_quota=5,
                                 gold_version=served.world.gold_version, starts_at=start,
                                 ends_at=start + timedelta(days=1))
    closed = cli("runs", SLUG, server=served.url, token=served.world.alice_token)
    assert closed.stdout.splitlines()[-1] == (f"submissions closed: no phase of {SLUG} is open for submissions now; "
                                              f"the next phase, test, opens at {start:%Y-%m-%d %H:%M} UTC")
    Phase.objects.filter(pk=phase.pk).update(starts_at=start - timedelta(days=3))
    submitted = cli("submit", SLUG, str(write_run(tmp_path, served.world)), "--description", "a method",
                    server=served.url, token=served.world.alice_token)
    assert submitted.returncode == 0, submitted.stderr
    assert "quota (test phase): 1 of 2 runs left today" in submitted.stderr


@pytest.mark.parametrize("args, message", [
    (["--timeout", "nan", "tasks"], "argument --timeout: 'nan' must be a finite number of seconds, 0 or more"),
    (["--timeout", "inf", "tasks"], "argument --timeout: 'inf' must be a finite number of seconds, 0 or more"),
    (["--timeout", "0", "tasks"], "error: --timeout must be more than 0"),
    (["status", "1", "--wait", "--max-wait", "-1"],
     "argument --max-wait: '-1' must be a finite number of seconds, 0 or more"),
    (["submit", SLUG, "run.json", "--max-size", "9" * 400], "argument --max-size: '" + "9" * 40 + "'... is too large "
                                                              "a size"),
    (["--server", "http://[::1", "tasks"], "error: --server http://[::1: Invalid IPv6 URL"),
    (["--server", "http://host:99999", "tasks"],
     "error: --server http://host:99999: the port is not a number from 0 to 65535 (Port out of range 0-65535)"),
    (["--server", "http://exa mple.org", "tasks"],
     "error: --server 'http://exa mple.org': a URL has no spaces or control characters"),
    (["--server", f"http://{'a' * 64}.org", "tasks"],
     f"error: --server http://{'a' * 64}.org: the host name is not valid (each dot-separated part 1 to 63 "
     "characters)"),
])
def test_options_it_cannot_use_exit_2_with_a_message_not_a_traceback(args: list[str], message: str,
                                                                      tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("[]")
    result = cli(*args, server=f"http://127.0.0.1:{closed_port()}", token="a" * 40, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_data_into_a_path_that_is_a_file_exits_2_naming_it(served: Served, tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("a file, not a folder")
    result = cli("data", SLUG, "--out", str(taken), server=served.url)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"error: --out {taken}: cannot make the folder (File exists)" in result.stderr
    assert taken.read_text() == "a file, not a folder"


def test_runs_shows_each_runs_phase_and_keeps_one_phase_with_dash_dash_phase(served: Served, tmp_path: Path) -> None:
    """Two runs named alike in two phases (scored against different gold) are told apart; the quota
    named is the open phase's; terms not accepted leave no quota to report."""
    from datetime import timedelta

    from django.utils import timezone

    from tasks.models import Phase, Run

    world = served.world
    now = timezone.now()
    dev = Phase.objects.create(task=world.task, name="development", kind=Phase.DEVELOPMENT,
                               gold_version=world.gold_version, starts_at=now - timedelta(days=2),
                               ends_at=now + timedelta(days=1))
    early = submit(served, write_run(tmp_path, world, 0.2, 1, "a.json"), "--name", "aurora-run1")
    Phase.objects.filter(pk=dev.pk).update(ends_at=timezone.now())
    Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                         starts_at=timezone.now(), ends_at=now + timedelta(days=3), daily_quota=4, total_quota=9)
    late = submit(served, write_run(tmp_path, world, 0.6, 2, "b.json"), "--name", "aurora-run1")
    assert {Run.objects.get(pk=early).phase.name, Run.objects.get(pk=late).phase.name} == {"development", "test"}
    runs = cli("runs", SLUG, server=served.url, token=world.alice_token)
    assert runs.returncode == 0, runs.stderr
    header = table_row(runs.stdout, "id")
    assert header[:4] == ["id", "name", "phase", "status"]
    assert table_row(runs.stdout, str(early))[1:4] == ["aurora-run1", "development", "done"]
    assert table_row(runs.stdout, str(late))[1:4] == ["aurora-run1", "test", "done"]
    assert runs.stdout.splitlines()[-1].startswith("quota (test phase): 3 of 4 runs left today")
    only = cli("runs", SLUG, "--phase", "development", server=served.url, token=world.alice_token)
    assert only.returncode == 0, only.stderr
    assert table_row(only.stdout, str(early))[1:4] == ["aurora-run1", "development", "done"]
    assert not [line for line in only.stdout.splitlines() if line.split()[:1] == [str(late)]]
    none = cli("runs", SLUG, "--phase", "Test", server=served.url, token=world.alice_token)
    assert none.stdout.splitlines()[0] == ("your team has no runs of demo-task in the phase 'Test' (your runs are "
                                           "in: development, test)")
    # A late run (as an extension of the test phase leaves it: tests/test_late_runs.py) says so.
    Run.objects.filter(pk=late).update(late=True)
    marked = cli("runs", SLUG, server=served.url, token=world.alice_token)
    assert table_row(marked.stdout, str(late))[1:5] == ["aurora-run1", "(late)", "test", "done"]
    assert table_row(marked.stdout, str(early))[1:4] == ["aurora-run1", "development", "done"]
    # Terms the team has not accepted make the quota unusable: it is not reported as runs left.
    world.task.terms = "Be fair."
    world.task.save()
    closed = cli("runs", SLUG, server=served.url, token=world.alice_token)
    assert closed.stdout.splitlines()[-1] == ("submissions closed: accept the terms of demo-task first, on its "
                                              "overview page")


def test_submit_says_when_the_file_is_identical_to_an_earlier_run_of_the_team(served: Served, tmp_path: Path) -> None:
    path = write_run(tmp_path, served.world, seed=11)
    first = submit(served, path, "--name", "once")
    result = cli("submit", SLUG, str(path), "--name", "twice", server=served.url, token=served.world.alice_token)
    assert result.returncode == 0, result.stderr
    submitted = api(served, f"/api/v1/runs/{first}/", served.world.alice_token)["submitted_at"]
    when = submitted[:10] + " " + submitted[11:19]  # the note's "YYYY-MM-DD HH:MM:SS UTC"
    assert f"note: This file is identical to run #{first} 'once' submitted at {when} UTC." in result.stderr
    # Another team's identical file is nobody else's business.
    rival = cli("submit", SLUG, str(path), server=served.url, token=served.world.bob_token)
    assert rival.returncode == 0 and "identical" not in rival.stderr


def test_submit_names_the_phase_while_two_are_open(served: Served, tmp_path: Path) -> None:
    """Issue 43: with the development phase still open beside the test phase, an upload that names
    no phase is refused with both listed; --phase sends it where it belongs."""
    from datetime import timedelta

    from django.utils import timezone

    from tasks.models import Phase, Run

    now = timezone.now()
    version = served.world.gold_version
    for name, kind in (("development", Phase.DEVELOPMENT), ("test", Phase.TEST)):
        Phase.objects.create(task=served.world.task, name=name, kind=kind, gold_version=version,
                             starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1))
    path = write_run(tmp_path, served.world)
    refused = cli("submit", SLUG, str(path), server=served.url, token=served.world.alice_token)
    assert refused.returncode == 2
    assert "  phase: 2 phases of demo-task are open: development (development, gold version 1, until" in refused.stderr
    run_id = submit(served, path, "--phase", "test", "--description", "m")
    assert Run.objects.get(pk=run_id).phase.name == "test"


def test_an_organiser_submits_for_a_team_with_team(served: Served, tmp_path: Path) -> None:
    """Issue 43, item 4: ``submit --team`` uploads on a team's behalf (organisers only), recorded."""
    from tasks.tokens import issue_token

    run_file = str(write_run(tmp_path, served.world))
    refused = cli("--server", served.url, "--token", served.world.alice_token, "submit", SLUG, run_file,
                  "--team", "Borealis")
    assert refused.returncode == 2
    assert "only the task's organisers upload a run on a team's behalf" in refused.stderr
    token = issue_token(served.world.organiser)
    result = cli("--server", served.url, "--token", token, "submit", SLUG, run_file, "--team", "Borealis",
                 "--name", "emailed", "--wait")
    assert result.returncode == 0, result.stderr
    run = api(served, f"/api/v1/runs/{run_id_in(result.stdout)}/", served.world.bob_token)
    assert (run["team"], run["name"]) == ("Borealis", "emailed")
    assert run["uploaded_on_behalf"].startswith("Uploaded on the team's behalf by olivia, an organiser of the task")
    # The team's own status command prints who uploaded it.
    status = cli("--server", served.url, "--token", served.world.bob_token, "status", str(run["id"]))
    assert status.returncode == 0 and f"uploaded:    {run['uploaded_on_behalf']}" in status.stdout

