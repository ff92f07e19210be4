"""Human judgements, framework-free: agreement (Krippendorff's alpha), judgements files, the
agreement report and judgements turned into gold (the judgements specification; the issue on
annotation campaigns). No Django here: the campaigns app and the offline commands call these.

API contract (what to call with what)
-------------------------------------

``scoring.judgements.alpha``
    ``krippendorff_alpha(units, level, order=None) -> float | None``
        ``units``: one list per judged thing (a dialogue for A/E/S, a turn for nugget labels, a
        reference, a response) of the values it received, missing judgements simply left out
        (``None``/NaN is refused with ValueError). ``level``: ``"nominal"`` (nugget labels, any
        label), ``"ordinal"`` (A/E/S, Likert scales; default for scales) or ``"interval"``
        (numbers). ``order``: the scale from lowest to highest, e.g. ``[-2, -1, 0, 1, 2]``; pass it
        for labels that do not sort and to refuse values off the scale. Returns None (never NaN)
        when alpha is undefined: no unit with two values, or no variation at all; show "not
        defined" then, with the reason.
    ``alpha_interval(units, level, resamples=1000, seed=0, order=None, confidence=0.95)
    -> tuple[float, float] | None``
        Percentile bootstrap over units (the server's resampling stream,
        ``scoring.stats.bootstrap.resample_counts``); say R and the seed beside it. None when
        alpha is undefined.
    ``alpha_with_interval(...same arguments...) -> (alpha | None, interval | None)``: both, the
        units read once (what the report uses).
    Cost (CPU, benchmarks/judgements_speed.py): alpha of 1,672 dialogues x 19 annotators ~10 ms,
    its interval with R = 1,000 ~60 ms; nugget labels of 6,917 turns x 19 ~60 ms and ~0.3 s; the
    whole agreement report of that round ~0.9 s (cache it per campaign state, not per page view).

``scoring.judgements.formats`` (every ``load_*`` raises ``scoring.validation.ValidationFailed``
whose ``errors`` list every problem as ``"<json path>: <problem>"``; nothing is returned then)
    ``load_items(data, kind) -> Items``: ``data`` parsed JSON (``scoring.validation.parse_json``);
        kind ``"stc3"`` (dialogues ``[{"id", "turns": [{"sender"}]}]``, a gold's too),
        ``"response"`` (a response gold: one item ``"<id>#<k>"`` per reference, k 0-based) or
        ``"metric"`` (metrics-track contexts: one item per response id).
    ``load_dimensions(data) -> tuple[Dimension, ...]``: the organiser's scheme for responses,
        ``[{"name", "scale": [lowest..highest], "level": "ordinal", "meanings": [...]}]``.
        ``Dimension(name, level, scale, meanings)``; ``APPROPRIATENESS`` (1-5, the default for
        responses), ``REFERENCE_RATING`` (1-5, deltaBLEU's), ``stc3_dimensions(config)`` (A, E, S).
    ``load_judgements(data, kind, items=None, dimensions=None, config=STC3) -> JudgementSet``:
        stc3 ``{"item", "assessor", "quality": {...}, "nugget": [...]}``; response and metric
        ``{"item", "assessor", "values": {dimension: value}}``; optional ``"seconds"`` and
        ``"check": true`` (``JudgementSet.check_items``; ``without_checks()`` drops them; the
        report and the gold builders leave them out themselves).
        ``JudgementSet.judgements`` is a list of ``Judgement(item, assessor, values, nugget,
        seconds)``; a campaign builds one from its stored answers the same way (a list of dicts).

``scoring.judgements.tables``
    ``records_from_csv(data: bytes, kind, dimensions=None, config=STC3) -> list[dict]``: a CSV
        table (columns item, assessor, seconds, check, the dimensions, stc3 ``nugget``
        space-separated) as records for ``load_judgements``; ``csv_lines(errors, data)`` says its
        problems by line. A campaign's CSV import can use both.

``scoring.judgements.report``
    ``agreement_report(judgements, level=None, resamples=1000, seed=0, checks=None) -> dict``
        (JSON-ready, no NaN): ``{"dimensions": {name: {"alpha", "level", "interval", "n_items",
        "n_pairable_items", "n_judgements"}}, "assessors": {id: {"agreement": {name: {"measure",
        "value", "n_items"}}, "median_seconds", "straight_lining": {name: share},
        "check_accuracy", "n_check_answers", "n_judgements"}}, "bootstrap": {"resamples", "seed",
        "confidence", "method"}, "n_items", "n_check_items", "n_assessors", "n_judgements"}``.
        stc3 adds ``"nugget"`` (nominal, per turn). ``checks`` from ``load_checks(data,
        judgements)`` (``{item: {dimension: answer}}``); check items are left out of alpha.
    ``format_table(report) -> str``: the same for a terminal.

``scoring.judgements.gold`` (each built gold is validated by its kind's own reader)
    ``stc3_gold(judgements, dialogues) -> list``: judged dialogues with annotations ordered by
        assessor id.
    ``reference_gold(judgements, response_gold) -> list``: weights (mean rating - 3) / 2;
        refuses (ValidationFailed, with the item id) an item left without a positive reference.
    ``metric_gold(judgements, contexts, aggregation="mean" | "z-score") -> (gold, left_out)``:
        ``human`` (a number for one dimension, ``{dimension: mean}`` for several) and
        ``judgements`` ``{dimension: [values]}`` per judged response.
    ``provenance(judgements, campaign=None, required_per_item=None, aggregation=None,
        left_out=(), resamples=1000, seed=0, report=None) -> dict``: campaign, scheme,
        assessors, judgements per item, alpha per dimension, ``complete``; pass the
        ``agreement_report`` already computed as ``report`` to save the bootstrap.
"""
