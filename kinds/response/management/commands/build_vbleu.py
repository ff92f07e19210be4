"""``manage.py build_vbleu TASK POOL.jsonl [--method vbleu|vbertscore] [--k 15] [--seed 0] [--ratings R.json]
[--parrot-weight W] [--label L] [--phase NAME ...] [--from-version N] [--gold GOLD.json]``: vBLEU references
from a pool, as a new gold version of a response task (``kinds.response.extension_jobs``). ``--method vbertscore``:
vBERTScore's extension (Tsuta et al. 2023, section 4.3): retrieval by the encoder's sentence vectors and a
rater on the encoder's features.

``manage.py build_vbleu --gold GOLD.json --out EXTENDED.json POOL.jsonl [--preset P | --config C.json]
[--provenance P.json] [same options]``: the same work offline, without a database: the extended gold
the server would store for a task of that configuration (its word vectors feed the rater), byte for
byte, so organisers can inspect it before loading it and scientists can reproduce it."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kinds.response.extension_jobs import STAGES, build_vbleu_version
from kinds.response.models import ReferencePool
from scoring.kinds.response import vbleu
from scoring.validation import ValidationFailed, parse_json
from tasks.errors import Rejected
from tasks.models import Task


def _parrot_weight(text: str) -> float | str:
    """``--parrot-weight``: a number, or ``rated`` (the rater weighs the parrot)."""
    if text == "rated":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [-1, 1] or 'rated', not {text!r}") from None


class ProgressBar:
    """Progress of each stage (``vbleu.Progress``): on a terminal, a one-line bar redrawn in place
    (a finished stage keeps its line); elsewhere (a log file, a pipe, a service's journal), where a
    carriage return does not go back and the redraws made one 30 KB line, a plain line when a stage
    starts, at most every ``every`` seconds while it runs, and when it ends."""

    def __init__(self, stream: TextIO, width: int = 30, every: float = 10.0, terminal: bool | None = None) -> None:
        self.stream, self.width, self.every = stream, width, every
        self.terminal = _is_terminal(stream) if terminal is None else terminal
        self.stage = ""
        self.started = self.printed = time.monotonic()

    def __call__(self, stage: str, done: int, total: int) -> None:
        new_stage = stage != self.stage
        if new_stage:
            self.stage, self.started = stage, time.monotonic()
        title = STAGES.get(stage, stage)
        now = time.monotonic()
        elapsed = now - self.started
        finished = bool(total) and done >= total
        if not self.terminal:
            if new_stage or finished or now - self.printed >= self.every:
                self.printed = now
                counted = f"{done:,}/{total:,} ({100 * done // total}%)" if total else f"{done:,} so far"
                self.stream.write(f"{title}: {counted}, {elapsed:.1f} s\n")  # a whole line on any stream
                self.stream.flush()
            return
        if total:
            filled = min(self.width, self.width * done // total)
            line = (f"{title:<22} [{'#' * filled}{'.' * (self.width - filled)}] {100 * done // total:3d}% "
                    f"{done:,}/{total:,} {elapsed:.1f} s")
        else:
            line = f"{title:<22} {done:,} so far {elapsed:.1f} s"
        self.stream.write("\r" + line, ending="\n" if finished else "")
        self.stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Command(BaseCommand):
    help = ("Extend a response task's gold with vBLEU references (Tsuta et al. 2023, sections 3.2 and 4): "
            "the top k pool pairs "
            "by BM25 for each item's last context utterance and the utterance itself, weighted by an automatic rater "
            "trained on the pool (or by uploaded human ratings); load the result as a new gold version with its "
            "provenance and re-score the runs. The pool (JSONL, one {\"utterance\", \"response\"} a line) is stored "
            "once by checksum.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("targets", nargs="+", metavar="TASK POOL",
                            help="the response task's short name and the pool file (JSONL), or the sha256 of a pool "
                                 "stored before; with --out, the pool file alone")
        parser.add_argument("--out", type=Path, default=None, metavar="EXTENDED.json",
                            help="offline: write the extended gold here instead of loading it (needs --gold; no "
                                 "database is used)")
        parser.add_argument("--provenance", type=Path, default=None, metavar="P.json",
                            help="offline: also write the provenance the server would record")
        parser.add_argument("--preset", default=None,
                            help="offline: the task configuration's preset, whose word vectors feed the rater "
                                 "(default: response)")
        parser.add_argument("--config", type=Path, default=None, metavar="C.json",
                            help="offline: a JSON task configuration instead of a preset")
        parser.add_argument("--method", default="vbleu", metavar="vbleu|vbertscore",
                            help="vbleu (default): BM25 retrieval and a rater on the task's word vectors; vbertscore: "
                                 "retrieval by multilingual-e5-small sentence vectors and a rater on the encoder's "
                                 "features (Tsuta et al. 2023, section 4.3); every pool text is encoded once and kept "
                                 "for the next build from the same pool")
        parser.add_argument("--k", type=int, default=15, help="pool pairs retrieved per item (default 15)")
        parser.add_argument("--seed", type=int, default=0, help="the automatic rater's seed (default 0)")
        parser.add_argument("--ratings", type=Path, help="human ratings (list_candidates' list with the weights "
                                                         "filled in) instead of the automatic rater")
        parser.add_argument("--parrot-weight", type=_parrot_weight, default=None, metavar="W|rated",
                            help="the fixed weight in [-1, 1] of every parrot reference (default "
                                 f"{vbleu.RaterSettings.parrot_weight:g}: an echo of the utterance is not a good "
                                 "reply), or 'rated': the rater weighs it like the others (rewards echoes)")
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
        targets = options["targets"]
        if options["out"] is not None:
            self._offline(options)
            return
        problems = [f"--{flag}: only with --out (offline)" for flag in ("provenance", "preset", "config")
                    if options[flag] is not None]
        if len(targets) != 2:
            problems.append(f"give the task and the pool (or --out EXTENDED.json and the pool alone), not "
                            f"{len(targets)} argument(s)")
        if problems:
            self._fail(problems)
        options["slug"], options["pool"] = targets
        task = Task.objects.filter(slug=options["slug"]).first()
        if task is None:
            raise CommandError(f"no task {options['slug']!r}", returncode=2)
        phases = []
        for name in options["phase"]:
            phase = task.phases.filter(name=name).first()
            if phase is None:
                known = ", ".join(task.phases.values_list("name", flat=True)) or "none"
                problems.append(f"--phase: no phase {name!r} in {task.slug} (its phases: {known})")
            else:
                phases.append(phase)
        retrieval, rater, ratings, gold_content = self._settings(options, problems)
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
        if built.encodings:
            self.stderr.write("the pool's sentence vectors: " + ("read from the store (encoded by an earlier build)"
                                                                if built.encodings == "stored" else
                                                                "encoded now and kept for the next build"))
        reruns = task.runs.filter(gold_version=version, is_baseline=False).count()
        self.stdout.write(
            f"{task.slug}: gold version {version.number} extends version {version.provenance['extends']}: "
            f"{extension.provenance['references_added']:,} references added to {task.items(version.n_items)} from pool "
            f"{built.pool.sha256[:12]}… ({built.pool.n_pairs:,} pairs{', stored now' if built.pool_created else ''}; "
            f"k = {retrieval.k}; {self._how(extension)}); {reruns} run(s) queued for re-scoring")
        self.stdout.write(str(version.number))

    @staticmethod
    def _how(extension: vbleu.Extension) -> str:
        rater_report = extension.provenance["rater"]
        encodings = extension.provenance.get("encodings")
        # Only an extension that read sentence vectors says so: vBLEU's line is what it always was.
        encoder = (f"; retrieval {extension.provenance['retrieval']['settings'].get('retriever', 'bm25')}, "
                   f"{encodings['texts']:,} pool texts' sentence vectors {encodings['sha256'][:12]}…"
                   ) if encodings else ""
        if rater_report["kind"] != "automatic":
            return "human ratings" + encoder
        parrot = rater_report["settings"]["parrot_weight"]
        features = rater_report["settings"].get("features")
        return (f"automatic rater{f' on {features} features' if features else ''}, held-out accuracy "
                f"{rater_report['held_out_accuracy']:.4f}, seed {rater_report['settings']['seed']}, parrots "
                f"{'rated' if parrot is None else f'weighted {parrot:g}'}{encoder}")

    def _settings(self, options: dict[str, Any], problems: list[str]) -> tuple[Any, Any, Any, bytes | None]:
        """Retrieval and rater settings, the ratings and the gold file's bytes; problems are appended."""
        retrieval = rater = ratings = gold_content = None
        method = options["method"]
        if method not in vbleu.METHODS:
            problems.append(f"--method: one of {', '.join(vbleu.METHODS)}, not {method!r}")
            method = "vbleu"
        retriever, features = vbleu.METHODS[method]
        try:
            retrieval = vbleu.RetrievalSettings(k=options["k"], retriever=retriever)
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
            parrot = options["parrot_weight"]
            parrot = vbleu.RaterSettings.parrot_weight if parrot is None else None if parrot == "rated" else parrot
            try:
                rater = vbleu.RaterSettings(seed=options["seed"], parrot_weight=parrot,
                                            train_pairs=options["train_pairs"],
                                            held_out_pairs=options["held_out_pairs"], features=features)
            except ValueError as error:
                problems.append(f"rater: {error}")
        if options["gold"] is not None:
            try:
                gold_content = options["gold"].read_bytes()
            except OSError as error:
                problems.append(f"{options['gold']}: cannot read: {error.strerror or error}")
        return retrieval, rater, ratings, gold_content

    def _offline(self, options: dict[str, Any]) -> None:
        """``--out``: extend the gold file from the pool file and write what the server would store.

        No database: the task's configuration comes from ``--preset`` or ``--config``, and the
        bytes written are ``Extension.gold_json()``, which ``build_vbleu_version`` loads as the new
        version. Written to a temporary file and renamed: never half-written."""
        from scoring.kinds import get_kind
        from scoring.kinds.response.kind import task_tokenizer, task_vectors

        problems = [f"--{flag.replace('_', '-')}: belongs to a task on the server, not to --out"
                    for flag in ("phase", "label", "from_version") if options[flag]]
        targets = options["targets"]
        if len(targets) != 1:
            problems.append(f"with --out give the pool file alone, not {len(targets)} arguments")
        if options["gold"] is None:
            problems.append("--out needs --gold GOLD.json, the gold to extend")
        if options["preset"] is not None and options["config"] is not None:
            problems.append("--preset and --config: give one of them")
        retrieval, rater, ratings, gold_content = self._settings(options, problems)
        kind = get_kind("response")
        config = None
        try:
            if options["config"] is not None:
                config = kind.config(parse_json(options["config"].read_bytes(), "configuration file"))
            else:
                preset = options["preset"] or kind.default_preset
                if preset not in kind.presets:
                    problems.append(f"--preset: no preset {preset!r} (known: {', '.join(kind.presets)})")
                else:
                    config = kind.preset(preset)
        except OSError as error:
            problems.append(f"{options['config']}: cannot read: {error.strerror or error}")
        except ValidationFailed as error:
            problems += [f"{options['config']}: {line}" for line in error.errors]
        except ValueError as error:
            problems.append(f"{options['config']}: {error}")
        pool_path = Path(targets[-1])
        if not pool_path.is_file():
            problems.append(f"{pool_path}: no such file")
        out: Path = options["out"]
        if not out.parent.is_dir():
            problems.append(f"--out: the folder {out.parent} does not exist")
        gold_data = None
        if gold_content is not None:
            try:
                gold_data = parse_json(gold_content, "gold file")
            except ValidationFailed as error:
                problems += [f"{options['gold']}: {line}" for line in error.errors]
        if problems:
            self._fail(problems)
        # The configuration's language decides the pool steps' tokens, as on the server (build_vbleu_version).
        retrieval = dataclasses.replace(retrieval, tokenizer=task_tokenizer(config))
        try:
            pool = vbleu.read_pool(pool_path, progress=ProgressBar(self.stderr))
            vectors = task_vectors(config) if ratings is None and not rater.needs_encoder else None
            extension = vbleu.extend_gold(gold_data, pool, retrieval=retrieval, rater=None if ratings else rater,
                                          ratings=ratings, vectors=vectors, progress=ProgressBar(self.stderr))
        except ValidationFailed as error:
            self.stderr.write("")
            self._fail(error.errors)
        except (ValueError, RuntimeError) as error:  # bad settings, a small pool; NlpUnavailable, EncoderUnavailable
            self.stderr.write("")
            self._fail([str(error)])
        written = [(out, extension.gold_json())]
        if options["provenance"] is not None:
            written.append((options["provenance"], extension.provenance_json()))
        _write_all(written)
        self.stdout.write(
            f"{out}: {extension.provenance['references_added']:,} references added to "
            f"{extension.provenance['items']:,} items from pool {pool.sha256[:12]}… ({len(pool):,} pairs; "
            f"k = {retrieval.k}; {self._how(extension)})")

    def _fail(self, problems: list[str]) -> NoReturn:
        for line in problems:
            self.stderr.write(line)
        raise CommandError(f"{len(problems)} problem(s); nothing was stored", returncode=2)


def _write_all(files: list[tuple[Path, bytes]]) -> None:
    """Write every file through a temporary file in its folder, renamed once all are written."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in files:
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged.append((temporary, path))
            with os.fdopen(handle, "wb") as output:
                output.write(data)
        for temporary, path in staged:
            os.replace(temporary, path)
    except BaseException:
        for temporary, _ in staged:
            Path(temporary).unlink(missing_ok=True)
        raise
