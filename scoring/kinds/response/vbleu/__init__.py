"""vBLEU: extend each item's references from a dialogue pool and weight them automatically.

Seed 001 (sections 3.2 and 4), RESPONSE-SPEC.md "vBLEU", issue 15. Framework-free: the management
command and the admin page call ``read_pool``, ``build_index``, ``extend_gold`` (or
``list_candidates`` + ``extend_gold(ratings=...)`` for human ratings) and store what they return.

1. **Pool** (``read_pool``): JSONL, one ``{"utterance": str, "response": str}`` object a line, at
   most ``MAX_POOL_PAIRS`` pairs; read as a stream (the raw file is never held in memory), hashed
   (sha256 of the bytes) on the way, every bad line named by its number; nothing is returned from a
   pool with any problem.
2. **Retrieval** (``build_index``, ``PoolIndex.retrieve``): BM25 (bm25s, a sparse-matrix index)
   between the item's last context utterance and the pool's utterances, both tokenised as BLEU
   tokenises in the task's language (sacrebleu's 13a, zh or ja-mecab, lower-cased; ``tokenizer``);
   the responses of the top k pairs (default 15) and the
   utterance itself as a "parrot" reference (seed 001 section 3.2). Ties are broken by pool order;
   pairs sharing no token with the utterance (score 0) are never retrieved; with ``dedupe`` a
   response that repeats, token for token, a reference of the item or an earlier retrieved one is
   passed over for the next pair.
3. **Rating**: human ratings (deltaBLEU; ``list_candidates`` gives what to rate) or the automatic
   rater of seed 001 section 4.2 at this machine's scale (``train_rater``): positives are true
   (utterance, response) pairs of the pool, negatives the same utterances with responses of other
   pairs; a scikit-learn feed-forward network over features from the task's word vectors gives
   P(appropriate), and the weight is ``2P - 1`` (RESPONSE-SPEC.md; the seed's own mapping,
   ``mapping="seed001"``, is offered too). Its held-out accuracy and seed are reported, and a
   rater no better than chance is refused (``check_rater``: one-sided binomial test, level
   ``CHANCE_LEVEL``).
4. **Extension** (``extend_gold``): the JSON of a new gold, every item's original references
   followed by the retrieved ones with their weights (and where they came from), plus a
   provenance dict (pool checksum, retrieval and rater settings, accuracy, seed). Same inputs and
   settings give identical bytes; ``reproduce`` re-runs it from a provenance dict.

vBLEU is deltaBLEU (``scoring.kinds.response.bleu.DELTA_BLEU``) over the new gold.

vBERTScore's extension (Tsuta et al. 2023, section 4.3) replaces the retrieval and the rater's
features with an encoder's: ``RetrievalSettings(retriever="embedding")`` ranks pool pairs by the
cosine of the utterances' sentence vectors (multilingual-e5-small, mean-pooled, unit length, e5's
"query: " prefix; ``EmbeddingIndex``), and ``RaterSettings(features="encoder")`` trains the same
rater on the same features computed from those vectors. Every distinct pool text is encoded once
(``encode_pool``; ``PoolEncodings`` keeps them as float16 with their checksum, for the server to
store and read back); weighted BERTScore over the new gold is vBERTScore
(``scoring.kinds.response.bertscore``).

One module a stage: ``pool`` (1, with the progress reporting every stage shares), ``retrieval`` (2),
``encodings`` (vBERTScore's pool encodings), ``rater`` (3) and ``extension`` (4). Every public name is
importable from this package.
"""

from __future__ import annotations

from scoring.kinds.response.vbleu.encodings import (
    ENCODE_CHUNK,
    ENCODINGS_FORMAT,
    SENTENCE_PREFIX,
    PoolEncodings,
    SentenceEncoder,
    SentenceLookup,
    default_sentence_encoder,
    encode_pool,
    encodings_key,
    pool_texts,
    sentence_lookup,
)
from scoring.kinds.response.vbleu.extension import (
    METHODS,
    ORIGINS,
    Extension,
    extend_gold,
    list_candidates,
    method_of,
    reproduce,
    settings_from_provenance,
)
from scoring.kinds.response.vbleu.pool import (
    MAX_LINE_BYTES,
    MAX_POOL_PAIRS,
    POOL_KEYS,
    Pool,
    Progress,
    canonical_sha256,
    read_pool,
)
from scoring.kinds.response.vbleu.rater import (
    CHANCE_LEVEL,
    ENCODER_FEATURES,
    FEATURES,
    MAPPINGS,
    MIN_RATER_PAIRS,
    RATER_FEATURES,
    Rater,
    RaterAtChance,
    RaterSettings,
    chance_p_value,
    check_rater,
    train_rater,
    weights_from_probabilities,
)
from scoring.kinds.response.vbleu.retrieval import (
    BM25_METHODS,
    RETRIEVERS,
    SCORE_BLOCK_VALUES,
    Candidate,
    EmbeddingIndex,
    PoolIndex,
    RetrievalSettings,
    build_index,
)

__all__ = [
    "BM25_METHODS",
    "CHANCE_LEVEL",
    "ENCODER_FEATURES",
    "ENCODE_CHUNK",
    "ENCODINGS_FORMAT",
    "FEATURES",
    "MAPPINGS",
    "MAX_LINE_BYTES",
    "MAX_POOL_PAIRS",
    "METHODS",
    "MIN_RATER_PAIRS",
    "ORIGINS",
    "POOL_KEYS",
    "RATER_FEATURES",
    "RETRIEVERS",
    "SCORE_BLOCK_VALUES",
    "SENTENCE_PREFIX",
    "Candidate",
    "EmbeddingIndex",
    "Extension",
    "Pool",
    "PoolEncodings",
    "PoolIndex",
    "Progress",
    "Rater",
    "RaterAtChance",
    "RaterSettings",
    "RetrievalSettings",
    "SentenceEncoder",
    "SentenceLookup",
    "build_index",
    "canonical_sha256",
    "chance_p_value",
    "check_rater",
    "default_sentence_encoder",
    "encode_pool",
    "encodings_key",
    "extend_gold",
    "list_candidates",
    "method_of",
    "pool_texts",
    "read_pool",
    "reproduce",
    "sentence_lookup",
    "settings_from_provenance",
    "train_rater",
    "weights_from_probabilities",
]
