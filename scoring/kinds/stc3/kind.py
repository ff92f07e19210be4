"""The DQ/ND kind (NTCIR-14 STC-3, NTCIR-15/16 DialEval): the first kind behind the interface.

Everything about dialogue quality dimensions, scales and nugget types stays in this module and in
the modules it wraps (``scoring.kinds.stc3.config``, ``scoring.kinds.stc3.formats``, ``scoring.kinds.stc3.evaluate``,
``scoring.kinds.stc3.baselines``), which compute exactly the numbers they computed before the interface
existed (tests compare them bit for bit).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from scoring.kinds.base import Baseline, Kind, MeasureSpec, Scored, canonical_record, describe_value, measure_key
from scoring.kinds.stc3.baselines import popularity_run, uniform_run
from scoring.kinds.stc3.config import PRESETS, TaskConfig
from scoring.kinds.stc3.evaluate import Result, evaluate, normalise
from scoring.kinds.stc3.formats import Gold, Run, check_run_shape, load_gold, load_run, restrict
from scoring.kinds.stc3.measures import MEASURES
from scoring.validation import canonical_id

# The official measures of STC-3 and DialEval (overview papers): RSNOD and NMD for DQ, JSD and
# RNSS for ND. The others are reported beside them.
OFFICIAL = {"quality": ("rsnod", "nmd"), "nugget": ("jsd", "rnss")}

# What the STC-3 dimensions mean (Zeng et al., NTCIR-14 STC-3 overview); a task with other
# dimensions shows their names.
DIMENSION_TITLES = {"A": "task accomplishment", "S": "customer satisfaction", "E": "dialogue effectiveness"}

# What the scoring settings stored with every score mean (docs/scoring.md, "Variants" and "Aggregation").
VARIANT_TITLES = {"paper": "the overview papers' formulas", "stc3-2018": "the 2018 STC-3 script's SNOD/RSNOD"}
AVERAGING_TITLES = {"macro": "every dialogue weighs the same", "micro": "every turn of a side weighs the same"}


def _micro_nugget(alpha: float) -> Any:
    """Micro-averaged ND figure from summed per-dialogue statistics
    (customer sum, customer turns, helpdesk sum, helpdesk turns)."""

    def corpus(totals: np.ndarray) -> float:
        customer_sum, customer_n, helpdesk_sum, helpdesk_n = totals.tolist()
        if customer_n == 0:
            return helpdesk_sum / helpdesk_n
        if helpdesk_n == 0:
            return customer_sum / customer_n
        return alpha * customer_sum / customer_n + (1.0 - alpha) * helpdesk_sum / helpdesk_n

    return corpus


class Stc3Kind(Kind):
    name = "stc3"
    title = "Dialogue quality and nugget detection (STC-3 / DialEval)"
    short_title = "dialogue quality and nugget detection (DQ/ND)"
    run_entry_keys = ("quality", "nugget")
    item_noun = "dialogue"
    presets: Mapping[str, Mapping[str, Any]] = {name: config.to_dict() for name, config in PRESETS.items()}
    default_preset = "stc3"

    def config(self, data: Mapping[str, Any]) -> TaskConfig:
        return TaskConfig.from_dict(dict(data))

    def compile_gold(self, data: object, config: TaskConfig) -> Gold:
        return load_gold(data, config)

    def gold_from_bytes(self, blob: bytes) -> Gold:
        return Gold.from_bytes(blob)

    def parse_run(self, data: object, gold: Gold, config: TaskConfig, *, allow_missing: bool = False) -> Run:
        return load_run(data, gold, allow_missing=allow_missing)

    def check_run_file(self, content: bytes, gold: Gold) -> None:
        check_run_shape(content, gold)

    def run_parts(self, run: Run) -> list[str]:
        return [part for part, present in (("quality", run.quality is not None),
                                           ("nugget", run.customer is not None)) if present]

    def measures(self, config: TaskConfig, gold: Gold | None = None) -> list[MeasureSpec]:
        specs: list[MeasureSpec] = []
        if gold is None or gold.has_quality:
            for dim in config.quality_dimensions:
                meaning = DIMENSION_TITLES.get(dim, dim)
                for name in config.quality_measures:
                    measure = MEASURES[name]
                    specs.append(MeasureSpec(
                        key=measure_key("quality", dim, name), name=name,
                        title=f"{measure.title}, {dim} ({meaning})", short_title=name.upper(),
                        higher_is_better=not measure.lower_is_better, value_range=measure.value_range,
                        citation=measure.citation, official=name in OFFICIAL["quality"],
                        group="quality", group_title="Dialogue quality (DQ)", subgroup=dim, subgroup_title=meaning,
                        description=f"{dim}: {meaning}"))
        if gold is None or gold.has_nugget:
            for name in config.nugget_measures:
                measure = MEASURES[name]
                micro = config.averaging == "micro"
                specs.append(MeasureSpec(
                    key=measure_key("nugget", name), name=name, title=f"{measure.title} (nugget detection)",
                    short_title=name.upper(), higher_is_better=not measure.lower_is_better,
                    value_range=measure.value_range, citation=measure.citation, official=name in OFFICIAL["nugget"],
                    group="nugget", group_title="Nugget detection (ND)",
                    headline="corpus" if micro else "mean", corpus=_micro_nugget(config.alpha) if micro else None,
                    # evaluate() pools the turns (np.mean over them), which rounds differently.
                    corpus_exact=False))
        return specs

    def score(self, run: Run, gold: Gold, config: TaskConfig, items: np.ndarray | None = None) -> Scored:
        if items is not None:
            run, gold = restrict(run, gold, items)
        result = evaluate(run, gold, config)
        return self.scored_from_result(result, run, gold, config)

    def scored_from_result(self, result: Result, run: Run, gold: Gold, config: TaskConfig) -> Scored:
        per_item: dict[str, np.ndarray] = {}
        headlines: dict[str, float] = {}
        for dim, measures in (result.quality or {}).items():
            for name, values in measures.items():
                key = measure_key("quality", dim, name)
                per_item[key] = values
                headlines[key] = result.quality_means[dim][name]
        statistics: dict[str, np.ndarray] = {}
        for name, values in (result.nugget or {}).items():
            key = measure_key("nugget", name)
            per_item[key] = values
            headlines[key] = result.nugget_means[name]
            if config.averaging == "micro":
                statistics[key] = self._micro_statistics(run, gold, config, name)
        return Scored(item_ids=result.dialogue_ids, per_item=per_item, headlines=headlines,
                      settings={"variant": result.variant, "alpha": result.alpha, "averaging": result.averaging},
                      statistics=statistics, warnings=list(result.warnings), n_missing=result.n_missing)

    @staticmethod
    def _micro_statistics(run: Run, gold: Gold, config: TaskConfig, name: str) -> np.ndarray:
        """Per dialogue: (sum over customer turns, customer turns, sum over helpdesk turns,
        helpdesk turns) of one ND measure, the sufficient statistics of micro averaging."""
        if run.n_missing:
            gold = gold.subset(run.dialogue_index)
        measure = MEASURES[name]
        n = gold.n_dialogues
        columns = []
        for estimate, truth, dialogue in ((run.customer, gold.customer_counts, gold.customer_dialogue),
                                          (run.helpdesk, gold.helpdesk_counts, gold.helpdesk_dialogue)):
            scores = measure(normalise(estimate), normalise(truth), config.variant)
            columns += [np.bincount(dialogue, weights=scores, minlength=n),
                        np.bincount(dialogue, minlength=n).astype(np.float64)]
        return np.column_stack(columns)

    def baselines(self, gold: Gold, config: TaskConfig) -> list[Baseline]:
        return [
            Baseline("uniform", "Baseline: the same probability for every label.", uniform_run(gold)),
            Baseline("popularity", "Baseline: all probability on the most frequent gold label per quality "
                                   "dimension and per sender (ties split equally); uses no per-dialogue knowledge.",
                     popularity_run(gold)),
        ]

    def participant_data(self, data: object, config: TaskConfig) -> list[dict[str, Any]]:
        # Only the keys participants need are copied (never everything but "annotations"), so a
        # field an organiser adds to the gold is not published by accident.
        return [{"id": dialogue["id"],
                 "turns": [{"sender": turn["sender"], "utterances": list(turn.get("utterances", []))}
                           for turn in dialogue.get("turns", [])]}
                for dialogue in data]  # type: ignore[union-attr]

    def hidden_annotations(self, entry: Mapping[str, Any], config: TaskConfig) -> Iterator[tuple[str, str]]:
        # Each annotator's quality labels and nugget labels of a dialogue, one record each: a file
        # with a single annotator's labels of a test dialogue leaks that dialogue.
        annotations = entry.get("annotations")
        if not isinstance(annotations, list):
            return
        dialogue_id = canonical_id(entry.get("id"))
        for annotation in annotations:
            if not isinstance(annotation, Mapping):
                continue
            for part in ("quality", "nugget"):
                if annotation.get(part) is not None:
                    record = canonical_record(part, dialogue_id, annotation[part])
                    if record is not None and dialogue_id is not None:
                        yield dialogue_id, record

    def format_description(self, config: TaskConfig) -> dict[str, Any]:
        scale = list(config.quality_scale)
        uniform = {label: round(1.0 / len(scale), 4) for label in scale}
        customer, helpdesk = list(config.customer_nugget_types), list(config.helpdesk_nugget_types)
        return {
            "summary": ("A JSON list with one entry per dialogue of the test data: the estimated distribution of "
                        "annotators' labels for each dialogue quality dimension (DQ) and for each turn's nugget "
                        "type (ND). A run may hold only quality or only nugget (one subtask)."),
            "fields": [
                {"path": "[i].id", "type": "string", "meaning": "the dialogue's id, as in the test data"},
                {"path": "[i].quality.<dimension>", "type": "object label -> number",
                 "meaning": f"dimensions {', '.join(config.quality_dimensions)} "
                            f"({', '.join(DIMENSION_TITLES.get(d, d) for d in config.quality_dimensions)}); "
                            f"labels {', '.join(scale)} (ordered); probabilities or counts, normalised by their sum"},
                {"path": "[i].nugget[t]", "type": "object label -> number",
                 "meaning": f"one entry per turn in turn order; customer turns: {', '.join(customer)}; "
                            f"helpdesk turns: {', '.join(helpdesk)}"},
            ],
            "example": {"id": "<dialogue id>", "quality": {dim: uniform for dim in config.quality_dimensions},
                        "nugget": [{label: round(1.0 / len(customer), 4) for label in customer},
                                   {label: round(1.0 / len(helpdesk), 4) for label in helpdesk}]},
            "notes": [
                "A label left out counts as 0; every number must be finite and not negative; each distribution "
                "needs a positive sum.",
                f"Measures: DQ {', '.join(m.upper() for m in config.quality_measures)} per dimension; ND "
                f"{', '.join(m.upper() for m in config.nugget_measures)} ({config.averaging} averaging, "
                f"alpha = {config.alpha}). Every measure is a distance: lower is better.",
            ],
        }

    def describe_settings(self, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        described = []
        # In this order whatever order the stored JSON kept (PostgreSQL's jsonb sorts keys).
        for key in ("variant", "averaging", "alpha", *sorted(set(settings) - {"variant", "averaging", "alpha"})):
            if key not in settings:
                continue
            value = settings[key]
            if key == "variant":
                described.append(("variant", f"{value} ({VARIANT_TITLES.get(value, 'see docs/scoring.md')})"))
            elif key == "averaging":
                described.append(("ND averaging", f"{value} ({AVERAGING_TITLES.get(value, 'see docs/scoring.md')})"))
            elif key == "alpha":
                described.append(("ND alpha", f"{describe_value(value)} (the weight of customer turns; helpdesk "
                                              "turns get 1 - alpha)"))
            else:
                described.append((str(key), describe_value(value)))
        return described

    def describe_item(self, gold: Gold, index: int) -> str:
        turns = int(gold.turn_counts[index])
        return f"dialogue {gold.dialogue_ids[index]} ({turns} turn{'s' if turns != 1 else ''})"

