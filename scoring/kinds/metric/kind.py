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
  Tukey HSD): :func:`scoring.kinds.metric.comparison.compare_metrics` documents the structure.

Its parts live beside it, one job each: :mod:`~scoring.kinds.metric.config` (the task's
configuration, the baselines' names, a parsed run), :mod:`~scoring.kinds.metric.measures` (how each
figure is presented and aggregated), :mod:`~scoring.kinds.metric.comparison` (statistics between
metrics and their tables), :mod:`~scoring.kinds.metric.baselines` (the reference-metric
baselines). The names other modules and tests import from here are re-exported.
"""

from __future__ import annotations

import numbers
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import numpy as np

from scoring.kinds.base import Baseline, Kind, MeasureSpec, Scored, canonical_record, describe_value
from scoring.kinds.metric import comparison, session
from scoring.kinds.metric.baselines import reference_scores
from scoring.kinds.metric.config import (
    BASELINES,
    MAX_RESAMPLES,
    REFERENCE_BASELINES,
    SESSION_BASELINES,
    MetricConfig,
    MetricRun,
)
from scoring.kinds.metric.dimcompare import compare_slices, human_table, slice_runs, slice_tables
from scoring.kinds.metric.dimensions import LEVELS, DimensionData, Slice, language_name, make_slices
from scoring.kinds.metric.formats import MetricGold, load_metric_gold, load_metric_run, load_metric_run_file
from scoring.kinds.metric.humans import describe_dimensions, human_figures
from scoring.kinds.metric.measures import sliced_specs
from scoring.kinds.metric.sliced import score_metric
from scoring.validation import EXTRA_ENTRIES, VALUE_ALLOWANCE, ValidationFailed, canonical_id, check_shape

__all__ = ["BASELINES", "MAX_RESAMPLES", "REFERENCE_BASELINES", "SESSION_BASELINES", "MetricConfig", "MetricKind",
           "MetricRun"]


def slices_of(config: MetricConfig, gold: MetricGold | None) -> list[Slice]:
    """The dimension slices: the task's declared ones, else the gold's (the offline command), else
    the one dimension of today's gold."""
    if config.dimensions:
        return make_slices(list(config.dimensions), list(config.languages))
    if gold is not None and gold.dims is not None:
        return gold.dims.slices()
    return make_slices([("human", "turn")], [])


def declared_problems(config: MetricConfig, dims: DimensionData | None) -> list[str]:
    """How a gold's dimensions differ from the task's declared ones (the board's columns are made
    from the declaration, so a gold must judge exactly those), one sentence each."""
    found = dims.slices() if dims is not None else make_slices([("human", "turn")], [])
    if not config.dimensions:
        if len(found) > 1 and not config.from_gold:
            return [f"$: the gold judges {len(found)} dimension slices ({', '.join(sl.title for sl in found)}) but "
                    "the task's configuration names no dimensions: add \"dimensions\": [{\"name\": ..., \"level\": "
                    "...}, ...] (and \"languages\" for several languages) so that the board has their columns"]
        return ([] if config.run_scores == "one" or (dims is not None and not dims.plain) else
                ["$: per-dimension run scores need a gold whose human judgements are objects of dimensions"])
    problems = []
    pairs = dims.pairs if dims is not None and not dims.plain else []
    if set(pairs) != set(config.dimensions):
        def words(items: Collection[tuple[str, str]]) -> str:
            return ", ".join(f"{name} ({level})" for name, level in items) or "none (a plain number)"
        problems.append(f"$: the gold judges the dimensions {words(pairs)} but the task's configuration names "
                        f"{words(config.dimensions)}")
    languages = dims.languages if dims is not None else []
    if len(config.languages) > 1 or len(languages) > 1:
        if set(languages) != set(config.languages):
            problems.append(f"$: the gold's items are in {', '.join(languages) or 'no named language'} but the task's "
                            f"configuration names the languages {', '.join(config.languages) or 'none'}")
    return problems


def run_entries(gold: MetricGold, config: MetricConfig, scores: np.ndarray) -> list[dict[str, Any]]:
    """A run file of one score per response: ``score`` entries, or with per-dimension scores the
    same number for every dimension of the item's level (the baselines, the sample run)."""
    values = scores.tolist()
    if config.run_scores != "per-dimension" or gold.dims is None:
        return [{"id": response_id, "score": float(score)}
                for response_id, score in zip(gold.response_ids, values, strict=True)]
    judged = ~np.isnan(gold.dims.values)
    return [{"id": response_id, "scores": {gold.dims.names[d]: float(score) for d in np.flatnonzero(judged[r])}}
            for r, (response_id, score) in enumerate(zip(gold.response_ids, values, strict=True))]


class MetricKind(Kind):
    name = "metric"
    title = "Metrics track: meta-evaluation of automatic evaluation metrics"
    short_title = "metrics-track"
    run_entry_keys = ("score", "scores")
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
        gold = load_metric_gold(data)
        problems = declared_problems(config, gold.dims)
        if problems:
            raise ValidationFailed(problems)
        return gold

    def gold_from_bytes(self, blob: bytes) -> MetricGold:
        return MetricGold.from_bytes(blob)

    # Runs ----------------------------------------------------------------------------------
    def check_run_file(self, content: bytes, gold: MetricGold) -> None:
        # A run has one entry per response, not per context (the kind's items).
        n = gold.n_responses
        per_entry = 1 + (len(gold.dims.names) if gold.dims is not None else 0)  # ``scores`` per dimension
        check_shape(content, n + EXTRA_ENTRIES, VALUE_ALLOWANCE * 8 * n * per_entry + 10_000, gold_dialogues=n)

    def run_ids(self, gold: MetricGold) -> Collection[str]:
        return gold.index  # a run scores responses, not the contexts that are the kind's items

    def parse_run(self, data: object, gold: MetricGold, config: MetricConfig, *,
                  allow_missing: bool = False) -> MetricRun:
        return self._run(load_metric_run(data, gold, allow_missing=allow_missing,
                                         per_dimension=config.run_scores == "per-dimension"), gold)

    def parse_run_file(self, content: bytes, gold: MetricGold, config: MetricConfig, *, allow_missing: bool = False,
                       what: str = "file") -> MetricRun:
        # A run is hundreds of thousands of {"id", "score"} entries: read a piece at a time, never
        # held as a list of dicts (issue 28, item 4).
        return self._run(load_metric_run_file(content, gold, allow_missing=allow_missing, what=what,
                                              per_dimension=config.run_scores == "per-dimension"), gold)

    @staticmethod
    def _run(scores: np.ndarray, gold: MetricGold) -> MetricRun:
        missing = np.isnan(scores) if scores.ndim == 1 else (np.isnan(scores) & ~np.isnan(gold.dims.values)).any(axis=1)
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
        return sliced_specs(slices_of(config, gold), config.aggregate, gold)

    def score(self, run: MetricRun, gold: MetricGold, config: MetricConfig,
              items: np.ndarray | None = None) -> Scored:
        """Every figure of one metric on the contexts it scores (or on ``items`` of them), per
        dimension slice when the gold judges several (:func:`scoring.kinds.metric.sliced.score_metric`).

        Scoring a subset gives exactly the figures of the gold and run files restricted to those
        contexts (the bootstrap resamples those contexts)."""
        return score_metric(run, gold, config, items, slices_of(config, gold), self.measures(config, gold))

    # Between runs ----------------------------------------------------------------------------
    def compare_tables(self, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The statistics page's tables of ``compare()``: predictive power, the paired tests,
        concordance and discriminative power, each saying how it was computed."""
        if "slices" in data:
            return slice_tables(data)
        return comparison.compare_tables(data) + ([human_table(data["humans"])] if data.get("humans") else [])

    def compare(self, runs: Mapping[str, MetricRun], gold: MetricGold, config: MetricConfig, *,
                seed: int, resamples: int) -> dict[str, Any]:
        """Statistics between the metrics of one board (runs scoring every gold response): the
        structure is documented at :func:`scoring.kinds.metric.comparison.compare_metrics`."""
        slices = slices_of(config, gold)
        if len(slices) > 1 or slices[0].prefix:
            return compare_slices(runs, gold, config, slices, seed=seed, resamples=resamples)
        scored_gold, one = slice_runs(runs, gold, slices[0])
        data = comparison.compare_metrics(one, scored_gold, config, seed=seed, resamples=resamples)
        humans = human_figures(gold.dims, slices, config.agreement_level) if gold.dims is not None else {}
        return {**data, "humans": humans} if humans else data

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
            built.update(reference_scores(gold, [name for name in REFERENCE_BASELINES if name in wanted]))
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
                content = run_entries(gold, config, scores)
                baselines.append(Baseline(name, description, content))
        return baselines

    def sample_run(self, gold: MetricGold, config: MetricConfig) -> list[dict[str, Any]]:
        """The random metric (seeded by the task's seed), whichever baselines the task builds."""
        return run_entries(gold, config, session.random_scores(gold.n_responses, config.seed))

    def describe_item(self, gold: MetricGold, index: int) -> str:
        size = int(gold.context_sizes[index])
        start = int(gold.context_sizes[:index].sum())
        dims = gold.dims
        if dims is not None and len(dims.slices()) > 1:
            # Several dimensions: what the context is; pairs differ per dimension.
            level = LEVELS[int(dims.level[start])]
            language = f" in {language_name(dims.languages[int(dims.language[start])])}" if dims.languages else ""
            noun = "dialogues" if level == "dialogue" else "responses"
            judged = [name.replace("_", " ") for name, own in dims.pairs if own == level]
            return (f"context {gold.context_ids[index]} ({size} {noun}{language}, judged on {', '.join(judged)})")
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
                # A participant's metric needs to know what an item is (a turn or a whole dialogue)
                # and its language; never its judgements.
                for key in ("text", "level", "language"):
                    if response.get(key) is not None:
                        item[key] = response[key]
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
        for part in ("human", "property", "grades", "judgements"):
            value = response.get(part)
            if isinstance(value, int | float | list | dict) and not isinstance(value, bool):
                yield response_id, canonical_record(part, response_id, value) or ""

    def format_description(self, config: MetricConfig) -> dict[str, Any]:
        description = self._one_dimension_description(config)
        return describe_dimensions(description, config, slices_of(config, None)) if config.dimensions else description

    def _one_dimension_description(self, config: MetricConfig) -> dict[str, Any]:
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
