"""The response measures registry and the adapter's calls: worked examples end to end, properties of every measure."""

import math
import random

import numpy as np
import pytest

from scoring.kinds.response.formats import load_response_gold, load_response_run
from scoring.kinds.response.measures import RESPONSE_MEASURES, headline, measure, prepare_gold, score_run

# What every registered measure gives a response identical to an item's only reference (weight 1).
# A measure added to the registry without a row here fails test_every_measure_is_classified.
IDENTITY = {"bleu": 1.0, "delta_bleu": 1.0, "posscore": 2.0, "bertscore": 1.0}

GOLD = [
    {"id": "a", "references": [{"text": "i love chess", "weight": 1}, {"text": "chess tournaments are fun",
                                                                      "weight": 0.5},
                               {"text": "i hate chess tournaments", "weight": -0.5}]},
    {"id": "b", "references": [{"text": "see you later", "weight": 1}, {"text": "bye", "weight": 0.2}]},
]


@pytest.fixture(scope="module")
def prepared():
    return prepare_gold(load_response_gold(GOLD))


def test_every_measure_is_classified():
    assert set(RESPONSE_MEASURES) == set(IDENTITY)
    for key, spec in RESPONSE_MEASURES.items():
        assert spec.key == key and spec.higher_is_better and spec.citation and spec.headline in ("corpus", "mean")
        assert (spec.headline == "corpus") == (spec.bleu_config is not None)


def test_unknown_measure_named_from_the_registry():
    with pytest.raises(ValueError,
                       match="unknown response measure 'rouge'; known: bleu, delta_bleu, posscore, bertscore"):
        measure("rouge")


def test_worked_corpus_example_end_to_end(prepared):
    gold = load_response_gold(GOLD)
    run = load_response_run([{"id": "b", "response": "see you"}, {"id": "a", "response": "i love chess"}], gold)
    scores = score_run(run, prepared)
    # rho from the original positively rated references (RESPONSE-SPEC.md): 2.75 against eta 2.5.
    assert scores.headlines["delta_bleu"] == pytest.approx(0.9048374180, abs=1e-10)
    assert set(scores.per_item) == set(RESPONSE_MEASURES)
    assert all(len(values) == 2 for values in scores.per_item.values())
    # A subset's headline is the corpus formula over that subset's statistics, exactly.
    # Item "a" alone: both precisions 1, BP = exp(1 - 3.5 / 3) (its two positive references: 3 and 4 tokens).
    assert headline("delta_bleu", scores, subset=[0]) == pytest.approx(math.exp(1 - 3.5 / 3), abs=1e-15)
    assert headline("delta_bleu", scores, subset=[1]) == pytest.approx(1.0, abs=1e-15)
    assert headline("posscore", scores, subset=[1]) == scores.per_item["posscore"][1]
    assert scores.settings["posscore"]["pipeline"] == "en_core_web_md"
    assert scores.settings["bleu"]["tokenize"] == "13a"


def test_properties_of_every_measure():
    rng = random.Random(3)
    words = "i you chess love hate see later bye fun tournaments are the a printer sorry help".split()
    gold_entries = [{"id": str(k), "references": [{"text": " ".join(rng.choices(words, k=rng.randint(2, 9))),
                                                   "weight": w} for w in (1.0, rng.uniform(-1, 1))]}
                    for k in range(40)]
    gold = load_response_gold(gold_entries)
    prepared = prepare_gold(gold)
    run = load_response_run([{"id": str(k), "response": " ".join(rng.choices(words, k=rng.randint(1, 12)))}
                             for k in range(40)], gold)
    scores = score_run(run, prepared)
    for key, spec in RESPONSE_MEASURES.items():
        values = scores.per_item[key]
        low, high = spec.value_range
        assert np.all(np.isfinite(values)) and np.all(values >= low) and np.all(values <= high), key
        assert low <= scores.headlines[key] <= high

    identical = load_response_gold([{"id": "x", "references": [{"text": "I love chess tournaments."}]}])
    echo = load_response_run([{"id": "x", "response": "I love chess tournaments."}], identical)
    echo_scores = score_run(echo, prepare_gold(identical))
    for key, expected in IDENTITY.items():
        assert echo_scores.per_item[key][0] == pytest.approx(expected, abs=1e-9), key
        assert echo_scores.headlines[key] == pytest.approx(expected, abs=1e-9), key
