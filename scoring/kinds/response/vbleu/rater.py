"""vBLEU's third stage: the automatic rater (seed 001 section 4.2 at this machine's scale,
``train_rater``), its weights (``weights_from_probabilities``) and the refusal of a rater no better
than chance (``check_rater``)."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from scoring.kinds.response.bleu import tokenize
from scoring.kinds.response.nlp import VectorTable
from scoring.kinds.response.vbleu.encodings import SentenceLookup
from scoring.kinds.response.vbleu.pool import Pool, Progress, _Reporter
from scoring.kinds.response.vbleu.retrieval import _check, _is_int, _is_number, _known_fields, _without_default

MIN_RATER_PAIRS = 100
MAPPINGS = ("linear", "seed001")  # how the rater's P becomes a weight (RaterSettings.mapping)
# What the automatic rater's features come from: the task's word vectors (vBLEU) or the encoder's
# sentence vectors (vBERTScore's rater, at this machine's scale: a frozen encoder, not fine-tuned).
RATER_FEATURES = ("word-vectors", "encoder")


@dataclass(frozen=True)
class RaterSettings:
    """The automatic rater (seed 001 section 4.2 at this machine's scale); recorded in the provenance.

    ``seed``: every random choice (which pairs train, validate and test; the random responses of
    the negatives; the network's initial weights and batch order). ``train_pairs``: true pairs
    trained on (as many random pairs are added); ``held_out_pairs``: true pairs kept apart for
    the reported accuracy (as many random pairs added). A validation tenth of the training pairs
    (at most 10,000) picks the epoch with the least loss, as the seed does (section 5.4).
    ``dimensions``: the word-vector means are projected on their first principal components;
    ``hidden``: units of the network's hidden layer; training stops after ``patience`` epochs
    without a better validation loss, or after ``max_epochs``. ``mapping``: how P becomes a
    weight, ``"linear"`` (2P - 1, RESPONSE-SPEC.md) or ``"seed001"`` (seed 001 section 4.2: the
    larger of P and 1 - P, negated when P < 0.5, so no weight lies strictly between -0.5 and 0.5).
    ``parrot_weight``: the weight every parrot (the item's utterance itself) gets, -1 by default; or
    None, the rater rates the parrot like any other reference (seed 001 section 3.2). The rater sees
    (utterance, candidate) only and never an echo in training (no true or random pair repeats its
    utterance), so its verdict on a parrot is an extrapolation, and on real helpdesk data it rated
    every parrot +0.99999: a system echoing the customer then scored vBLEU 0.99999, above the true
    replies (RESPONSE-SPEC.md, "vBLEU"). With -1, an echo scores far below the true reply
    (benchmarks/vbleu_realistic.py, docs/vbleu.md). ``features``: ``"word-vectors"`` (the task's
    word vectors, the default) or ``"encoder"``: the same features computed from the encoder's
    sentence vectors (``PoolEncodings``), vBERTScore's rater (Tsuta et al. 2023, section 4.3) with the
    encoder frozen rather than fine-tuned.
    """

    seed: int = 0
    train_pairs: int = 200_000
    held_out_pairs: int = 10_000
    dimensions: int = 64
    hidden: int = 128
    max_epochs: int = 30
    patience: int = 3
    batch_size: int = 512
    learning_rate: float = 0.001
    mapping: str = "linear"
    parrot_weight: float | None = -1.0
    features: str = "word-vectors"

    def __post_init__(self) -> None:
        problems: list[str] = []
        _check(problems, self.features in RATER_FEATURES,
               f"features must be one of {', '.join(RATER_FEATURES)}, not {self.features!r}")
        _check(problems, self.mapping in MAPPINGS, f"mapping must be one of {', '.join(MAPPINGS)}, "
                                                   f"not {self.mapping!r}")
        _check(problems, _is_int(self.seed) and 0 <= self.seed < 2**32,
               f"seed must be an integer from 0 to 2**32 - 1, not {self.seed!r}")
        for name, low, high in (("train_pairs", 50, 10_000_000), ("held_out_pairs", 10, 1_000_000),
                                ("dimensions", 2, 1024), ("hidden", 1, 4096), ("max_epochs", 1, 1000),
                                ("patience", 1, 1000), ("batch_size", 1, 100_000)):
            value = getattr(self, name)
            _check(problems, _is_int(value) and low <= value <= high,
                   f"{name} must be an integer from {low} to {high}, not {value!r}")
        _check(problems, _is_number(self.learning_rate) and 0 < self.learning_rate <= 1,
               f"learning_rate must be a number in (0, 1], not {self.learning_rate!r}")
        _check(problems, self.parrot_weight is None or (_is_number(self.parrot_weight) and
                                                        -1 <= self.parrot_weight <= 1),
               f"parrot_weight must be null or a number in [-1, 1], not {self.parrot_weight!r}")
        if problems:
            raise ValueError("; ".join(problems))

    def to_dict(self) -> dict[str, object]:
        # As RetrievalSettings.to_dict: a word-vector rater records what it always did.
        return _without_default(asdict(self), "features", "word-vectors")

    @property
    def needs_encoder(self) -> bool:
        return self.features == "encoder"

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> RaterSettings:
        return cls(**_known_fields(cls, data, "rater"))


FEATURES = (
    "u and r: the projected unit means of the utterance's and the response's word vectors",
    "u * r and |u - r| (InferSent's pair features, Conneau et al. 2017)",
    "cosine of the full word-vector means (Tsuta et al. 2023, section 4.1's similarity)",
    "Jaccard overlap of the token sets (copying the utterance)",
    "log(1 + tokens) of the utterance and of the response (length fit)",
)


class _Embedder:
    """Unit means of a vector table's word vectors over the task's BLEU tokens, with the tokens kept for overlap."""

    def __init__(self, vectors: VectorTable, lowercase: bool, tokenizer: str = "13a") -> None:
        self.vectors = vectors
        self.lowercase = lowercase
        self.tokenizer = tokenizer
        self.dimension = int(vectors.shape[1])

    def __call__(self, texts: Sequence[str], chunk: int = 50_000) -> tuple[list[list[str]], np.ndarray]:
        from scipy import sparse

        tokens = [tokenize(text, self.lowercase, self.tokenizer) for text in texts]
        units = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), chunk):
            part = tokens[start : start + chunk]
            flat = [token for text_tokens in part for token in text_tokens]
            # The rows and the matrix they index come together: a table computed on demand (the
            # encoder's word vectors, wordvectors.py) holds only the words asked for.
            distinct = list(dict.fromkeys(flat))
            distinct_rows, data = self.vectors.lookup_words(distinct)
            index = dict(zip(distinct, distinct_rows.tolist()))
            rows = np.fromiter((index[token] for token in flat), dtype=np.int64, count=len(flat))
            owner = np.repeat(np.arange(len(part)), [len(text_tokens) for text_tokens in part])
            known = rows >= 0
            # Sums through a (texts x table rows) count matrix: no per-token copy of the vectors.
            counts = sparse.csr_matrix((np.ones(int(known.sum()), dtype=np.float32), (owner[known], rows[known])),
                                       shape=(len(part), len(data)))
            sums = np.asarray(counts @ np.asarray(data, dtype=np.float32), dtype=np.float32)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            units[start : start + len(part)] = np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0)
        return tokens, units


ENCODER_FEATURES = (
    "u and r: the projected unit sentence vectors (multilingual-e5-small, mean-pooled) of the utterance and "
    "the response",
    "u * r and |u - r| (InferSent's pair features, Conneau et al. 2017)",
    "cosine of the full sentence vectors (Tsuta et al. 2023, section 4.3: the encoder's similarity)",
    "Jaccard overlap of the token sets (copying the utterance)",
    "log(1 + tokens) of the utterance and of the response (length fit)",
)


class _EncoderEmbedder:
    """The rater's texts as the encoder's unit sentence vectors (``SentenceLookup``), with the task's
    BLEU tokens kept for the overlap and length features: the word-vector rater's features, from the encoder."""

    def __init__(self, lookup: SentenceLookup, lowercase: bool, tokenizer: str = "13a") -> None:
        self.lookup = lookup
        self.lowercase = lowercase
        self.tokenizer = tokenizer

    @property
    def dimension(self) -> int:
        return self.lookup.dimension

    def __call__(self, texts: Sequence[str]) -> tuple[list[list[str]], np.ndarray]:
        return [tokenize(text, self.lowercase, self.tokenizer) for text in texts], self.lookup(texts)


def _overlap(first: list[str], second: list[str]) -> float:
    a, b = set(first), set(second)
    return len(a & b) / len(a | b) if a or b else 0.0


@dataclass(eq=False)
class Rater:
    """A trained automatic rater: ``probabilities`` P(appropriate) and ``weights`` (2P - 1 by default)."""

    settings: RaterSettings
    embedder: _Embedder | _EncoderEmbedder
    projection_mean: np.ndarray
    projection: np.ndarray
    feature_mean: np.ndarray
    feature_scale: np.ndarray
    model: object
    report: dict[str, object] = field(default_factory=dict)
    # (correct, examples) on the held-out split: what check_rater tests (not in the provenance,
    # whose bytes stay what they were; the rounded accuracy and the example count are there).
    held_out: tuple[int, int] = (0, 0)

    def _raw_features(self, u_tokens: Sequence[list[str]], u_units: np.ndarray, r_tokens: Sequence[list[str]],
                      r_units: np.ndarray) -> np.ndarray:
        """The FEATURES of each (utterance, response) pair, float32, before standardisation."""
        u = (u_units - self.projection_mean) @ self.projection.T
        r = (r_units - self.projection_mean) @ self.projection.T
        scalars = np.empty((len(u), 4), dtype=np.float32)
        scalars[:, 0] = np.einsum("ij,ij->i", u_units, r_units)
        scalars[:, 1] = [_overlap(a, b) for a, b in zip(u_tokens, r_tokens)]
        scalars[:, 2] = np.log1p([len(a) for a in u_tokens])
        scalars[:, 3] = np.log1p([len(b) for b in r_tokens])
        return np.hstack([u, r, u * r, np.abs(u - r), scalars]).astype(np.float32)

    def _standardise(self, features: np.ndarray) -> np.ndarray:
        features -= self.feature_mean
        features /= self.feature_scale
        return features

    def probabilities(self, utterances: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        """P(the response is an appropriate reply to the utterance), float64, one per pair."""
        from threadpoolctl import threadpool_limits

        if len(utterances) != len(responses):
            raise ValueError(f"{len(utterances)} utterances but {len(responses)} responses")
        if not len(utterances):
            return np.zeros(0)
        with threadpool_limits(1):  # one BLAS thread: the same bits on any machine
            u_tokens, u_units = self.embedder(utterances)
            r_tokens, r_units = self.embedder(responses)
            features = self._standardise(self._raw_features(u_tokens, u_units, r_tokens, r_units))
            return self.model.predict_proba(features)[:, 1].astype(np.float64)

    def weights(self, utterances: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        """deltaBLEU weights in [-1, 1] by the settings' mapping, rounded to 6 decimals."""
        return weights_from_probabilities(self.probabilities(utterances, responses), self.settings.mapping)

    def provenance(self) -> dict[str, object]:
        if isinstance(self.embedder, _EncoderEmbedder):
            source: dict[str, object] = {"features": list(ENCODER_FEATURES),
                                         "encoder": self.embedder.lookup.encodings.encoder}
        else:
            source = {"features": list(FEATURES), "vectors": self.embedder.vectors.provenance()}
        return {
            "kind": "automatic",
            "method": "Tsuta et al. 2023, section 4.2, at this machine's scale: positives are true pairs of the pool, "
                      "negatives the same utterances with responses of other pairs",
            "weight": "2P - 1" if self.settings.mapping == "linear" else "max(P, 1 - P), negated when P < 0.5 "
                                                                         "(Tsuta et al. 2023, section 4.2)",
            "classifier": f"scikit-learn MLPClassifier, one hidden layer of {self.settings.hidden} ReLU units, "
                          "Adam, features standardised",
            "features": source["features"],
            "tokens": f"sacrebleu {self.embedder.tokenizer}{', lower-cased' if self.embedder.lowercase else ''}",
            **{name: value for name, value in source.items() if name != "features"},
            "settings": self.settings.to_dict(),
            **self.report,
        }


def weights_from_probabilities(probabilities: np.ndarray, mapping: str = "linear") -> np.ndarray:
    """deltaBLEU weights from P(appropriate), rounded to 6 decimals (+ 0.0 turns -0.0 into 0.0).

    ``linear``: 2P - 1 (RESPONSE-SPEC.md). ``seed001``: P when P >= 0.5, else -(1 - P): the
    larger of the two class probabilities, negated when the pair is classified inappropriate.
    """
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 0.0, 1.0)
    if mapping == "linear":
        weights = 2.0 * p - 1.0
    elif mapping == "seed001":
        weights = np.where(p >= 0.5, p, p - 1.0)
    else:
        raise ValueError(f"mapping must be one of {', '.join(MAPPINGS)}, not {mapping!r}")
    return np.round(weights, 6) + 0.0


def _principal_axes(blocks: Sequence[np.ndarray], dimensions: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and first principal axes (rows) of the stacked blocks, from their covariance matrix.

    Accumulated in float64 by chunks: memory stays at d x d whatever the number of rows (an SVD
    of 400,000 x 300 needed 1.5 GB more). Each axis is signed so that its largest entry is positive.
    """
    width = blocks[0].shape[1]
    count = sum(len(block) for block in blocks)
    total = np.zeros(width)
    scatter = np.zeros((width, width))
    for block in blocks:
        for start in range(0, len(block), 50_000):
            chunk = np.asarray(block[start : start + 50_000], dtype=np.float64)
            total += chunk.sum(axis=0)
            scatter += chunk.T @ chunk
    mean = total / count
    values, vectors = np.linalg.eigh(scatter / count - np.outer(mean, mean))
    axes = vectors[:, np.argsort(-values, kind="stable")[:dimensions]].T
    signs = np.sign(axes[np.arange(len(axes)), np.argmax(np.abs(axes), axis=1)])
    return mean.astype(np.float32), (axes * signs[:, None]).astype(np.float32)


def _split(n: int, settings: RaterSettings) -> tuple[int, int, int]:
    """(held-out, validation, training) true pairs taken from a pool of n."""
    held_out = min(settings.held_out_pairs, n // 5)
    rest = n - held_out
    validation = min(max(1, settings.train_pairs // 10), 10_000, rest // 10)
    return held_out, validation, min(settings.train_pairs, rest - validation)


def train_rater(pool: Pool, vectors: VectorTable | None, settings: RaterSettings | None = None, lowercase: bool = True,
                progress: Progress | None = None, lookup: SentenceLookup | None = None, tokenizer: str = "13a"
                ) -> Rater:
    """Train the automatic rater on the pool itself; ``Rater.report`` has the held-out accuracy.
    ``lowercase`` and ``tokenizer``: how texts are tokenised (the retrieval's: BLEU's in the task's language).

    Its features come from ``vectors`` (the task's word vectors) or, with ``settings.features ==
    "encoder"``, from ``lookup`` (the pool's ``SentenceLookup``): the same network and features either way.

    The pool's pairs are shuffled (``settings.seed``) and split into held-out, validation and
    training pairs; in each split every utterance appears once with its own response (label 1)
    and once with the response of the next pair in the shuffled split (label 0, never its own
    pair). The network is trained with one BLAS thread so that a run is bit for bit reproducible.
    """
    from sklearn.metrics import log_loss
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    settings = settings or RaterSettings()
    if settings.needs_encoder and (lookup is None or lookup.encodings.pool_sha256 != pool.sha256):
        raise ValueError("the encoder rater needs the pool's sentence vectors (a SentenceLookup of this pool)")
    if not settings.needs_encoder and vectors is None:
        raise ValueError("the word-vector rater needs a table of word vectors")
    if len(pool) < MIN_RATER_PAIRS:
        raise ValueError(f"the automatic rater needs a pool of at least {MIN_RATER_PAIRS} pairs; this one has "
                         f"{len(pool)}")
    if progress is not None:
        # The stage starts here, not at the first epoch: embedding the pairs and building the
        # examples takes about as long as the epochs, and a follower would count it to the stage before.
        progress("rater", 0, settings.max_epochs)
    rng = np.random.default_rng(settings.seed)
    held_out, validation, training = _split(len(pool), settings)
    order = rng.permutation(len(pool))
    splits = {"held_out": order[:held_out], "validation": order[held_out : held_out + validation],
              "train": order[held_out + validation : held_out + validation + training]}
    # One BLAS thread for everything numeric: the same bits on any machine (and, on 2 busy cores,
    # faster than two threads fighting).
    with threadpool_limits(1):
        embedder: _Embedder | _EncoderEmbedder
        if settings.needs_encoder:
            embedder = _EncoderEmbedder(lookup, lowercase, tokenizer)
            dimensions = min(settings.dimensions, embedder.dimension)
        else:
            embedder = _Embedder(vectors, lowercase, tokenizer)
            dimensions = min(settings.dimensions, vectors.shape[1])
        data: dict[str, tuple] = {}
        for name, rows in splits.items():
            u_tokens, u_units = embedder([pool.utterances[row] for row in rows])
            r_tokens, r_units = embedder([pool.responses[row] for row in rows])
            data[name] = (u_tokens, u_units, r_tokens, r_units)
        mean, axes = _principal_axes([data["train"][1], data["train"][3]], dimensions)
        rater = Rater(settings, embedder, mean, axes, np.zeros(1, dtype=np.float32), np.ones(1, dtype=np.float32), None)

        def examples(name: str) -> tuple[np.ndarray, np.ndarray]:
            """Raw features of a split's true pairs, then of the same utterances with the next pair's response."""
            u_tokens, u_units, r_tokens, r_units = data[name]
            m = len(u_tokens)
            shifted = np.roll(np.arange(m), -1)  # never the pair's own response
            features = np.empty((2 * m, 4 * len(axes) + 4), dtype=np.float32)
            features[:m] = rater._raw_features(u_tokens, u_units, r_tokens, r_units)
            features[m:] = rater._raw_features(u_tokens, u_units, [r_tokens[k] for k in shifted], r_units[shifted])
            return features, np.repeat(np.array([1, 0]), m)

        x_train, y_train = examples("train")
        rater.feature_mean = x_train.mean(axis=0, dtype=np.float64).astype(np.float32)
        scale = x_train.std(axis=0, dtype=np.float64)
        rater.feature_scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
        x_train = rater._standardise(x_train)
        x_validation, y_validation = examples("validation")
        x_validation = rater._standardise(x_validation)
        x_held_out, y_held_out = examples("held_out")
        x_held_out = rater._standardise(x_held_out)

        model = MLPClassifier(hidden_layer_sizes=(settings.hidden,), batch_size=settings.batch_size,
                              learning_rate_init=settings.learning_rate, random_state=settings.seed, shuffle=True)
        best_loss, best_epoch, stalled = math.inf, 0, 0
        best_state: tuple = ()
        report = _Reporter(progress, "rater", settings.max_epochs)
        epochs = 0
        for epoch in range(1, settings.max_epochs + 1):
            model.partial_fit(x_train, y_train, classes=np.array([0, 1]))
            epochs = epoch
            loss = log_loss(y_validation, model.predict_proba(x_validation)[:, 1], labels=[0, 1])
            if loss < best_loss:
                best_loss, best_epoch, stalled = loss, epoch, 0
                best_state = (copy.deepcopy(model.coefs_), copy.deepcopy(model.intercepts_))
            else:
                stalled += 1
            report(epoch)
            if stalled >= settings.patience:
                break
        model.coefs_, model.intercepts_ = best_state
        held_out_p = model.predict_proba(x_held_out)[:, 1]
    report.end(epochs)
    rater.model = model
    correct = int(np.count_nonzero((held_out_p >= 0.5) == (y_held_out == 1)))
    rater.held_out = (correct, len(y_held_out))
    accuracy = float(np.mean((held_out_p >= 0.5) == (y_held_out == 1)))
    rater.report = {
        "pairs": {"train": training, "validation": validation, "held_out": held_out},
        "examples": {"train": 2 * training, "validation": 2 * validation, "held_out": 2 * held_out},
        "epochs_run": epochs,
        "best_epoch": best_epoch,
        "validation_log_loss": round(float(best_loss), 6),
        "held_out_accuracy": round(accuracy, 6),
        "seed": settings.seed,
    }
    return rater


# A trained rater is kept only if its held-out accuracy beats chance (0.5: the held-out examples are
# half true pairs, half shuffled) by a one-sided exact binomial test at this level. A refusal, not a
# warning: a rater at chance gives weights 2P - 1 that are noise around 0, and a new gold version
# built on them re-scores every run silently; nothing is stored, and the message says what to do.
CHANCE_LEVEL = 0.01


class RaterAtChance(ValueError):
    """The automatic rater is no better than chance on its held-out pairs (``check_rater``)."""


_TOKENIZER_LANGUAGES = {"13a": "English", "zh": "Chinese", "ja-mecab": "Japanese",
                        "char": "every character a token", "intl": "words by Unicode classes"}


def chance_p_value(correct: int, examples: int) -> float:
    """P(at least ``correct`` of ``examples`` right by guessing): the one-sided exact binomial test
    of the held-out accuracy against 0.5."""
    from scipy.stats import binomtest

    return float(binomtest(correct, examples, 0.5, alternative="greater").pvalue)


def check_rater(rater: Rater, tokenizer: str = "13a", level: float = CHANCE_LEVEL) -> None:
    """Raise ``RaterAtChance`` unless the rater's held-out accuracy is better than chance: the
    one-sided exact binomial test of its correct held-out examples against 0.5 must give p < ``level``."""
    correct, examples = rater.held_out
    p_value = chance_p_value(correct, examples)
    if p_value < level:
        return
    pairs = rater.report.get("pairs", {})
    raise RaterAtChance(
        f"the automatic rater is no better than chance, so its weights would be noise and nothing was stored: "
        f"it classed {correct} of {examples} held-out examples right (accuracy {correct / examples:.3f}; half are "
        f"true pool pairs, half shuffled, so guessing scores 0.5), and a one-sided binomial test against 0.5 gives "
        f"p = {p_value:.3g}, not below {level:g}. Its tokens were sacrebleu's {tokenizer} "
        f"({_TOKENIZER_LANGUAGES.get(tokenizer, tokenizer)}): check that the pool and the task are in the same "
        f"language, give a larger pool (it trained on {pairs.get('train', 0):,} true pairs), or rate the "
        f"retrieved references by hand (human ratings)")
