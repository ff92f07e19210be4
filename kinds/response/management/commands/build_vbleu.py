"""``manage.py build_vbleu TASK POOL.jsonl [--k 15] [--seed 0] [--ratings R.json] [--parrot-weight W]
[--label L] [--phase NAME ...] [--from-version N] [--gold GOLD.json]``: vBLEU references from a pool, as a
new gold version of a response task (``kinds.response.vbleu``)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kinds.response.models import ReferencePool
from kinds.response.vbleu import STAGES, build_vbleu_version
from scoring.kinds.response import vbleu
from scoring.validation import ValidationFailed, parse_json
from tasks.errors import Rejected
from tasks.models import Task


class ProgressBar:
    """A one-line bar per stage on a terminal stream (``vbleu.Progress``); a finished stage keeps its line."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream, self.width = stream, width
        self.stage = ""
        self.started = time.monotonic()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.stage, self.started = stage, time.monotonic()
        title = STAGES.get(stage, stage)
        elapsed = time.monotonic() - self.started
        if total:
            filled = min(self.width, self.width * done // total)
            line = (f"{title:<22} [{'#' * filled}{'.' * (self.width - filled)}] {100 * done // total:3d}% "
                    f"{done:,}/{total:,} {elapsed:.1f} s")
        else:
            line = f"{title:<22} {done:,} so far {elapsed:.1f} s"
        self.stream.write("\r" + line, ending="\n" if total and done >= total else "")
        self.stream.flush()


class Command(BaseCommand):
    help = ("Extend a response task's gold with vBLEU references (seed 001 sections 3.2 and 4): the top k pool pairs "
            "by BM25 for each item's last context utterance and the utterance itself, weighted by an automatic rater "
            "trained on the pool (or by uploaded human ratings); load the result as a new gold version with its "
            "provenance and re-score the runs. The pool (JSONL, one {\"utterance\", \"response\"} a line) is stored "
            "once by checksum.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the response task's short name")
        parser.add_argument("pool", help="the pool file (JSONL), or the sha256 of a pool stored before")
        parser.add_argument("--k", type=int, default=15, help="pool pairs retrieved per item (default 15)")
        parser.add_argument("--seed", type=int, default=0, help="the automatic rater's seed (default 0)")
        parser.add_argument("--ratings", type=Path, help="human ratings (list_candidates' list with the weights "
                                                         "filled in) instead of the automatic rater")
        parser.add_argument("--parrot-weight", type=float, default=None,
                            help="a fixed weight in [-1, 1] for every parrot reference (default: rated like the "
                                 "others)")
        parser.add_argument("--train-pairs", type=int, default=vbleu.RaterSettings.train_pairs,
                            help=f"true pairs the rater trains on (default {vbleu.RaterSettings.train_pairs:,})")
        parser.add_argument("--held-out-pairs", type=int, default=vbleu.RaterSettings.held_out_pairs,
                            help="true pairs kept apart for the held-out accuracy "
                                 f"(default {vbleu.RaterSettings.held_out_pairs:,})")
        parser.add_argument("--from-version", type=int, default=None, metavar="N",
                            help="the gold version to extend (default: the latest without vBLEU references)")
        parser.add_argument("--gold", type=Path, help="that version's gold file (needed when it holds nugget "
                                                      "alternatives; otherwise its compiled form is used)")
        parser.add_argument("--label", default="", help="the new version's label (default: vBLEU from vN)")
        parser.add_argument("--phase", action="append", default=[], metavar="NAME",
                            help="move this phase to the new version and re-score its runs; repeat for several")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["slug"]).first()
        if task is None:
            raise CommandError(f"no task {options['slug']!r}", returncode=2)
        problems: list[str] = []
        phases = []
        for name in options["phase"]:
            phase = task.phases.filter(name=name).first()
            if phase is None:
                known = ", ".join(task.phases.values_list("name", flat=True)) or "none"
                problems.append(f"--phase: no phase {name!r} in {task.slug} (its phases: {known})")
            else:
                phases.append(phase)
        retrieval = rater = ratings = gold_content = None
        try:
            retrieval = vbleu.RetrievalSettings(k=options["k"])
        except ValueError as error:
            problems.append(f"--k: {error}")
        if options["ratings"] is not None:
            for flag in ("parrot_weight",):
                if options[flag] is not None:
                    problems.append(f"--{flag.replace('_', '-')}: belongs to the automatic rater, not to --ratings")
            try:
                ratings = parse_json(options["ratings"].read_bytes(), "ratings file")
            except OSError as error:
                problems.append(f"{options['ratings']}: cannot read: {error.strerror or error}")
            except ValidationFailed as error:
                problems += [f"{options['ratings']}: {line}" for line in error.errors]
        else:
            try:
                rater = vbleu.RaterSettings(seed=options["seed"], parrot_weight=options["parrot_weight"],
                                            train_pairs=options["train_pairs"],
                                            held_out_pairs=options["held_out_pairs"])
            except ValueError as error:
                problems.append(f"rater: {error}")
        if options["gold"] is not None:
            try:
                gold_content = options["gold"].read_bytes()
            except OSError as error:
                problems.append(f"{options['gold']}: cannot read: {error.strerror or error}")
        source: Any = options["pool"]
        if re.fullmatch(r"[0-9a-f]{64}", source) and not Path(source).exists():
            source = ReferencePool.objects.filter(sha256=source).first()
            if source is None:
                problems.append(f"no stored pool has the sha256 {options['pool']}")
        elif not Path(source).is_file():
            problems.append(f"{source}: no such file")
        if problems:
            self._fail(problems)
        name = source.name if isinstance(source, ReferencePool) else Path(source).name
        label = options["label"] or f"vBLEU from v{options['from_version'] or 'latest'}"
        try:
            built = build_vbleu_version(
                task, source if isinstance(source, ReferencePool) else Path(source),
                from_version=options["from_version"], gold_content=gold_content, retrieval=retrieval, rater=rater,
                ratings=ratings, label=label, phases=phases, pool_name=name, progress=ProgressBar(self.stderr))
        except Rejected as error:
            self.stderr.write("")
            self._fail(error.errors)
        version, extension = built.version, built.extension
        for warning in version.warnings:
            self.stderr.write(f"warning: {warning}")
        rater_report = extension.provenance["rater"]
        how = (f"automatic rater, held-out accuracy {rater_report['held_out_accuracy']:.4f}, seed "
               f"{rater_report['settings']['seed']}" if rater_report["kind"] == "automatic" else "human ratings")
        reruns = task.runs.filter(gold_version=version, is_baseline=False).count()
        self.stdout.write(
            f"{task.slug}: gold version {version.number} extends version {version.provenance['extends']}: "
            f"{extension.provenance['references_added']:,} references added to {task.items(version.n_items)} from pool "
            f"{built.pool.sha256[:12]}… ({built.pool.n_pairs:,} pairs{', stored now' if built.pool_created else ''}; "
            f"k = {retrieval.k}; {how}); {reruns} run(s) queued for re-scoring")
        self.stdout.write(str(version.number))

    def _fail(self, problems: list[str]) -> None:
        for line in problems:
            self.stderr.write(line)
        raise CommandError(f"{len(problems)} problem(s); nothing was stored", returncode=2)
