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
    Cost: alpha of 1,672 dialogues x 19 annotators in ~20 ms; its interval with R = 1,000 in
    ~0.1 s; nugget labels of ~13,000 turns with R = 1,000 in ~0.5 s.
"""
