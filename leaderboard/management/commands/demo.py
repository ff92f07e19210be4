"""``manage.py demo``: one demo task per kind, each with a development and a test phase, generated
gold, baselines, two teams and scored runs, so that every screen of the server has something on it."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from fixtures import metric_dims_demo, response_demo, response_demo_ja, response_demo_zh
from fixtures.synthetic import generate_gold, generate_run
from leaderboard.board import build_board, run_counts
from leaderboard.statistics import compute_task_statistics
from scoring.kinds import KINDS
from tasks.models import Phase, Task, Team
from tasks.organising import create_task, load_gold_version
from tasks.submissions import Submission, submit_run
from tasks.tokens import LOGINS_FILE, NO_TOKEN, issue_token, token_line

DEMO_SLUG = "stc3-demo"  # the first demo; its files are also written to var/demo/ itself
DEMO_USERS = ("organiser", "alice", "bob")
MAX_DIALOGUES = 10_000  # generated in memory with every annotator's labels; the default is 300


@dataclass
class Demo:
    """What one kind's demo needs: its gold files and its participants' runs (team 0 or 1, name,
    run file, method description) for the development and the test gold."""

    slug: str
    kind: str
    title: str
    description: str
    preset: str
    development: Any
    test: Any
    runs: Callable[[Any, str], list[tuple[int, str, Any, str]]]
    sample: Callable[[Any], Any]
    # Settings beside the preset's (the metrics demo's dimensions and languages), as an organiser sets them.
    config: dict[str, Any] | None = None


def stc3_demo(size: int, seed: int) -> Demo:
    def runs(gold: Any, phase: str) -> list[tuple[int, str, Any, str]]:
        offset = 0 if phase == "development" else 50
        plan = [(0, "aurora-run1", 0.15, ("quality", "nugget")), (0, "aurora-run2", 0.35, ("quality", "nugget")),
                (1, "borealis-dq", 0.25, ("quality",)), (1, "borealis-nd", 0.5, ("nugget",))]
        return [(team, name, generate_run(gold, "noisy", noise=noise, seed=100 + offset + number, subtasks=parts),
                 f"Gold mixed with {noise:.0%} noise (demo).")
                for number, (team, name, noise, parts) in enumerate(plan)]

    return Demo(DEMO_SLUG, "stc3", "STC-3 style demo (synthetic data)",
                f"Dialogue quality and nugget detection on synthetic customer-helpdesk dialogues: {size} development "
                f"and {size} test dialogues, 19 annotators, both subtasks.", "stc3",
                generate_gold(size, seed=seed), generate_gold(size, seed=seed + 1), runs,
                lambda gold: generate_run(gold, "noisy", noise=0.3, seed=999))


def metric_demo_task(size: int, seed: int) -> Demo:
    contexts = max(12, size // 20)  # per language: 15 by default, 16 dimension slices of them

    def runs(gold: Any, phase: str) -> list[tuple[int, str, Any, str]]:
        made = metric_dims_demo.generate_runs(gold, seed=seed + (0 if phase == "development" else 7))
        teams = {"close": 0, "noisy": 0, "length": 1, "contrary": 1}
        return [(team, f"{'aurora' if team == 0 else 'borealis'}-{name}", made[name],
                 f"A demo metric: '{name}', {METRIC_WORDS[name]}.") for name, team in teams.items()]

    return Demo("metric-demo", "metric", "Metrics track demo (synthetic data)",
                "Participants submit an evaluation metric's score for every item; the server meta-evaluates it "
                "against hidden human judgements on eight dimensions, as DSTC11's metrics track did: turns judged "
                "on appropriateness, relevance, content richness and grammatical correctness, whole dialogues on "
                f"coherence, engageness, informativeness and overall quality, in English and Chinese, by three "
                f"annotators each. {contexts} contexts per language answered by 4 systems per gold.",
                "metric-quick",
                metric_dims_demo.generate_gold(contexts, seed=seed),
                metric_dims_demo.generate_gold(contexts, seed=seed + 1),
                runs, lambda gold: metric_dims_demo.generate_runs(gold, seed=999)["noisy"],
                config=metric_dims_demo.CONFIG)


# What each made-up run of the demo is, in words (a run's description is public: no file names).
METRIC_WORDS = {"close": "the mean of the item's human judgements plus a little noise",
                "noisy": "the mean of the item's human judgements plus much noise",
                "length": "the item's length in characters",
                "contrary": "the opposite of the mean human judgement, plus noise (worse than random)"}
SYSTEM_WORDS = {"strong": "the expected content in varied wordings, split into nuggets with their acts",
                "medium": "the first expected point only, then a vague closing",
                "weak": "a reply meant for another conversation, without nuggets"}
# The Chinese and Japanese demos' runs bring no nuggets: their own words (issue 42).
CJK_SYSTEM_WORDS = {"zh": {"strong": "a good reply in other words than the references",
                           "medium": "a good reply on two contexts in three, small talk elsewhere",
                           "weak": "everyday small talk that answers none of the messages"},
                    "ja": {"strong": "a good reply in other words than the references",
                           "medium": "a good reply on two contexts in three, a reply meant for another "
                                     "conversation elsewhere",
                           "weak": "a reply meant for another conversation"}}


def response_demo_task(size: int, seed: int) -> Demo:
    contexts = max(20, size // 5)

    def runs(gold: Any, phase: str) -> list[tuple[int, str, Any, str]]:
        made = response_demo.generate_runs(gold, seed=seed + (0 if phase == "development" else 7))
        teams = {"strong": 0, "medium": 0, "weak": 1}
        return [(team, f"{'aurora' if team == 0 else 'borealis'}-{name}", made[name],
                 f"A demo system: '{name}', {SYSTEM_WORDS[name]}.") for name, team in teams.items()]

    return Demo("response-demo", "response", "Response generation demo (synthetic data)",
                f"Participants return one response per dialogue context, scored with BLEU, deltaBLEU and POSSCORE "
                f"against weighted references (higher is better), with nugget-level feedback. {contexts} contexts "
                f"per gold.", "response",
                response_demo.generate_gold(contexts, seed=seed, prefix="dev-"),
                response_demo.generate_gold(contexts, seed=seed + 1, prefix="test-"),
                runs, lambda gold: response_demo.generate_runs(gold, seed=999)["medium"])


def cjk_response_demo(module: Any, language: str, contexts: int, seed: int, slug: str, title: str, description: str,
                      preset: str) -> Demo:
    """A response demo task in Chinese or Japanese: its fixtures module's golds and runs, the teams
    and run names of every language's demo, the systems described in the task's language words."""

    def runs(gold: Any, phase: str) -> list[tuple[int, str, Any, str]]:
        made = module.generate_runs(gold, seed=seed + (0 if phase == "development" else 7))
        teams = {"strong": 0, "medium": 0, "weak": 1}
        return [(team, f"{'aurora' if team == 0 else 'borealis'}-{name}", made[name],
                 f"A demo system: '{name}', {CJK_SYSTEM_WORDS[language][name]}.") for name, team in teams.items()]

    return Demo(slug, "response", title, description, preset,
                module.generate_gold(contexts, seed=seed, prefix="dev-"),
                module.generate_gold(contexts, seed=seed + 1, prefix="test-"),
                runs, lambda gold: module.generate_runs(gold, seed=999)["medium"])


def response_ja_demo_task(size: int, seed: int) -> Demo:
    contexts = max(20, size // 10)
    return cjk_response_demo(
        response_demo_ja, "ja", contexts, seed, "response-ja-demo",
        "Japanese response generation demo (synthetic data)",
        f"Participants return one response per Japanese customer-helpdesk message, scored with BLEU and "
        f"deltaBLEU on sacrebleu's ja-mecab tokens, POSSCORE with GiNZA's tags and vectors, and BERTScore "
        f"with multilingual-e5-small's token vectors (higher is better). {contexts} contexts per gold.",
        "response-ja-bertscore")


def response_zh_demo_task(size: int, seed: int) -> Demo:
    contexts = max(20, size // 10)
    return cjk_response_demo(
        response_demo_zh, "zh", contexts, seed, "response-zh-demo",
        "Chinese response generation demo (synthetic data)",
        f"Participants return one response per Chinese customer-helpdesk message, scored with BLEU and "
        f"deltaBLEU on sacrebleu's zh tokens (every Chinese character a token), POSSCORE with jieba's words "
        f"and tags and word vectors from multilingual-e5-small, and BERTScore with the same encoder's token "
        f"vectors (higher is better). {contexts} contexts per gold.",
        "response-zh")


DEMOS: list[Callable[[int, int], Demo]] = [stc3_demo, response_demo_task, response_zh_demo_task, response_ja_demo_task,
                                           metric_demo_task]


TOKEN_LINE = token_line("alice")
DEAD_TOKEN = NO_TOKEN.format(username="alice")


def current_logins(path: Path) -> str:
    """The demo's logins as they stand now: a token alice has replaced or revoked since the demo
    wrote it no longer works, so it is not printed again (the file is rewritten without it)."""
    from rest_framework import exceptions

    from tasks.tokens import TokenAuthentication

    text = path.read_text()
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if not line.startswith(TOKEN_LINE) or line.startswith(TOKEN_LINE + "("):
            continue
        token = line[len(TOKEN_LINE):].strip()
        try:
            user, _ = TokenAuthentication().authenticate_credentials(token.encode())
            alive = user.username == "alice"
        except exceptions.AuthenticationFailed:
            alive = False
        if not alive:
            lines[index] = TOKEN_LINE + DEAD_TOKEN + "\n"
            text = "".join(lines)
            path.write_text(text)
    return text


def runs_per_phase(task: Task) -> str:
    """What the demo made, counted as the pages count it (``leaderboard.board.run_counts`` of each
    phase's board as its organisers see it): participants' runs, baselines, and the runs with each
    measure group's scores where some run leaves a group out (the DQ-only and ND-only runs)."""
    parts = []
    for phase in task.phases.order_by("starts_at"):
        counts = run_counts(build_board(task, phase, organiser=True))
        groups = " and ".join(f"{count} with {title} scores" for title, count in counts["groups"])
        parts.append(f"{phase.name}: {counts['total']} runs ({counts['participants']} participants' runs and "
                     f"{counts['baselines']} baselines{f'; {groups}' if groups else ''})")
    return "; ".join(parts)


class Command(BaseCommand):
    help = ("Create (once) a demo task of every kind, each with a development and a test phase, synthetic gold, "
            "baselines, two teams and scored runs.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dialogues", type=int, default=300, help="items per gold of the DQ/ND demo "
                            "(the other demos scale with it)")
        parser.add_argument("--seed", type=int, default=14)
        parser.add_argument("--password", default=None, help="password for the demo accounts (default: random)")

    def handle(self, *args: Any, **options: Any) -> None:
        logins = Path(settings.VAR_DIR) / LOGINS_FILE
        if Task.objects.filter(slug=DEMO_SLUG).exists():
            self.stdout.write(f"demo task {DEMO_SLUG} exists already")
            if logins.exists():
                self.stdout.write(current_logins(logins), ending="")
            return
        # Checked before anything is stored: the accounts are committed before the tasks are built,
        # so a failure later would leave them behind and stop every later run of the command.
        problems = []
        if not 1 <= options["dialogues"] <= MAX_DIALOGUES:
            problems.append(f"--dialogues must be between 1 and {MAX_DIALOGUES:,} (got {options['dialogues']})")
        if options["seed"] < 0:
            problems.append(f"--seed must be 0 or more (got {options['seed']})")
        users = get_user_model()
        taken = sorted(users.objects.filter(username__in=DEMO_USERS).values_list("username", flat=True))
        if taken:
            problems.append(f"the demo creates the accounts {', '.join(DEMO_USERS)}, and {', '.join(taken)} "
                            "exist(s) already: run it on a fresh database")
        teams = sorted(Team.objects.filter(slug__in=("aurora", "borealis")).values_list("name", flat=True))
        if teams:
            problems.append(f"the demo creates the teams Aurora and Borealis, and {', '.join(teams)} exist(s) "
                            "already: run it on a fresh database")
        if problems:
            raise CommandError("; ".join(problems) + "; nothing was created", returncode=2)
        password = options["password"] or secrets.token_urlsafe(9)
        with transaction.atomic():
            organiser = users.objects.create_user("organiser", password=password, is_staff=True, is_superuser=True)
            participants, tokens = [], []
            for username, team_name, slug in (("alice", "Aurora", "aurora"), ("bob", "Borealis", "borealis")):
                user = users.objects.create_user(username, password=password)
                Team.objects.create(name=team_name, slug=slug).members.add(user)
                tokens.append(issue_token(user))
                participants.append(user)
        for build in DEMOS:
            demo = build(options["dialogues"], options["seed"])
            if demo.kind in KINDS:
                self._build(demo, organiser, participants)
        text = (f"organiser login: organiser / {password}   (admin at /admin/)\n"
                f"participant login: alice / {password}   (team Aurora; bob / same password, team Borealis)\n"
                f"alice's API token: {tokens[0]}\n")
        logins.write_text(text)
        logins.chmod(0o600)
        self.stdout.write(text, ending="")

    def _build(self, demo: Demo, organiser: Any, participants: list[Any]) -> None:
        """The task, its two gold versions and phases (development over, test open now with a live
        subset), the runs of both phases, statistics, and the files to try it with."""
        now = timezone.now()
        with transaction.atomic():
            task = create_task(demo.slug, demo.preset, demo.title, demo.description, kind=demo.kind)
            if demo.config:
                task.config = {**task.config, **demo.config}
                task.full_clean()
                task.save(update_fields=["config"])
            task.organisers.add(organiser)
            development = load_gold_version(task, orjson.dumps(demo.development), "development-gold.json", organiser,
                                            "development")
            test = load_gold_version(task, orjson.dumps(demo.test), "test-gold.json", organiser, "test")
            Phase.objects.create(task=task, name="development", kind=Phase.DEVELOPMENT, gold_version=development,
                                 starts_at=now - timedelta(days=30), ends_at=now - timedelta(days=2))
            Phase.objects.create(task=task, name="test", kind=Phase.TEST, gold_version=test,
                                 starts_at=now - timedelta(days=2), ends_at=now + timedelta(days=14),
                                 live_subset_size=max(2, test.n_items // 2), live_subset_seed=7,
                                 per_item_feedback=False, requires_method_description=True)
        for phase_name, gold in (("development", demo.development), ("test", demo.test)):
            phase = task.phases.get(name=phase_name)
            for team, name, content, description in demo.runs(gold, phase_name):
                submit_run(task, participants[team], Submission(
                    content=orjson.dumps(content), filename=f"{name}.json", name=name, description=description), phase)
        compute_task_statistics(task.pk)  # at once: a background thread would die with this command
        self.stdout.write(f"demo task {demo.slug} ({demo.kind}): development and test phases, "
                          f"{task.items(development.n_items)} each; {runs_per_phase(task)}")
        self._write_files(task, demo)

    def _write_files(self, task: Task, demo: Demo) -> None:
        """Files to try the server with, in var/demo/<task>/ (never served): the test data as
        participants get it, a run for the open test phase, the kind's baselines as run files, and the
        test gold for the offline ``score`` and ``compare`` commands. The DQ/ND demo's are also in
        var/demo/ itself (the README's examples)."""
        folders = [Path(settings.VAR_DIR) / "demo" / demo.slug]
        if demo.slug == DEMO_SLUG:
            folders.append(Path(settings.VAR_DIR) / "demo")
        kind, config = task.kind_impl, task.kind_config
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "test-data.json").write_bytes(orjson.dumps(kind.participant_data(demo.test, config)))
            (folder / "sample-run.json").write_bytes(orjson.dumps(demo.sample(demo.test)))
            (folder / "gold.json").write_bytes(orjson.dumps(demo.test))
            if demo.config:  # the settings a task needs for this gold (create_task --config-file)
                (folder / "config.json").write_bytes(orjson.dumps(demo.config, option=orjson.OPT_INDENT_2))
            # The baselines as run files too: with sample-run.json, runs to try `manage.py compare` with.
            for baseline in kind.baselines(kind.compile_gold(demo.test, config), config):
                (folder / f"baseline-{baseline.name}.json").write_bytes(orjson.dumps(baseline.content))
        # A dialogue pool in the task's language to try vBLEU with (the organiser's vBLEU page, or
        # manage.py build_vbleu), and on the Chinese and Japanese tasks, which report BERTScore, vBERTScore.
        pools = {"response-demo": (response_demo.write_pool, "vBLEU"),
                 "response-ja-demo": (response_demo_ja.write_pool, "vBLEU, vBERTScore"),
                 "response-zh-demo": (response_demo_zh.write_pool, "vBLEU, vBERTScore")}
        pool = pools.get(demo.slug)
        if pool:
            pool[0](folders[0] / "pool.jsonl")
        self.stdout.write(f"  files to try it with: {folders[0]}/sample-run.json (upload it), test-data.json, "
                          "gold.json" + (", config.json (create_task --config-file)" if demo.config else "")
                          + (f", pool.jsonl ({pool[1]})" if pool else ""))
