"""Plain-loop reference implementations that the tests compare the scoring core with.

Written from TASK-SPEC.md, not from ``scoring/``: one distribution at a time, Python lists
and loops, no vectorisation and no shared helpers, so that a mistake in the vectorised code
is unlikely to be repeated here. Two kinds of reference:

- ``REFERENCE_MEASURES`` and ``evaluate_reference``: the measures and the aggregation as the
  spec defines them (both variants, alpha, macro/micro averaging, one-sided dialogues);
- ``stc3_2018_script``: a re-implementation of the logic of the 2018 STC-3 organisers'
  evaluation script (what the ``stc3-2018`` variant must reproduce), reporting only what
  that script reported: RSNOD and NMD per quality dimension, JSD and RNSS for nuggets.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
from scipy import stats

# Measures (p = estimate, q = gold, both lists already normalised) -------------------------


def normalise(values: list[float]) -> list[float]:
    total = sum(values)
    return [value / total for value in values]


def nvd(p: list[float], q: list[float], variant: str = "paper") -> float:
    """Half the L1 distance."""
    total = 0.0
    for i in range(len(p)):
        total += abs(p[i] - q[i])
    return total / 2


def rnss(p: list[float], q: list[float], variant: str = "paper") -> float:
    total = 0.0
    for i in range(len(p)):
        total += (p[i] - q[i]) ** 2
    return math.sqrt(total / 2)


def jsd(p: list[float], q: list[float], variant: str = "paper") -> float:
    """Jensen-Shannon divergence in bits; 0 * log(0 / x) counts as 0."""
    middle = [(p[i] + q[i]) / 2 for i in range(len(p))]

    def kl(x: list[float]) -> float:
        total = 0.0
        for i in range(len(x)):
            if x[i] > 0:
                total += x[i] * math.log2(x[i] / middle[i])
        return total

    return (kl(p) + kl(q)) / 2


def order_aware_divergence(p: list[float], q: list[float], variant: str = "paper") -> float:
    """OD(p, q): the outer sum runs over q's non-empty bins (paper) or over every bin (stc3-2018)."""
    n_bins = len(p)
    if variant == "paper":
        outer = [i for i in range(n_bins) if q[i] > 0]
    elif variant == "stc3-2018":
        outer = list(range(n_bins))
    else:
        raise ValueError(variant)
    total = 0.0
    for i in outer:
        for j in range(n_bins):
            total += abs(i - j) * (p[j] - q[j]) ** 2
    return total / len(outer)


def nod(p: list[float], q: list[float], variant: str = "paper") -> float:
    return order_aware_divergence(p, q, variant) / (len(p) - 1)


def snod(p: list[float], q: list[float], variant: str = "paper") -> float:
    return (order_aware_divergence(p, q, variant) + order_aware_divergence(q, p, variant)) / 2 / (len(p) - 1)


def rsnod(p: list[float], q: list[float], variant: str = "paper") -> float:
    return math.sqrt(snod(p, q, variant))


def nmd(p: list[float], q: list[float], variant: str = "paper") -> float:
    cumulative_p = cumulative_q = 0.0
    total = 0.0
    for i in range(len(p)):
        cumulative_p += p[i]
        cumulative_q += q[i]
        total += abs(cumulative_p - cumulative_q)
    return total / (len(p) - 1)


REFERENCE_MEASURES = {"nvd": nvd, "rnss": rnss, "jsd": jsd, "nod": nod, "snod": snod, "rsnod": rsnod, "nmd": nmd}


# Aggregation over a run, from the parsed JSON files ---------------------------------------


def gold_quality(dialogue: dict[str, Any], dimension: str, scale: tuple[str, ...]) -> list[float]:
    counts = [0.0] * len(scale)
    for annotation in dialogue["annotations"]:
        counts[scale.index(str(annotation["quality"][dimension]))] += 1
    return normalise(counts)


def gold_nugget(dialogue: dict[str, Any], turn: int, types: tuple[str, ...]) -> list[float]:
    counts = [0.0] * len(types)
    for annotation in dialogue["annotations"]:
        counts[types.index(annotation["nugget"][turn])] += 1
    return normalise(counts)


def estimate(values: dict[str, float], labels: tuple[str, ...]) -> list[float]:
    return normalise([float(values.get(label, 0)) for label in labels])


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def evaluate_reference(run: list[dict], gold: list[dict], config: Any) -> dict[str, Any]:
    """Scores of ``run`` as the spec defines them, for the measures and options of ``config``.

    Returns ``{"quality": {dim: {measure: mean}}, "nugget": {measure: mean}, "per_dialogue":
    {"quality": {dim: {measure: {id: score}}}, "nugget": {measure: {id: score}}}}``, with the
    subtasks the run contains; dialogues of the gold missing from the run are left out.
    """
    by_id = {entry["id"]: entry for entry in run}
    dialogues = [dialogue for dialogue in gold if dialogue["id"] in by_id]
    result: dict[str, Any] = {"per_dialogue": {}}
    variant = config.variant
    if run[0].get("quality") is not None:
        result["quality"], result["per_dialogue"]["quality"] = {}, {}
        for dimension in config.quality_dimensions:
            means, per_dialogue = {}, {}
            for name in config.quality_measures:
                scores = {}
                for dialogue in dialogues:
                    p = estimate(by_id[dialogue["id"]]["quality"][dimension], config.quality_scale)
                    q = gold_quality(dialogue, dimension, config.quality_scale)
                    scores[dialogue["id"]] = REFERENCE_MEASURES[name](p, q, variant)
                per_dialogue[name] = scores
                means[name] = _mean(list(scores.values()))
            result["quality"][dimension] = means
            result["per_dialogue"]["quality"][dimension] = per_dialogue
    if run[0].get("nugget") is not None:
        result["nugget"], result["per_dialogue"]["nugget"] = {}, {}
        for name in config.nugget_measures:
            measure = REFERENCE_MEASURES[name]
            per_dialogue = {}
            pooled_customer: list[float] = []
            pooled_helpdesk: list[float] = []
            for dialogue in dialogues:
                customer, helpdesk = [], []
                for turn, spec in enumerate(dialogue["turns"]):
                    turn_estimate = by_id[dialogue["id"]]["nugget"][turn]
                    if spec["sender"] == "customer":
                        types = config.customer_nugget_types
                        customer.append(measure(estimate(turn_estimate, types), gold_nugget(dialogue, turn, types)))
                    else:
                        types = config.helpdesk_nugget_types
                        helpdesk.append(measure(estimate(turn_estimate, types), gold_nugget(dialogue, turn, types)))
                if not customer:
                    per_dialogue[dialogue["id"]] = _mean(helpdesk)
                elif not helpdesk:
                    per_dialogue[dialogue["id"]] = _mean(customer)
                else:
                    per_dialogue[dialogue["id"]] = config.alpha * _mean(customer) + (1 - config.alpha) * _mean(helpdesk)
                pooled_customer += customer
                pooled_helpdesk += helpdesk
            result["per_dialogue"]["nugget"][name] = per_dialogue
            if config.averaging == "macro":
                result["nugget"][name] = _mean(list(per_dialogue.values()))
            elif not pooled_customer:
                result["nugget"][name] = _mean(pooled_helpdesk)
            elif not pooled_helpdesk:
                result["nugget"][name] = _mean(pooled_customer)
            else:
                result["nugget"][name] = (config.alpha * _mean(pooled_customer)
                                          + (1 - config.alpha) * _mean(pooled_helpdesk))
    return result


# The 2018 STC-3 organisers' script ---------------------------------------------------------
# Its logic, rewritten: every measure normalises both arguments by their sums; OD averages its
# outer sum over all L bins in both directions; JSD goes through scipy.stats.entropy; gold
# quality labels are compared as str(label) with the scale ('2', '1', '0', '-1', '-2'); a
# dialogue's ND score is mean(customer turns) * alpha + mean(helpdesk turns) * (1 - alpha),
# then the mean over dialogues. It reports RSNOD and NMD for quality, JSD and RNSS for nuggets.

SCRIPT_2018_QUALITY_SCALE = ("2", "1", "0", "-1", "-2")
SCRIPT_2018_CUSTOMER_TYPES = ("CNUG0", "CNUG", "CNUG*", "CNaN")
SCRIPT_2018_HELPDESK_TYPES = ("HNUG", "HNUG*", "HNaN")


def _script_normalise(pred: Any, truth: Any) -> tuple[np.ndarray, np.ndarray]:
    pred, truth = np.asarray(pred, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    return pred / pred.sum(), truth / truth.sum()


def script_2018_nmd(pred: Any, truth: Any) -> float:
    pred, truth = _script_normalise(pred, truth)
    return float(np.abs(np.cumsum(pred) - np.cumsum(truth)).sum() / (len(pred) - 1))


def _script_od(pred: np.ndarray, truth: np.ndarray) -> float:
    n_bins = len(pred)
    weighted = [sum(abs(i - j) * (pred[j] - truth[j]) ** 2 for j in range(n_bins)) for i in range(n_bins)]
    return float(np.mean(weighted))  # over ALL bins: the 2018 script's reading of eq. 7


def script_2018_rsnod(pred: Any, truth: Any) -> float:
    pred, truth = _script_normalise(pred, truth)
    symmetric = (_script_od(pred, truth) + _script_od(truth, pred)) / 2
    return float(np.sqrt(symmetric / (len(pred) - 1)))


def script_2018_rnss(pred: Any, truth: Any) -> float:
    pred, truth = _script_normalise(pred, truth)
    return float(np.sqrt(((pred - truth) ** 2).sum() / 2))


def script_2018_jsd(pred: Any, truth: Any) -> float:
    pred, truth = _script_normalise(pred, truth)
    middle = (pred + truth) / 2
    return float((stats.entropy(pred, middle, base=2) + stats.entropy(truth, middle, base=2)) / 2)


def stc3_2018_script(run: list[dict], gold: list[dict], alpha: float = 0.5) -> dict[str, Any]:
    """``{"quality": {dim: {"rsnod", "nmd"}}, "nugget": {"jsd", "rnss"}}`` for the subtasks of the run."""
    gold_by_id = {dialogue["id"]: dialogue for dialogue in gold}
    results: dict[str, Any] = {}
    if run[0].get("nugget") is not None:
        results["nugget"] = {}
        for name, measure in (("jsd", script_2018_jsd), ("rnss", script_2018_rnss)):
            dialogue_scores = []
            for prediction in run:
                truth = gold_by_id[prediction["id"]]
                customer_scores, helpdesk_scores = [], []
                for turn, turn_prediction in enumerate(prediction["nugget"]):
                    is_customer = truth["turns"][turn]["sender"] == "customer"
                    types = SCRIPT_2018_CUSTOMER_TYPES if is_customer else SCRIPT_2018_HELPDESK_TYPES
                    labels = Counter(annotation["nugget"][turn] for annotation in truth["annotations"])
                    truth_counts = [labels.get(label, 0) for label in types]
                    predicted = [turn_prediction.get(label, 0) for label in types]
                    (customer_scores if is_customer else helpdesk_scores).append(measure(predicted, truth_counts))
                # As in the script: no special case for a dialogue with turns of one side only.
                dialogue_scores.append(np.mean(customer_scores) * alpha + np.mean(helpdesk_scores) * (1 - alpha))
            results["nugget"][name] = float(np.mean(dialogue_scores))
    if run[0].get("quality") is not None:
        results["quality"] = {}
        for name, measure in (("rsnod", script_2018_rsnod), ("nmd", script_2018_nmd)):
            per_dimension: dict[str, list[float]] = {}
            for prediction in run:
                truth = gold_by_id[prediction["id"]]
                for dimension, predicted_values in prediction["quality"].items():
                    labels = Counter(str(annotation["quality"][dimension]) for annotation in truth["annotations"])
                    truth_counts = [labels.get(label, 0) for label in SCRIPT_2018_QUALITY_SCALE]
                    predicted = [predicted_values.get(label, 0) for label in SCRIPT_2018_QUALITY_SCALE]
                    per_dimension.setdefault(dimension, []).append(measure(predicted, truth_counts))
            for dimension, scores in per_dimension.items():
                results["quality"].setdefault(dimension, {})[name] = float(np.mean(scores))
    return results


# deltaBLEU (RESPONSE-SPEC.md, "BLEU and deltaBLEU"; seed 001 eq. 1-4), written from the equations ---------

def _sacrebleu_tokens(text: str, lowercase: bool, tokenizer: str) -> list[str]:
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

    if lowercase:
        text = text.lower()
    if tokenizer == "ja-mecab":
        from sacrebleu.tokenizers.tokenizer_ja_mecab import TokenizerJaMecab

        return TokenizerJaMecab()(text).split()
    return (TokenizerZh() if tokenizer == "zh" else Tokenizer13a())(text).split()


def plain_delta_bleu(hypotheses: list[str], references: list[list[tuple]], order: int = 2,
                     brevity: str = "average", brevity_references: str = "positive", per_item: bool = False,
                     lowercase: bool = True, tokenizer: str = "13a") -> float | list[float]:
    """deltaBLEU with loops. ``references[i]``: tuples ``(text, weight)`` (an original reference) or
    ``(text, weight, origin)`` (origin "original", "pool" or "parrot"). rho: the mean (``average``)
    or the closest, ties to the shorter (``closest``), of the lengths of the references that set it:
    the originals with weight > 0 (``positive``) or all of them (``all``). ``per_item``: one score
    per item, add-one smoothing for n >= 2, else the corpus score (sums over items)."""
    def grams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
        return [tuple(tokens[k : k + n]) for k in range(len(tokens) - n + 1)]

    def score(nums: list[float], dens: list[float], eta: float, rho: float, smooth: bool) -> float:
        logs = 0.0
        for n in range(order):
            num, den = nums[n], dens[n]
            if smooth and n >= 1:
                num, den = num + 1, den + 1
            if num <= 0 or den <= 0:
                return 0.0
            logs += math.log(num / den)
        if eta == 0:
            return 0.0
        penalty = 1.0 if eta > rho else math.exp(1 - rho / eta)
        return penalty * math.exp(logs / order)

    total_num, total_den = [0.0] * order, [0.0] * order
    total_eta = total_rho = 0.0
    scores = []
    for hypothesis, item_references in zip(hypotheses, references):
        hyp = _sacrebleu_tokens(hypothesis, lowercase, tokenizer)
        refs = []
        for entry in item_references:
            origin = entry[2] if len(entry) > 2 else "original"
            refs.append((_sacrebleu_tokens(entry[0], lowercase, tokenizer), float(entry[1]), origin))
        nums, dens = [0.0] * order, [0.0] * order
        for n in range(1, order + 1):
            counts: dict[tuple[str, ...], int] = {}
            for gram in grams(hyp, n):
                counts[gram] = counts.get(gram, 0) + 1
            for gram, count in counts.items():
                best = None
                for tokens, weight, _ in refs:
                    held = grams(tokens, n).count(gram)
                    if held:
                        value = weight * min(count, held)
                        best = value if best is None or value > best else best
                nums[n - 1] += best if best is not None else 0.0
                dens[n - 1] += max(weight * count for _, weight, _ in refs)
        setting = [len(tokens) for tokens, weight, origin in refs
                   if brevity_references == "all" or (origin == "original" and weight > 0)]
        eta = float(len(hyp))
        if brevity == "average":
            rho = sum(setting) / len(setting)
        else:
            rho = float(sorted(setting, key=lambda length: (abs(length - eta), length))[0])
        scores.append(score(nums, dens, eta, rho, smooth=True))
        for n in range(order):
            total_num[n] += nums[n]
            total_den[n] += dens[n]
        total_eta += eta
        total_rho += rho
    if per_item:
        return scores
    return score(total_num, total_den, total_eta, total_rho, smooth=False)
