"""The restore drill's three programs, each run inside Django in a process of the installation it
is about (``python -m devtools.workers restore-populate|restore-traffic|restore-probe``):

- ``populate``: every demo task (``manage.py demo``: each kind, development and test phases,
  baselines, runs of two teams, statistics), results published on two of them, and a task of its
  own, ``busy``, for the uploads that go on while the backup is written;
- ``traffic``: uploads to ``busy``, each scored in-process, until a stop file appears;
- ``probe``: what a restored installation must give back, read through the server's own pages and
  stores: each run's bytes hashed here (not the stored checksum), its scores and per-item vectors,
  the boards (CSV and API), the organisers' results exports, the statistics rows and the
  statistics exports' contents (member by member: a zip's dates are the time it is made).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import time
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from devtools.workers.postgres import drop_database, scratch_database
from devtools.workers.processes import site_env

BUSY = "busy"


def populate(spec: dict[str, Any]) -> dict[str, Any]:
    import django

    django.setup()
    import orjson
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from fixtures.synthetic import generate_gold
    from leaderboard.statistics import compute_task_statistics
    from tasks import organising
    from tasks.models import Phase, Task, Team

    call_command("migrate", verbosity=0, interactive=False)
    call_command("demo", dialogues=spec.get("dialogues", 12), password="drill-password", verbosity=0)
    now = timezone.now()
    for slug in ("stc3-demo", "metric-demo"):  # a round that ended and published its results
        Phase.objects.filter(task__slug=slug, name="test").update(ends_at=now - timedelta(minutes=5),
                                                                  results_published=True)
        compute_task_statistics(Task.objects.get(slug=slug).pk)  # the published board's, on the whole test set
    task = organising.create_task(BUSY, "", "Uploads during the backup")
    gold = generate_gold(20, seed=3)
    version = organising.load_gold_version(task, orjson.dumps(gold), "gold.json")
    Phase.objects.create(task=task, name="open", kind=Phase.DEVELOPMENT, gold_version=version,
                         starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1))
    user = get_user_model().objects.create_user("uploader", password="drill-password")
    Team.objects.create(name="Uploaders", slug="uploaders").members.add(user)
    return {"gold": gold}


def traffic(spec: dict[str, Any]) -> dict[str, Any]:
    import django

    django.setup()
    import orjson
    from django.contrib.auth import get_user_model

    from fixtures.synthetic import generate_run
    from tasks import jobs
    from tasks.models import Task
    from tasks.submissions import Submission, submit_run

    task, user = Task.objects.get(slug=BUSY), get_user_model().objects.get(username="uploader")
    gold, stop, started = spec["gold"], Path(spec["stop"]), Path(spec["started"])
    uploaded = 0
    while not stop.exists() and uploaded < 200:
        run = submit_run(task, user, Submission(content=orjson.dumps(generate_run(gold, noise=0.3, seed=uploaded)),
                                                filename="run.json", name=f"during-backup-{uploaded}"))
        jobs.score_run(run.pk)
        uploaded += 1
        started.touch()
    return {"uploaded": uploaded}


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    import django

    django.setup()
    import orjson
    from django.contrib.auth import get_user_model
    from django.test import Client

    from leaderboard.models import MeasureStatistics, TaskStatistics
    from tasks import blobs
    from tasks.models import Run, Score, ScoreVector, Task

    runs = {}
    for run in Run.objects.select_related("task", "team").order_by("pk"):
        content = blobs.read("runs", run.file_sha256)
        runs[str(run.pk)] = {
            "task": run.task.slug, "team": run.team.name if run.team else None, "name": run.name,
            "status": run.status, "bytes_sha256": hashlib.sha256(content).hexdigest(), "size": len(content),
            "scores": sorted(([score.scope, score.gold_version_id, score.summary, score.details]
                              for score in Score.objects.filter(run=run)), key=repr),
            "vectors": sorted([vector.score.scope, vector.key, vector.mean, bytes(vector.values).hex(),
                               bytes(vector.statistics).hex()]
                              for vector in ScoreVector.objects.filter(score__run=run).select_related("score"))}
    client = Client()
    client.force_login(get_user_model().objects.get(username="organiser"))
    pages: dict[str, Any] = {}
    for task in Task.objects.exclude(slug=BUSY).order_by("slug"):
        for phase, path in [(phase, path) for phase in task.phases.values_list("name", flat=True) for path in (
                f"/tasks/{task.slug}/leaderboard.csv", f"/api/v1/tasks/{task.slug}/leaderboard/",
                f"/organiser/{task.slug}/results.csv", f"/organiser/{task.slug}/results.json",
                f"/tasks/{task.slug}/statistics/all/exports.zip")]:
            answer = client.get(path, {"phase": phase})
            path = f"{path}?phase={phase}"
            body = b"".join(answer.streaming_content) if answer.streaming else answer.content
            if ".zip?" in path and answer.status_code == 200:
                with zipfile.ZipFile(io.BytesIO(body)) as archive:
                    # Without the folder name, which says when the archive was made.
                    pages[path] = {name.split("/", 1)[-1]: hashlib.sha256(archive.read(name)).hexdigest()
                                   for name in sorted(archive.namelist())}
            else:
                if path.startswith(f"/organiser/{task.slug}/results.json") and answer.status_code == 200:
                    exported = orjson.loads(body)
                    exported.pop("exported_at")  # the time of the request
                    body = orjson.dumps(exported)
                # A page refusing the request: its status (its HTML carries a fresh CSRF token).
                pages[path] = ([answer.status_code, hashlib.sha256(body).hexdigest(), len(body)]
                               if answer.status_code == 200 else [answer.status_code])
                if spec.get("parsed") and answer.status_code == 200:
                    if answer.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    # Read, not hashed: across releases a table may gain a column (the upgrade test
                    # compares what both releases show).
                    pages[path] = (list(csv.DictReader(io.StringIO(body.decode()))) if ".csv?" in path
                                   else orjson.loads(body))
    statistics = []
    for record in TaskStatistics.objects.select_related("task"):
        measures = sorted([measure.key, repr(measure.summary), hashlib.sha256(bytes(measure.pairwise)).hexdigest()]
                          for measure in MeasureStatistics.objects.filter(statistics=record))
        statistics.append([record.task.slug, record.scope, record.gold_version_id, record.run_ids, record.alpha,
                           record.permutations, record.seed, measures])
    statistics.sort(key=repr)
    # The stored files by key (a release without ``blobs.stored_keys``, read by the upgrade test, lists none).
    listing = getattr(blobs, "stored_keys", None)
    return {"runs": runs, "pages": pages, "statistics": statistics,
            "stored_files": sorted(listing()) if listing else None}


class Installations:
    """New installations on the suite's kind of database: a SQLite file in the installation's own
    folder, or a scratch database on the suite's PostgreSQL server."""

    def __init__(self, root: Path) -> None:
        from django.conf import settings

        self.root, self.databases = root, []
        database = settings.DATABASES["default"]
        self.server = None
        if database["ENGINE"].endswith("postgresql"):
            credentials = database["USER"] + (f":{database['PASSWORD']}" if database.get("PASSWORD") else "")
            self.server = f"postgres://{credentials}@{database['HOST'] or '127.0.0.1'}:{database['PORT'] or 5432}"
            self.prefix = f"{database['NAME']}_drill"

    def new(self, label: str, **extra: str) -> dict[str, str]:
        folder = self.root / label
        folder.mkdir()
        if self.server:
            self.databases.append(f"{self.prefix}_{label}")
            url = scratch_database(self.server, self.databases[-1])
        else:
            url = f"sqlite:///{folder / 'db.sqlite3'}"
        return site_env(url, folder, **extra)

    def drop(self) -> None:
        for name in self.databases:
            drop_database(self.server, name)


def wait_for(path: Path, process: Any, timeout: float = 120.0) -> None:
    """Until ``path`` exists; an error with the process's own if it ended first."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise RuntimeError(f"the traffic ended first: {process.communicate()[1][-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout:.0f} s")
        time.sleep(0.05)
