"""The reference-metric baselines of the metrics track: the response kind's sentence-level BLEU,
deltaBLEU and POSSCORE of each gold response against its context's references."""

from __future__ import annotations

import numpy as np

from scoring.kinds.metric.formats import MetricGold


def reference_scores(gold: MetricGold, names: list[str]) -> dict[str, tuple[str, np.ndarray]]:
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
