"""The response measures registry: every measure one entry that the configuration, the board's
titles and the scoring read; worked examples end to end through the kind (the one scoring path),
properties of every measure, and entries that cannot be registered."""

import math
import random
from collections.abc import Iterator

import numpy as np
import pytest

from scoring.kinds import get_kind
from scoring.kinds.response import measures as registry
from scoring.kinds.response.config import ConfigInvalid
from scoring.kinds.response.measures import RESPONSE_MEASURES, ResponseMeasure, measure, register

KIND = get_kind("response")
EVERY = KIND.preset("response-bertscore")  # every configurable measure

# What every registered measure gives a response identical to an item's only original reference
# (weight 1; vBLEU's and vBERTScore's gold adds one reference of weight 0.5).
# A measure added to the registry without a row here fails test_every_measure_is_classified.
IDENTITY = {"bleu": 1.0, "delta_bleu": 1.0, "posscore": 2.0, "bertscore": 1.0, "vbleu": 1.0, "vbertscore": 1.0}

GOLD = [
    {"id": "a", "references": [{"text": "i love chess", "weight": 1}, {"text": "chess tournaments are fun",
                                                                      "weight": 0.5},
                               {"text": "i hate chess tournaments", "weight": -0.5}]},
    {"id": "b", "references": [{"text": "see you later", "weight": 1}, {"text": "bye", "weight": 0.2}]},
]


def scored(gold_data, run_data, config=EVERY, items=None):
    gold = KIND.compile_gold(gold_data, config)
    return KIND.score(KIND.parse_run(run_data, gold, config), gold, config, items=items)


def test_every_measure_is_classified():
    assert set(RESPONSE_MEASURES) == set(IDENTITY)
    for key, spec in RESPONSE_MEASURES.items():
        assert spec.key == key and spec.higher_is_better and spec.citation and spec.headline in ("corpus", "mean")
        assert (spec.headline == "corpus") == (spec.bleu_options is not None)
    assert registry.configurable() == ("bleu", "delta_bleu", "posscore", "bertscore")


def test_unknown_measure_named_from_the_registry():
    with pytest.raises(ValueError, match="unknown response measure 'rouge'; known: bleu, delta_bleu, posscore, "
                                         "bertscore, vbleu, vbertscore"):
        measure("rouge")


def test_worked_corpus_example_end_to_end():
    run = [{"id": "b", "response": "see you"}, {"id": "a", "response": "i love chess"}]
    scores = scored(GOLD, run)
    # rho from the original positively rated references (RESPONSE-SPEC.md): 2.75 against eta 2.5.
    assert scores.headlines["delta_bleu"] == pytest.approx(0.9048374180, abs=1e-10)
    assert set(scores.per_item) == set(registry.configurable())
    assert all(len(values) == 2 for values in scores.per_item.values())
    # A subset's headline is the corpus formula over that subset's statistics, exactly.
    # Item "a" alone: both precisions 1, BP = exp(1 - 3.5 / 3) (its two positive references: 3 and 4 tokens).
    specs = {spec.key: spec for spec in KIND.measures(EVERY)}
    statistics = scores.statistics["delta_bleu"]
    assert specs["delta_bleu"].corpus(statistics[[0]]) == pytest.approx(math.exp(1 - 3.5 / 3), abs=1e-15)
    assert specs["delta_bleu"].corpus(statistics[[1]]) == pytest.approx(1.0, abs=1e-15)
    subset = scored(GOLD, run, items=np.array([0]))
    assert subset.headlines["delta_bleu"] == pytest.approx(math.exp(1 - 3.5 / 3), abs=1e-15)
    assert scored(GOLD, run, items=np.array([1])).headlines["posscore"] == scores.per_item["posscore"][1]
    assert scores.settings["posscore"]["pipeline"] == "en_core_web_md"
    assert scores.settings["bleu"]["tokenize"] == "13a"


def test_properties_of_every_measure():
    rng = random.Random(3)
    words = "i you chess love hate see later bye fun tournaments are the a printer sorry help".split()
    gold_entries = [{"id": str(k), "references": [{"text": " ".join(rng.choices(words, k=rng.randint(2, 9))),
                                                   "weight": w} for w in (1.0, rng.uniform(-1, 1))]}
                    for k in range(40)]
    for entry in gold_entries[::2]:  # references vBLEU added: vBLEU and vBERTScore are scored too
        entry["references"].append({"text": " ".join(rng.choices(words, k=5)), "weight": rng.uniform(-1, 1),
                                    "origin": "pool"})
    run = [{"id": str(k), "response": " ".join(rng.choices(words, k=rng.randint(1, 12)))} for k in range(40)]
    scores = scored(gold_entries, run)
    assert list(scores.per_item) == list(RESPONSE_MEASURES)
    for key, spec in RESPONSE_MEASURES.items():
        values = scores.per_item[key]
        low, high = spec.value_range
        assert np.all(np.isfinite(values)) and np.all(values >= low) and np.all(values <= high), key
        assert low <= scores.headlines[key] <= high

    identical = [{"id": "x", "references": [{"text": "I love chess tournaments.", "weight": 1},
                                            {"text": "Chess is a game.", "weight": 0.5, "origin": "pool"}]}]
    echo_scores = scored(identical, [{"id": "x", "response": "I love chess tournaments."}])
    for key, expected in IDENTITY.items():
        assert echo_scores.per_item[key][0] == pytest.approx(expected, abs=1e-9), key
        assert echo_scores.headlines[key] == pytest.approx(expected, abs=1e-9), key


# One entry drives the configuration, the titles and the scoring -------------------------------------------------

def _length_scorer(job: registry.ScoringJob, family: list[ResponseMeasure]) -> Iterator[None]:
    yield
    for entry in family:
        job.per_item[entry.key] = np.array([float(len(text.split())) for text in job.responses])
        job.headlines[entry.key] = float(job.per_item[entry.key].mean())
        job.settings[entry.key] = {"unit": "words"}


def _entry(key: str = "length", **changes) -> ResponseMeasure:
    fields = {"key": key, "short_title": "Length", "citation": "a planted measure: the response's words",
              "value_range": (0.0, 1e6), "headline": "mean", "title": lambda config: "Length (words, mean)",
              "description": lambda config: f"words of the response, {config.language_name}",
              "scorer": _length_scorer}
    return ResponseMeasure(**{**fields, **changes})


@pytest.fixture
def planted():
    """Registers entries for one test and takes them out again (the registry is module state)."""
    added: list[str] = []

    def plant(entry: ResponseMeasure) -> ResponseMeasure:
        register(entry)
        added.append(entry.key)
        return entry

    scorers = list(registry._SCORERS)
    yield plant
    for key in added:
        del RESPONSE_MEASURES[key]
    registry._SCORERS[:] = scorers


def test_a_registered_measure_is_configured_titled_and_scored_from_its_entry(planted):
    planted(_entry())
    config = KIND.config({"measures": ["bleu", "length"], "official": ["length"], "nuggets": {"score": "never"}})
    spec = KIND.measures(config)[1]
    assert (spec.key, spec.title, spec.short_title, spec.official) == ("length", "Length (words, mean)", "Length",
                                                                      True)
    assert spec.description == "words of the response, English"
    run = [{"id": "a", "response": "i love chess"}, {"id": "b", "response": "see you later then"}]
    result = scored(GOLD, run, config)
    assert list(result.per_item) == ["bleu", "length"]
    assert result.per_item["length"].tolist() == [3.0, 4.0] and result.headlines["length"] == 3.5
    assert result.settings["length"] == {"unit": "words"}
    assert not config.needs_pipeline and not config.needs_encoder  # it names no resource


def test_an_entry_without_a_scorer_is_refused_at_registration(planted):
    before = dict(RESPONSE_MEASURES)
    with pytest.raises(ValueError, match="response measure 'rouge' cannot be registered: no scorer"):
        planted(_entry("rouge", scorer=None))
    with pytest.raises(ValueError, match="no scorer"):  # a plain function cannot start and finish apart
        planted(_entry("rouge", scorer=lambda job, family: None))
    assert RESPONSE_MEASURES == before
    with pytest.raises(ConfigInvalid, match='measures: unknown or invalid "rouge"'):
        KIND.config({"measures": ["rouge"]})


def test_every_gap_of_an_entry_is_named():
    with pytest.raises(ValueError) as refused:
        register(_entry("broken", headline="corpus", config_keys=("colour",), resources=("gpu",), requires="rouge",
                        citation=""))
    assert str(refused.value) == (
        "response measure 'broken' cannot be registered: a corpus headline without its BLEU options; no citation or "
        "short title; reads configuration section(s) colour the configuration does not have; needs unknown "
        "resource(s) gpu (known: pipeline, vectors, encoder); follows 'rouge', which is not a configurable measure "
        "registered before it; a configurable measure is not brought by the gold")
    with pytest.raises(ValueError, match="registered twice"):
        register(_entry("bleu"))
    assert "broken" not in RESPONSE_MEASURES


def test_languages_and_resources_are_read_from_the_entry(planted):
    planted(_entry("kana_share", languages=("ja",), resources=("encoder",)))
    with pytest.raises(ConfigInvalid) as refused:
        KIND.config({"measures": ["bleu", "kana_share"]})
    assert refused.value.problems == ["measures: kana_share is not valid for English tasks (only for Japanese)"]
    config = KIND.config({"language": "ja", "pipeline": "ja_ginza", "measures": ["bleu", "kana_share"],
                          "nuggets": {"score": "never"}})
    assert config.needs_encoder and not config.needs_pipeline and not config.needs_posscore


def test_measures_the_gold_brings_follow_their_configured_measure():
    assert [spec.key for spec in KIND.measures(KIND.config({"measures": ["bleu"]}))] == ["bleu", "vbleu"]
    specs = {spec.key: spec for spec in KIND.measures(KIND.config({**KIND.presets["response-bertscore"],
                                                                   "official": ["delta_bleu"]}))}
    assert list(specs) == ["bleu", "delta_bleu", "posscore", "bertscore", "vbleu", "vbertscore"]
    assert [key for key, spec in specs.items() if spec.official] == ["delta_bleu", "vbleu"]
    assert registry.present(EVERY, extended=False) == ["bleu", "delta_bleu", "posscore", "bertscore"]
