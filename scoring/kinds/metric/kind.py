"""The metrics-track kind (METRICS-SPEC.md, issue 16): a run is an evaluation metric's scores.

Participants submit one score per gold response; the kind judges the metric against the hidden
human judgements with the framework-free maths of :mod:`scoring.kinds.metric` (docs/metrics.md). This
module only maps that maths onto the task-kind interface:

* **items are the contexts.** Per-context values are stored like per-dialogue scores:
  predictive power (and its tie-aware variant) and the within-context correlations, each with
  its per-context sufficient statistics, so the figure of any subset of contexts is exact
  (``headline="corpus"``). The pooled and system-level correlations have no per-context value:
  the kind computes them from the whole run (``headline="run"``) and they have no per-item
  vector.
* **undefined figures are left out, never NaN.** A figure that is undefined on the contexts
  scored (a within-context correlation where no context varies, a system correlation without
  systems, predictive power of contexts without a pair of different judgements) is absent from
  ``Scored.headlines``, ``per_item`` and ``statistics``; ``Scored.extra["measures"]`` holds
  every figure with ``None`` for those, so ``Scored.summary()`` is the JSON of issue 16's
  ``score --kind metric --format json``. Inside a defined per-item vector, a context whose own
  value is undefined stores the measure's no-information value (0.5 for predictive power, 0 for
  a correlation) and is left out of the headline through its statistics.
* :meth:`MetricKind.compare` computes the statistics between metrics (paired bootstrap and
  t-tests on predictive power, concordance, discriminative power with the shared randomised
  Tukey HSD); the structure is documented there.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from scoring import stats
from scoring.kinds.base import Baseline, Kind, MeasureSpec, Scored, canonical_record, describe_value
from scoring.kinds.metric import meta, session
from scoring.kinds.metric.formats import MetricGold, load_metric_gold, load_metric_run, load_metric_run_file
from scoring.validation import EXTRA_ENTRIES, VALUE_ALLOWANCE, ValidationFailed, canonical_id, check_shape

# Reference metrics the kind can place on the board, in board order: (name, what the gold needs).
REFERENCE_BASELINES: tuple[str, ...] = ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "delta-bleu", "posscore")
SESSION_BASELINES: tuple[str, ...] = tuple(name.replace("_", "-") for name in session.SESSION_MEASURES)
BASELINES: tuple[str, ...] = ("random", *REFERENCE_BASELINES, *SESSION_BASELINES)

# Bounds that keep one scoring job's work and memory reasonable (per-run intervals).
MAX_RESAMPLES = 100_000

_WITHIN = ("kendall_tau_b_within", "spearman_within", "pearson_within")
_POOLED = ("kendall_tau_b", "spearman", "pearson")
_SYSTEM = ("system_kendall_tau_b", "system_spearman", "system_pearson", "system_pearson_disattenuated")
_PREDICTIVE = ("predictive_power", "predictive_power_ties_half")
# The value a per-item vector holds for a context where the measure is undefined there: what a
# metric with no information gets (chance for predictive power, no association for a correlation).
_NO_INFORMATION = {"predictive_power": 0.5, "predictive_power_ties_half": 0.5,
                   **dict.fromkeys(_WITHIN, 0.0)}


@dataclass(frozen=True)
class MetricConfig:
    """How a metrics task computes its figures (every field is recorded in the scores' settings).

    ``n_resamples``, ``seed``, ``level``: the percentile bootstrap over contexts behind each
    figure's interval (B, its seed, the interval level). ``rank_intervals``: whether the pooled
    Kendall tau-b and Spearman get intervals too (an exact O(N log N) re-ranking per resample,
    about 0.4 s per run at 20,000 responses and B = 1,000; false leaves them None, see
    docs/metrics.md). ``tie_tolerance``:
    metric scores of two responses closer than this are a tie in predictive power (0: exact
    equality, the seeds' ``dX * dX* > 0``). ``publish_references``: whether the participants'
    data carries the contexts' references (reference-based metrics need them).
    ``baselines``: which of :data:`BASELINES` to build where the gold allows.
    """

    n_resamples: int = 1_000
    seed: int = 0
    level: float = 0.95
    rank_intervals: bool = True
    tie_tolerance: float = 0.0
    publish_references: bool = True
    baselines: tuple[str, ...] = BASELINES

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["baselines"] = list(self.baselines)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricConfig:
        """A validated configuration; ``ValueError`` naming every problem (defaults fill the rest)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"invalid task configuration: expected an object, got {type(data).__name__}")
        problems: list[str] = []
        known = set(cls.__dataclass_fields__)
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            problems.append(f"unknown keys {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        values = {key: data[key] for key in known if key in data}

        def integer(key: str, low: int, high: int) -> None:
            value = values.get(key, getattr(cls, key))
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
                problems.append(f"{key}: must be an integer from {low:,} to {high:,}, got {value!r}")

        integer("n_resamples", 1, MAX_RESAMPLES)
        integer("seed", 0, 2**64 - 1)
        level = values.get("level", cls.level)
        if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0.0 < level < 1.0:
            problems.append(f"level: must be a number strictly between 0 and 1, got {level!r}")
        tolerance = values.get("tie_tolerance", cls.tie_tolerance)
        if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) \
                or not math.isfinite(tolerance) or tolerance < 0:
            problems.append(f"tie_tolerance: must be a finite number >= 0, got {tolerance!r}")
        for key in ("rank_intervals", "publish_references"):
            if not isinstance(values.get(key, True), bool):
                problems.append(f"{key}: must be true or false, got {values[key]!r}")
        chosen = values.get("baselines", list(BASELINES))
        if not isinstance(chosen, list | tuple) or not all(isinstance(name, str) for name in chosen):
            problems.append(f"baselines: must be a list of names from {', '.join(BASELINES)}")
        else:
            strange = [name for name in chosen if name not in BASELINES]
            if strange:
                problems.append(f"baselines: unknown {', '.join(map(repr, strange))} "
                                f"(known: {', '.join(BASELINES)})")
            if len(set(chosen)) != len(chosen):
                problems.append("baselines: a name is listed twice")
            values["baselines"] = tuple(chosen)
        if problems:
            raise ValueError("invalid task configuration: " + "; ".join(problems))
        if "level" in values:
            values["level"] = float(values["level"])
        if "tie_tolerance" in values:
            values["tie_tolerance"] = float(values["tie_tolerance"])
        return cls(**values)


@dataclass
class MetricRun:
    """A parsed run: one score per gold response (NaN for a response a partial run left out),
    the contexts it scores completely (ascending), and how many contexts it leaves out."""

    scores: np.ndarray
    contexts: np.ndarray
    n_missing: int = 0
    warnings: list[str] = field(default_factory=list)


def _titles() -> dict[str, tuple[str, str, str, str]]:
    """key -> (title, short title, group, group title)."""
    fidelity = ("fidelity", "Fidelity: predictive power (Liu, Zhou and Wilson, ACM TOIS 2021)")
    pooled = ("responses", "Correlation with people, responses pooled")
    within = ("within", "Correlation with people within contexts (mean over contexts)")
    system = ("systems", "Correlation with people, system means")
    return {
        "predictive_power": ("Predictive power (a metric tie counts as wrong)", "PP", *fidelity),
        "predictive_power_ties_half": ("Predictive power, tie-aware variant (a metric tie counts half)",
                                       "PP-ties", *fidelity),
        "kendall_tau_b": ("Kendall tau-b with human judgements, responses pooled", "tau-b", *pooled),
        "spearman": ("Spearman correlation with human judgements, responses pooled", "Spearman", *pooled),
        "pearson": ("Pearson correlation with human judgements, responses pooled", "Pearson", *pooled),
        "kendall_tau_b_within": ("Kendall tau-b within contexts, averaged", "tau-b (ctx)", *within),
        "spearman_within": ("Spearman within contexts, averaged", "Spearman (ctx)", *within),
        "pearson_within": ("Pearson within contexts, averaged", "Pearson (ctx)", *within),
        "system_kendall_tau_b": ("Kendall tau-b of system means", "tau-b (sys)", *system),
        "system_spearman": ("Spearman of system means", "Spearman (sys)", *system),
        "system_pearson": ("Pearson of system means", "Pearson (sys)", *system),
        "system_pearson_disattenuated": ("Pearson of system means, corrected for context noise",
                                         "Pearson (sys, corrected)", *system),
    }


def _predictive_power(totals: np.ndarray) -> float:
    """Statistics (correct, ties, pairs): sum correct / sum pairs (NaN without a pair)."""
    correct, _, pairs = totals.tolist()
    return correct / pairs if pairs else math.nan


def _predictive_power_ties_half(totals: np.ndarray) -> float:
    """Statistics (correct, ties, pairs): (sum correct + sum ties / 2) / sum pairs."""
    correct, ties, pairs = totals.tolist()
    return (correct + 0.5 * ties) / pairs if pairs else math.nan


def _defined_mean(totals: np.ndarray) -> float:
    """Statistics (value where defined else 0, defined): mean over the defined contexts."""
    total, defined = totals.tolist()
    return total / defined if defined else math.nan


def _ratio_many(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator elementwise, NaN where the denominator is 0 (as the scalar forms)."""
    return np.divide(numerator, denominator, out=np.full(np.shape(numerator), math.nan), where=denominator != 0)


# The corpus functions vectorised over leading axes ((..., S) -> (...)), for the significance tests.
_CORPUS_MANY = {
    "predictive_power": lambda t: _ratio_many(t[..., 0], t[..., 2]),
    "predictive_power_ties_half": lambda t: _ratio_many(t[..., 0] + 0.5 * t[..., 1], t[..., 2]),
    **dict.fromkeys(_WITHIN, lambda t: _ratio_many(t[..., 0], t[..., 1])),
}

_CORPUS = {"predictive_power": _predictive_power, "predictive_power_ties_half": _predictive_power_ties_half,
           **dict.fromkeys(_WITHIN, _defined_mean)}

_DESCRIPTIONS = {
    "predictive_power": "Over every pair of responses to one context whose human judgements differ: the share "
                        "the metric orders as people do. Per context: its own share (0.5 without such a pair); "
                        "statistics: correct, tied and total pairs.",
    "predictive_power_ties_half": "As predictive power, with a pair the metric scores equal counting half.",
    "kendall_tau_b": "Over all responses of the run together.",
    "spearman": "Over all responses of the run together (Pearson of mid-ranks).",
    "pearson": "Over all responses of the run together.",
    "kendall_tau_b_within": "Per context, averaged over the contexts where it is defined (the metric and the people "
                            "both vary); per context 0 where undefined; statistics: value, defined.",
    "spearman_within": "Per context, averaged over the contexts where it is defined.",
    "pearson_within": "Per context, averaged over the contexts where it is defined.",
    "system_kendall_tau_b": "Between each system's mean metric score and mean human judgement over its responses.",
    "system_spearman": "Between each system's mean metric score and mean human judgement over its responses.",
    "system_pearson": "Between each system's mean metric score and mean human judgement over its responses.",
    "system_pearson_disattenuated": "As the Pearson of system means, with the part of the means' spread and "
                                    "covariance that comes from which contexts were drawn taken out (Spearman's "
                                    "correction for attenuation, the noise estimated from the contexts); it "
                                    "estimates the correlation of the systems' true mean scores. Undefined when a "
                                    "side's system means vary no more than that noise explains.",
}


class MetricKind(Kind):
    name = "metric"
    title = "Metrics track: meta-evaluation of automatic evaluation metrics"
    item_noun = "context"
    presets: Mapping[str, Mapping[str, Any]] = {
        "metric": MetricConfig().to_dict(),
        # For demonstrations and trial rounds: a fifth of the resamples, no pooled-rank intervals.
        "metric-quick": {**MetricConfig().to_dict(), "n_resamples": 200, "rank_intervals": False},
    }
    default_preset = "metric"

    # Configuration -------------------------------------------------------------------------
    def config(self, data: Mapping[str, Any]) -> MetricConfig:
        return MetricConfig.from_dict(data)

    # Gold ----------------------------------------------------------------------------------
    def compile_gold(self, data: object, config: MetricConfig) -> MetricGold:
        return load_metric_gold(data)

    def gold_from_bytes(self, blob: bytes) -> MetricGold:
        return MetricGold.from_bytes(blob)

    # Runs ----------------------------------------------------------------------------------
    def check_run_file(self, content: bytes, gold: MetricGold) -> None:
        # A run has one entry per response, not per context (the kind's items).
        n = gold.n_responses
        check_shape(content, n + EXTRA_ENTRIES, VALUE_ALLOWANCE * 8 * n + 10_000, gold_dialogues=n)

    def parse_run(self, data: object, gold: MetricGold, config: MetricConfig, *,
                  allow_missing: bool = False) -> MetricRun:
        return self._run(load_metric_run(data, gold, allow_missing=allow_missing), gold)

    def parse_run_file(self, content: bytes, gold: MetricGold, config: MetricConfig, *, allow_missing: bool = False,
                       what: str = "file") -> MetricRun:
        # A run is hundreds of thousands of {"id", "score"} entries: read a piece at a time, never
        # held as a list of dicts (issue 28, item 4).
        return self._run(load_metric_run_file(content, gold, allow_missing=allow_missing, what=what), gold)

    @staticmethod
    def _run(scores: np.ndarray, gold: MetricGold) -> MetricRun:
        missing = np.isnan(scores)
        if not missing.any():
            return MetricRun(scores, np.arange(gold.n_contexts))
        # A context is scored whole or not at all: its pairs are what predictive power counts, and
        # every metric compared on it must have them all.
        incomplete = np.bincount(gold.context[missing], minlength=gold.n_contexts) > 0
        contexts = np.flatnonzero(~incomplete)
        if not contexts.size:
            raise ValidationFailed(["$: no context has a score for every one of its responses: nothing to score"])
        n_missing = int(incomplete.sum())
        warning = (f"{n_missing} of the {gold.n_contexts} gold context(s) lack a score for some response; "
                   f"scored on the {contexts.size} it scores completely")
        return MetricRun(scores, contexts, n_missing, [warning])

    def measures(self, config: MetricConfig, gold: MetricGold | None = None) -> list[MeasureSpec]:
        titles = _titles()
        specs = []
        for key, measure in meta.MEASURES.items():
            if key in _SYSTEM and gold is not None and not gold.has_systems:
                continue
            title, short_title, group, group_title = titles[key]
            headline = "corpus" if key in _CORPUS else "run"
            specs.append(MeasureSpec(
                key=key, name=key, title=title, short_title=short_title, higher_is_better=measure.higher_is_better,
                value_range=(measure.low, measure.high), citation=measure.citation, official=measure.official,
                group=group, group_title=group_title, headline=headline, corpus=_CORPUS.get(key),
                corpus_many=_CORPUS_MANY.get(key),
                description=_DESCRIPTIONS[key]))
        return specs

    def score(self, run: MetricRun, gold: MetricGold, config: MetricConfig,
              items: np.ndarray | None = None) -> Scored:
        """Every figure of one metric on the contexts it scores (or on ``items`` of them).

        Scoring a subset gives exactly the figures of the gold and run files restricted to those
        contexts (the bootstrap resamples those contexts)."""
        contexts = run.contexts
        n_missing = run.n_missing
        if items is not None:
            wanted = np.asarray(items, dtype=np.int64)
            if wanted.ndim != 1 or (np.diff(wanted) <= 0).any() or (wanted.size and (
                    wanted[0] < 0 or wanted[-1] >= gold.n_contexts)):
                raise ValueError(f"items must be ascending distinct context indices below {gold.n_contexts}")
            kept = np.isin(wanted, contexts)
            n_missing = int((~kept).sum())
            contexts = wanted[kept]
            if not contexts.size:
                raise ValueError("none of the chosen contexts is scored by this run")
        if contexts.size == gold.n_contexts:
            scored_gold, scores = gold, run.scores
        else:
            scored_gold = gold.subset(contexts)
            scores = run.scores[np.isin(gold.context, contexts)]
        figures = meta.evaluate_metrics(
            scored_gold, {"metric": scores}, n_resamples=config.n_resamples, seed=config.seed, level=config.level,
            pooled_rank_resamples=config.n_resamples if config.rank_intervals else 0,
            tie_tolerance=config.tie_tolerance)
        entry = figures["metrics"]["metric"]
        counts, within = meta.per_context_values(scored_gold, scores[:, None], tie_tolerance=config.tie_tolerance)

        statistics: dict[str, np.ndarray] = {}
        per_item: dict[str, np.ndarray] = {}
        pairs = counts.pairs.astype(np.float64)
        correct, ties = counts.correct[:, 0].astype(np.float64), counts.ties[:, 0].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            own = {"predictive_power": correct / pairs, "predictive_power_ties_half": (correct + 0.5 * ties) / pairs}
        for key in _PREDICTIVE:
            statistics[key] = np.column_stack([correct, ties, pairs])
            per_item[key] = np.where(pairs > 0, own[key], _NO_INFORMATION[key])
        for key in _WITHIN:
            values = within[key][:, 0]
            defined = ~np.isnan(values)
            statistics[key] = np.column_stack([np.where(defined, values, 0.0), defined.astype(np.float64)])
            per_item[key] = np.where(defined, values, _NO_INFORMATION[key])

        measures: dict[str, float | None] = {}
        headlines: dict[str, float] = {}
        for spec in self.measures(config, None):
            key = spec.key
            if spec.headline == "corpus":
                value = spec.aggregate(per_item[key], statistics[key])
            else:
                value = entry["measures"][key]
            if value is None or not math.isfinite(value):
                measures[key] = None
                per_item.pop(key, None)
                statistics.pop(key, None)
            else:
                measures[key] = headlines[key] = float(value)
        intervals = {key: entry["intervals"][key] if measures[key] is not None else None for key in measures}
        labels = {key: label for key, label in entry["interval_labels"].items() if intervals.get(key) is not None}
        return Scored(
            item_ids=list(scored_gold.context_ids), per_item=per_item, headlines=headlines,
            settings=dict(figures["settings"]), statistics=statistics, warnings=list(run.warnings),
            n_missing=n_missing,
            details={"n_responses": scored_gold.n_responses, "n_systems": figures["n_systems"],
                     "n_contexts_defined": entry["n_contexts_defined"], "n_undefined": entry["n_undefined"]},
            extra={"measures": measures, "n_pairs": figures["n_pairs"], "intervals": intervals,
                   "interval_labels": labels,
                   **({"interval_notes": entry["interval_notes"]} if entry["interval_notes"] else {})},
        )

    # Between runs ----------------------------------------------------------------------------
    def compare_tables(self, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The statistics page's tables of ``compare()``: predictive power, the paired tests,
        concordance and discriminative power, each saying how it was computed."""
        if not data or "metrics" not in data:
            return []
        names = list(data["metrics"])
        settings = data.get("settings", {})
        tables: list[dict[str, Any]] = [{
            "title": "Predictive power", "shade": False,
            "note": f"{data.get('n_pairs', 0):,} response pairs with different human judgements in "
                    f"{data.get('n_contexts', 0):,} contexts; the tie-aware variant counts a metric tie as half.",
            "headers": ["metric", "predictive power", "tie-aware (ties count half)"],
            "rows": [[name, data["predictive_power"].get(name), data["predictive_power_ties_half"].get(name)]
                     for name in names]}]
        bootstrap = data.get("paired_bootstrap")
        if bootstrap:
            tables.append({
                "title": "Paired bootstrap test of predictive power", "shade": False,
                "note": f"{bootstrap['test']}; B = {bootstrap['n_resamples']:,}, seed {bootstrap['seed']}, "
                        f"{bootstrap['level']:.0%} interval of the difference.",
                "headers": ["metric A", "metric B", "A - B", "p (unadjusted)", "p (Holm)", "interval low",
                            "interval high"],
                "rows": [[pair["a"], pair["b"], pair["difference"], pair["p"], pair.get("p_holm"), pair["low"],
                          pair["high"]] for pair in bootstrap["pairs"]]})
            tables[-1]["note"] += _adjustment_note(len(bootstrap["pairs"]), "pairs")
        tests = data.get("t_tests")
        if tests:
            tables.append(_t_test_table("Paired t-tests, all pairs", tests, "pairs"))
        against = data.get("against_random")
        if against:
            paired = against["paired_bootstrap"]
            tables.append({
                "title": f"Each metric against the random baseline ({against['baseline']})", "shade": False,
                "note": "The family of Liu, Zhou and Wilson (ACM TOIS 2021): each metric compared with random "
                        f"scores only ({len(paired['pairs'])} comparisons, so a smaller correction than over all "
                        f"pairs). Paired bootstrap as above." + _adjustment_note(len(paired["pairs"]),
                                                                                   "comparisons"),
                "headers": ["metric", "baseline", "metric - baseline", "p (unadjusted)", "p (Holm)",
                            "interval low", "interval high"],
                "rows": [[pair["a"], pair["b"], pair["difference"], pair["p"], pair["p_holm"], pair["low"],
                          pair["high"]] for pair in paired["pairs"]]})
            if against.get("t_tests"):
                tables.append(_t_test_table(f"Paired t-tests against the random baseline ({against['baseline']})",
                                            against["t_tests"], "comparisons"))
        concordance = data.get("concordance")
        if concordance:
            tables.append({
                "title": "Concordance with the gold property metric", "shade": True,
                "note": "Row metric A, column metric B: the share of the pairs on which A and B disagree where A "
                        "agrees with the gold-standard property metric (Liu, Zhou and Wilson, ACM TOIS 2021, "
                        "Algorithm 4); empty where they never disagree.",
                "headers": ["metric A \\ B", *concordance["names"]],
                "rows": [[name, *row] for name, row in zip(concordance["names"], concordance["concordance"],
                                                              strict=True)]})
        power = data.get("discriminative_power")
        if power:
            tables.append({
                "title": "Discriminative power over the gold's systems", "shade": False,
                "note": f"Randomised Tukey HSD over {len(power['systems'])} systems on the "
                        f"{power['n_contexts_used']} contexts all of them answered; B = {power['n_permutations']:,}, "
                        f"seed {power['seed']}. Share of system pairs with p < alpha, and the smallest "
                        "significant difference (delta required).",
                "headers": ["metric", "system pairs", "power (0.05)", "delta required (0.05)", "power (0.01)",
                            "delta required (0.01)"],
                "rows": [[name, entry["n_system_pairs"], entry["discriminative_power_05"],
                          entry["delta_required_05"], entry["discriminative_power_01"], entry["delta_required_01"]]
                         for name, entry in power["metrics"].items()]})
        if power and any(entry.get("asl_curve") for entry in power["metrics"].values()):
            tables.append({
                "title": "ASL curves over the gold's systems", "shade": False, "headers": [], "rows": [],
                "note": "Per metric, the p-values of every pair of the gold's systems, smallest first (Liu, Zhou "
                        "and Wilson, ACM TOIS 2021, Figure 5): a curve that stays low longer tells more systems apart.",
                "curves": [(name, entry["asl_curve"]) for name, entry in power["metrics"].items()
                           if entry.get("asl_curve")]})
        for part, reason in (data.get("unavailable") or {}).items():
            tables.append({"title": part.replace("_", " ").capitalize(), "note": f"Not computed: {reason}",
                           "headers": [], "rows": [], "shade": False})
        if settings:
            tables[0]["note"] += f" Seed {settings.get('seed')}, B = {settings.get('resamples')}."
        return tables

    def compare(self, runs: Mapping[str, MetricRun], gold: MetricGold, config: MetricConfig, *,
                seed: int, resamples: int) -> dict[str, Any]:
        """Statistics between the metrics of one board (runs scoring every gold response).

        ``seed`` and ``resamples`` (B) are the board's; the level and the tie tolerance the
        task's. Returns JSON-ready data, metrics named as the keys of ``runs`` (as strings), in
        their order::

            {"metrics": [name, ...],
             "n_contexts": C, "n_pairs": P,           # pairs with different human judgements
             "settings": {"seed": s, "resamples": B, "level": 0.95, "tie_tolerance": t},
             "predictive_power": {name: x}, "predictive_power_ties_half": {name: x},
             "paired_bootstrap": None | {               # predictive power, contexts resampled
                 "test": "paired bootstrap over contexts (shift method)", "n_resamples": B,
                 "n_undefined": 0, "seed": s, "level": 0.95, "ties_half": false,
                 "pairs": [{"a": name, "b": name, "difference": pp_a - pp_b, "p": two-sided p,
                            "p_holm": Holm over the pairs, "low": x, "high": x}, ...],  # a before b
                 "adjustment": "p unadjusted; p_holm adjusted ..."},
             "t_tests": None | {                        # seed 003's two-tailed paired t-test
                 "test": "two-tailed paired t-test over contexts, Bonferroni", "baseline": None,
                 "ties_half": false, "n_contexts": n, "bonferroni_factor": M(M-1)/2,
                 "tests": [{"a", "b", "difference", "t": x | None (infinite), "df": n - 1, "p": x,
                            "p_bonferroni": min(1, factor * p), "p_holm": x}, ...], "adjustment": "..."},
             "against_random": None | {                 # Liu, Zhou and Wilson's family: M - 1 tests
                                                        # (None: no run is the task's random baseline)
                 "baseline": name, "paired_bootstrap": {... as above, pairs (metric, baseline)},
                 "t_tests": {... as above with "baseline": name} | None},
             "concordance": None | {                    # seed 003 Algorithm 4, against the gold's M*
                 "names": [name, ...], "disagreements": [[int]], "concordant": [[int]],
                 "concordance": [[x | None]]},          # [a][b] = Conc(a | b, M*); None: no disagreement
             "discriminative_power": None | {           # shared randomised Tukey HSD, B = resamples
                 "n_permutations": B, "seed": s, "alphas": [0.05, 0.01], "systems": [name, ...],
                 "n_contexts_used": n, "n_contexts": C,  # contexts answered by every system
                 "metrics": {name: {"n_system_pairs": k(k-1)/2,
                                    "discriminative_power_05": x, "delta_required_05": x | None,
                                    "discriminative_power_01": x, "delta_required_01": x | None,
                                    "asl_curve": [p, ...],   # p-values of all system pairs, ascending
                                    "means": {system: mean score}}}},
             "unavailable": {part: reason}}             # why each None part is None

        The paired tests need at least two metrics; concordance also a property metric in the
        gold; discriminative power a gold naming at least two systems, with at least two
        contexts answered by all of them. Raises ValueError for a run that leaves out responses
        (metrics are compared on the same pairs) and for no runs.
        """
        if not runs:
            raise ValueError("compare needs at least one run")
        names = [str(name) for name in runs]
        partial = [name for name, run in zip(names, runs.values(), strict=True) if run.n_missing]
        if partial:
            raise ValueError(f"runs that leave out responses cannot be compared: {', '.join(partial)}")
        vectors = {name: run.scores for name, run in zip(names, runs.values(), strict=True)}
        counts = meta.context_counts(gold, vectors, tie_tolerance=config.tie_tolerance)
        unavailable: dict[str, str] = {}
        out: dict[str, Any] = {
            "metrics": names, "n_contexts": gold.n_contexts, "n_pairs": int(counts.pairs.sum()),
            "settings": {"seed": int(seed), "resamples": int(resamples), "level": config.level,
                         "tie_tolerance": config.tie_tolerance},
            "predictive_power": meta.predictive_power(counts),
            "predictive_power_ties_half": meta.predictive_power(counts, ties_half=True),
            "paired_bootstrap": None, "t_tests": None, "against_random": None, "concordance": None,
            "discriminative_power": None,
        }
        if len(names) < 2:
            for part in ("paired_bootstrap", "t_tests", "concordance"):
                unavailable[part] = "needs at least two metrics"
        else:
            bootstrap = meta.paired_bootstrap(counts, resamples, seed, level=config.level)
            out["paired_bootstrap"] = bootstrap.to_dict()
            enough = int((counts.pairs > 0).sum()) >= 2
            if enough:
                out["t_tests"] = meta.paired_t_tests(counts)
            else:
                unavailable["t_tests"] = "needs at least two contexts with a pair of different human judgements"
            # Liu, Zhou and Wilson's family: each metric against the random baseline (M - 1 tests),
            # found by its scores (the task's random baseline is the same seeded draw).
            expected = session.random_scores(gold.n_responses, config.seed)
            random_name = next((name for name, run in zip(names, runs.values(), strict=True)
                                if np.array_equal(run.scores, expected)), None)
            if random_name is not None:
                out["against_random"] = {
                    "baseline": random_name, "paired_bootstrap": bootstrap.against(random_name),
                    "t_tests": meta.paired_t_tests(counts, baseline=random_name) if enough else None}
            if gold.property_metric is not None:
                out["concordance"] = meta.concordance_matrix(gold, vectors).to_dict()
            else:
                unavailable["concordance"] = "the gold has no property metric (M*)"
        n_systems = len(gold.system_names)
        if n_systems < 2:
            unavailable["discriminative_power"] = "the gold names fewer than two systems"
        elif meta.system_matrix(gold, gold.human)[1].size < 2:
            unavailable["discriminative_power"] = f"fewer than two contexts are answered by all {n_systems} systems"
        else:
            out["discriminative_power"] = meta.discriminative_power_figures(
                gold, vectors, n_permutations=resamples, seed=seed, alphas=stats.REPORTED_LEVELS)
        out["unavailable"] = unavailable
        return out

    # Baselines and display -----------------------------------------------------------------
    def baselines(self, gold: MetricGold, config: MetricConfig) -> list[Baseline]:
        """Random, the reference metrics (when the gold holds references) and the session measures
        (when it holds per-turn grades), those of ``config.baselines``, in :data:`BASELINES` order."""
        wanted = set(config.baselines)
        built: dict[str, tuple[str, np.ndarray]] = {}
        if "random" in wanted:
            built["random"] = (f"Baseline: independent uniform random scores (seed {config.seed}); expected "
                               "predictive power 0.5.", session.random_scores(gold.n_responses, config.seed))
        if gold.references is not None:
            built.update(_reference_scores(gold, [name for name in REFERENCE_BASELINES if name in wanted]))
        if gold.grades is not None:
            values = session.session_scores(gold.grades, gold.grade_counts)
            for key, scores in values.items():
                name = key.replace("_", "-")
                if name in wanted:
                    built[name] = (f"Baseline: session measure {key} over the gold's per-turn grades "
                                   f"({session.SESSION_CITATIONS[key]}).", scores)
        baselines = []
        for name in BASELINES:
            if name in built:
                description, scores = built[name]
                content = [{"id": response_id, "score": float(score)}
                           for response_id, score in zip(gold.response_ids, scores.tolist(), strict=True)]
                baselines.append(Baseline(name, description, content))
        return baselines

    def sample_run(self, gold: MetricGold, config: MetricConfig) -> list[dict[str, Any]]:
        """The random metric (seeded by the task's seed), whichever baselines the task builds."""
        scores = session.random_scores(gold.n_responses, config.seed)
        return [{"id": response_id, "score": float(score)}
                for response_id, score in zip(gold.response_ids, scores.tolist(), strict=True)]

    def describe_item(self, gold: MetricGold, index: int) -> str:
        size = int(gold.context_sizes[index])
        start = int(gold.context_sizes[:index].sum())
        human = gold.human[start : start + size]
        differing = int((human[:, None] != human[None, :]).sum()) // 2
        return (f"context {gold.context_ids[index]} ({size} responses, {differing} pair"
                f"{'s' if differing != 1 else ''} with different human judgements)")

    def describe_settings(self, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        """The meta-evaluation's settings in a reader's words (the board printed the raw keys,
        "pooled_rank_resamples: 0 · tie_tolerance: 0"); a key this method does not know is shown
        as it is, so nothing stored is hidden."""
        described: list[tuple[str, str]] = []
        known = {"n_resamples", "seed", "level", "resampling", "pooled_rank_resamples", "tie_tolerance"}
        if "n_resamples" in settings:
            level = settings.get("level")
            level_text = f"{float(level):.0%} " if isinstance(level, numbers.Real) else ""
            resampled = str(settings.get("resampling") or "contexts")
            described.append(("intervals", f"{level_text}percentile bootstrap, {resampled} resampled "
                                           f"{describe_value(settings['n_resamples'])} times (random-number "
                                           f"seed {describe_value(settings.get('seed'))})"))
        if "pooled_rank_resamples" in settings:
            ranked = settings["pooled_rank_resamples"]
            described.append(("pooled Kendall and Spearman", "no interval (re-ranking every resample was switched "
                                                             "off for this task)" if not ranked else
                                                             f"intervals from {describe_value(ranked)} resamples"))
        if "tie_tolerance" in settings:
            tolerance = settings["tie_tolerance"]
            described.append(("metric ties", "only equal scores are a tie" if not tolerance else
                                             f"scores closer than {describe_value(tolerance)} are a tie"))
        described += [(str(key), describe_value(settings[key])) for key in sorted(settings) if key not in known]
        return described

    # What participants get -------------------------------------------------------------------
    def participant_data(self, data: object, config: MetricConfig) -> list[dict[str, Any]]:
        """Contexts with their responses' ids and texts (and the dialogue so far and, when
        ``publish_references``, the references); no judgement, system, property or grade. Only the
        keys named here are copied, so a field an organiser adds is not published by accident, and
        responses are listed in id order, so an order the organiser's file may follow (by
        judgement, by system) is not published either."""
        published = []
        for context in data:  # type: ignore[union-attr]
            entry: dict[str, Any] = {"id": context["id"]}
            if context.get("context") is not None:
                entry["context"] = [{"sender": turn["sender"], "text": turn["text"]} for turn in context["context"]]
            if config.publish_references and context.get("references") is not None:
                entry["references"] = [{"text": reference["text"], "weight": reference.get("weight", 1.0)}
                                       for reference in context["references"]]
            responses = []
            for response in context["responses"]:
                item = {"id": response["id"]}
                if response.get("text") is not None:
                    item["text"] = response["text"]
                responses.append(item)
            entry["responses"] = sorted(responses, key=lambda item: str(item["id"]))
            published.append(entry)
        return published

    def hidden_annotations(self, entry: Mapping[str, Any], config: MetricConfig) -> Iterator[tuple[str, str]]:
        """Each response's human judgement, property value and grades, one record each and named
        by the response's id (so that a response found without its context is still found), and
        the context's references unless the task publishes them; an object with ``human`` is
        read as a response on its own, ``responses`` as a context."""
        item_id = canonical_id(entry.get("id"))
        if item_id is None:
            return
        responses = entry.get("responses")
        if isinstance(responses, list):
            for response in responses:
                if isinstance(response, Mapping):
                    yield from ((item_id, record) for _, record in self._judgements(response))
            references = entry.get("references")
            if not config.publish_references and isinstance(references, list):
                for reference in references:
                    text = reference.get("text") if isinstance(reference, Mapping) else None
                    if isinstance(text, str) and text.strip():
                        yield item_id, canonical_record("reference", item_id, text) or ""
        else:
            yield from self._judgements(entry)

    @staticmethod
    def _judgements(response: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        response_id = canonical_id(response.get("id"))
        if response_id is None:
            return
        for part in ("human", "property", "grades"):
            value = response.get(part)
            if isinstance(value, int | float | list) and not isinstance(value, bool):
                yield response_id, canonical_record(part, response_id, value) or ""

    def format_description(self, config: MetricConfig) -> dict[str, Any]:
        specs = self.measures(config)
        official = [spec.title for spec in specs if spec.official]
        tolerance = ("scores that are exactly equal" if config.tie_tolerance == 0
                     else f"scores closer than {config.tie_tolerance:g}")
        return {
            "summary": ("A JSON list with one entry per response of the test data: your metric's score for that "
                        "response, higher meaning better. Every response of every context is scored, once."),
            "fields": [
                {"path": "[i].id", "type": "string",
                 "meaning": "the response's id, as in the test data (an integer id may be written as a number)"},
                {"path": "[i].score", "type": "number",
                 "meaning": "a finite number, higher = better (negate a distance before submitting)"},
            ],
            "example": {"id": "<response id>", "score": 0.73},
            "notes": [
                "Only the order of scores within a context matters to predictive power; the correlations also "
                "compare responses across contexts and systems.",
                f"Official measure: {', '.join(official)}. Over every pair of responses to one context with "
                f"different human judgements, the share your metric orders as people do; {tolerance} count as "
                "wrong (half right in the tie-aware variant).",
                f"Also reported: Kendall tau-b, Spearman and Pearson with the human judgements, pooled, within "
                f"contexts and between system means (Pearson also corrected for context noise), each with a "
                f"{config.level:.0%} bootstrap interval over contexts (B = {config.n_resamples:,}, seed "
                f"{config.seed}) except the plain Pearson of system means, whose interval would not be calibrated.",
                "Other keys of an entry are ignored; an unknown, repeated or missing response id, or a score that "
                "is not a finite number, refuses the whole run with every problem listed.",
            ],
        }


def _reference_scores(gold: MetricGold, names: list[str]) -> dict[str, tuple[str, np.ndarray]]:
    """Per-response scores of the registered response measures against the contexts' references."""
    from scoring.kinds.response import bleu
    from scoring.kinds.response.measures import RESPONSE_MEASURES

    built: dict[str, tuple[str, np.ndarray]] = {}
    tokens: dict[bool, list[list[str]]] = {}
    for name in names:
        if name == "posscore":
            from scoring.kinds.response.posscore import PosEncoder, score_rows
            from scoring.kinds.response.posscore import prepare_references as prepare_pos

            encoder = PosEncoder()
            prepared = prepare_pos(gold.references, encoder)
            scores = score_rows(encoder.encode(gold.texts), prepared, items=gold.context)
            built[name] = ("Baseline: POSSCORE of each response against its context's references (maximum over "
                           f"them; {RESPONSE_MEASURES['posscore'].citation}).", scores)
            continue
        if name == "delta-bleu":
            config = bleu.DELTA_BLEU
            description = (f"Baseline: sentence-level deltaBLEU-2 against the context's weighted references "
                           f"({RESPONSE_MEASURES['delta_bleu'].citation}; add-one smoothing for n >= 2).")
        else:
            order = int(name.rsplit("-", 1)[1])
            config = bleu.BleuConfig(max_order=order, brevity="closest", weighted=False, min_weight=0.0)
            description = (f"Baseline: sentence-level BLEU-{order} against the context's positively weighted "
                           "references (Papineni et al. 2002; sacrebleu 13a tokens; add-one smoothing for n >= 2).")
        if config.lowercase not in tokens:
            tokens[config.lowercase] = [bleu.tokenize(text, config.lowercase) for text in gold.texts]
        references = bleu.prepare_references(gold.references, config)
        statistics = bleu.sufficient_statistics(tokens[config.lowercase], references, items=gold.context)
        built[name] = (description, bleu.item_scores(statistics, config.max_order, config.brevity))
    return built


def _adjustment_note(size: int, what: str) -> str:
    return (f" p (unadjusted) is each test on its own; p (Holm) is adjusted for the {size} {what} of this table "
            "(Holm 1979): compare that one with the significance level.")


def _t_test_table(title: str, tests: Mapping[str, Any], what: str) -> dict[str, Any]:
    """A table of :func:`meta.paired_t_tests`: unadjusted, Bonferroni- and Holm-adjusted p-values."""
    return {"title": title, "shade": False,
            "note": f"{tests['test']} ({tests['n_contexts']} contexts); p (Bonferroni) is p times "
                    f"{tests['bonferroni_factor']}, capped at 1." + _adjustment_note(len(tests["tests"]), what),
            "headers": ["metric A", "metric B", "A - B", "t", "df", "p (unadjusted)", "p (Bonferroni)", "p (Holm)"],
            "rows": [[t["a"], t["b"], t["difference"], t["t"], t["df"], t["p"], t["p_bonferroni"], t.get("p_holm")]
                     for t in tests["tests"]]}
