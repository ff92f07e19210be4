"""How the response kind describes itself in a reader's words: the "Scored with" lines of a
run's settings (``describe_settings``) and, for a fold-out, their versions and checksums
(``describe_versions``), a vBLEU-extended gold version's provenance (``provenance_summary``,
``describe_provenance``) and the run file's format for participants (``format_description``).
``ResponseKind`` answers with these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scoring.kinds.response.config import LANGUAGES, VBERTSCORE, ResponseConfig
from scoring.kinds.response.formats import (
    MAX_ALTERNATIVES_PER_NUGGET,
    MAX_NUGGET_WORK,
    MAX_NUGGETS_PER_RESPONSE,
    MAX_RESPONSE_CHARS,
)
from scoring.kinds.response.languages import example_reply, vectors_words

# The references each measure used, as stored with its settings, in the reader's words: the
# references vBLEU adds are responses retrieved from other contexts ("pool") and the context's
# last utterance itself ("parrot"; Tsuta et al. 2023, section 3.2).
_ADDED = ("the original references and those vBLEU adds (responses to similar utterances of other contexts, "
          "and the utterance itself)")
_REFERENCE_WORDS = {
    "original only": "the original references only",
    "original and added by vBLEU (origin pool or parrot)": _ADDED,
    "original and added by vBLEU (origin pool or parrot), with their weights": f"{_ADDED}, with their weights",
    "original rated above 0, each with weight 1": "the original references rated above 0, each with weight 1",
    "weight > 0, each with weight 1": "the references rated above 0, each with weight 1",
    "weight > 0": "the references rated above 0",
}


def describe_settings(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each measure's settings in a line a reader can check against the paper, the pipeline,
    vectors and encoder by name; their versions and checksums are ``describe_versions``'s."""
    described: list[tuple[str, str]] = []
    language = settings.get("language", "en")  # scores stored before languages existed were English
    if language in LANGUAGES:
        described.append(("language", f"{LANGUAGES[language]['name']} ({language})"))
    for key, label in (("bleu", "BLEU"), ("delta_bleu", "deltaBLEU"), ("vbleu", "vBLEU")):
        bleu = settings.get(key)
        if isinstance(bleu, Mapping):
            # Settings stored before brevity_references existed were scored with every reference
            # setting the reference length of the brevity penalty.
            lengths = {"positive": "the reference length from the original references rated positively",
                       "all": "the reference length from every reference"}.get(
                bleu.get("brevity_references", "all"), "")
            references = _REFERENCE_WORDS.get(str(bleu.get("references", "")), "")
            described.append((label, f"n-grams up to {bleu.get('max_order')}, brevity penalty "
                                     f"'{bleu.get('brevity')}' ({lengths}), "
                                     f"{'weighted' if bleu.get('weighted') else 'unweighted'} references"
                                     f"{f' ({references})' if references else ''}, "
                                     f"tokeniser {bleu.get('tokenize')}"
                                     f"{', lower-cased' if bleu.get('lowercase') else ''}; per-item "
                                     f"smoothing: {bleu.get('per_item_smoothing')}"))
    pos = settings.get("posscore")
    if isinstance(pos, Mapping):
        vectors = pos.get("vectors") or {}
        shape = vectors.get("shape") or ["?", "?"]
        used = _REFERENCE_WORDS.get(str(pos.get("references_used", "")), "")
        described.append(("POSSCORE", f"part-of-speech tags {', '.join(pos.get('tags') or [])}"
                                      f"{f'; references: {used}' if used else ''}"))
        described.append(("tagger", f"spaCy pipeline {pos.get('pipeline')}"))
        if vectors.get("source") == "encoder":  # computed per word (wordvectors.py): no fixed count of words
            described.append(("vectors", f"{vectors.get('name')} ({shape[1]} dimensions, every word)"))
        else:
            described.append(("vectors", f"{vectors.get('name')} ({vectors.get('source')}, {shape[0]} words of "
                                         f"{shape[1]} dimensions)"))
    for key, label in (("bertscore", "BERTScore"), (VBERTSCORE, "vBERTScore")):
        bert = settings.get(key)
        if isinstance(bert, Mapping):
            used = _REFERENCE_WORDS.get(str(bert.get("references_used", "")), str(bert.get("references_used")))
            described.append((label, f"{bert.get('encoder')}, {bert.get('precision')}, layer {bert.get('layer')} "
                                     f"of {bert.get('layers')} ({bert.get('source')}); "
                                     f"baseline b = {float(bert.get('baseline', 0)):.4f} "
                                     f"from {bert.get('baseline_pairs')} shuffled reference pairs; references: "
                                     f"{used}"
                                     + (f"; {bert['references_from']}" if bert.get("references_from") else "")))
    nuggets = settings.get("nuggets")
    if isinstance(nuggets, Mapping) and nuggets.get("scored"):
        measure = {"bleu": "BLEU", "delta_bleu": "deltaBLEU", "posscore": "POSSCORE"}.get(
            str(nuggets.get("measure")), str(nuggets.get("measure")))
        described.append(("nugget scores", f"from {measure} per response; replacements compared: the best "
                                           f"{nuggets.get('K')} of another act, the best {nuggets.get('L')} of "
                                           f"the same act; weights {nuggets.get('w_phi')} (deleting the nugget), "
                                           f"{nuggets.get('w_diff')} (another act), {nuggets.get('w_same')} "
                                           f"(the same act); tags {nuggets.get('tags')}"))
    return described


def describe_versions(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The software versions and checksums the scores were computed with: sacreBLEU, the spaCy
    pipeline, the vector table and the encoder's model file (the first 12 hex digits)."""
    versions: list[tuple[str, str]] = []
    bleu = next((settings[key] for key in ("bleu", "delta_bleu", "vbleu")
                 if isinstance(settings.get(key), Mapping)), None)
    if bleu is not None and bleu.get("sacrebleu"):
        versions.append(("sacreBLEU", str(bleu.get("sacrebleu"))))
    pos = settings.get("posscore")
    if isinstance(pos, Mapping):
        vectors = pos.get("vectors") or {}
        versions.append(("spaCy pipeline", f"{pos.get('pipeline')} {pos.get('pipeline_version')} "
                                           f"({pos.get('pipeline_package')}), spaCy {pos.get('spacy_version')}"))
        versions.append(("vectors", f"sha256 {str(vectors.get('sha256') or vectors.get('file_sha256'))[:12]}…"))
    for key, label in (("bertscore", "BERTScore"), (VBERTSCORE, "vBERTScore")):
        bert = settings.get(key)
        if isinstance(bert, Mapping):
            versions.append((f"{label} encoder", f"sha256 {str(bert.get('model_sha256'))[:12]}…"))
    return versions


def provenance_summary(provenance: Mapping[str, Any]) -> dict[str, Any] | None:
    """A vBLEU extension's figures: the version extended, the pool's checksum, k, the rater and,
    for the automatic rater, its seed and held-out accuracy; None for an uploaded version."""
    extension = provenance.get("vbleu")
    if not isinstance(extension, dict):
        return None
    rater = extension.get("rater", {})
    automatic = rater.get("kind") == "automatic"
    return {"extends": provenance.get("extends"), "pool_sha256": extension.get("pool", {}).get("sha256", ""),
            "k": extension.get("retrieval", {}).get("settings", {}).get("k"), "rater": rater.get("kind"),
            "seed": rater.get("settings", {}).get("seed") if automatic else None,
            "held_out_accuracy": rater.get("held_out_accuracy") if automatic else None}


def describe_provenance(provenance: Mapping[str, Any]) -> str:
    summary = provenance_summary(provenance)
    if summary is None:
        return ""
    automatic = summary["rater"] == "automatic"
    if automatic:
        accuracy = summary["held_out_accuracy"]
        rater = (f"automatic rater, held-out accuracy {accuracy:.4f}, seed {summary['seed']}"
                 if isinstance(accuracy, int | float) else f"automatic rater, seed {summary['seed']}")
    else:
        rater = "human ratings"
    extension = provenance.get("vbleu") or {}
    retriever = ((extension.get("retrieval") or {}).get("settings") or {}).get("retriever", "bm25")
    features = ((extension.get("rater") or {}).get("settings") or {}).get("features", "word-vectors")
    what = "vBLEU references"
    if retriever == "embedding" or features == "encoder":
        # Named only when the encoder took part: a vBLEU version reads as it always did.
        found_by = "sentence embeddings" if retriever == "embedding" else "BM25"
        rated_on = ", rater on encoder features" if features == "encoder" else ""
        name = "vBERTScore" if retriever == "embedding" and (features == "encoder" or not automatic) else "vBLEU"
        what = f"{name} references (retrieved by {found_by}{rated_on})"
    return (f"{what} from v{summary['extends']}: pool {str(summary['pool_sha256'])[:12]}, "
            f"k = {summary['k']}, {rater}")


def format_description(config: ResponseConfig, titles: Mapping[str, str]) -> dict[str, Any]:
    """The run file's format for participants (``Kind.format_description``); ``titles``: each
    measure's title by key, as the task reports them."""
    acts = list(config.acts)
    first = next((act for act in ("Apology", "Opening", "Agreement") if act in acts), acts[0])
    second = next((act for act in ("Recommendation", "User instruction", "Opinion") if act in acts),
                  next((act for act in acts if act != first), first))
    scored_when = {"always": "every response's nuggets are scored (a response without nuggets is split into "
                             "sentences, each scored by how much deleting it changes the response's score)",
                   "auto": "nuggets are scored when your run gives them or the organisers wrote alternatives "
                           "(a response without nuggets is then split into sentences, each scored by how much "
                           "deleting it changes the response's score)",
                   "never": "nuggets are checked but not scored in this task"}[config.nugget_mode]
    return {
        "summary": ("A JSON list with one entry per context of the test data: your system's response to it; "
                    "optionally the response split into nuggets (spans with one dialogue act each), for "
                    "nugget-level feedback."),
        "fields": [
            {"path": "[i].id", "type": "string", "meaning": "the context's id, as in the test data"},
            {"path": "[i].response", "type": "string",
             "meaning": f"the response: a non-empty text of at most {MAX_RESPONSE_CHARS:,} characters"},
            {"path": "[i].nuggets", "type": "list (optional)",
             "meaning": "the response split into nuggets, in order; their texts put together (whitespace "
                        f"aside) must give the response; at most {MAX_NUGGETS_PER_RESPONSE} nuggets"},
            {"path": "[i].nuggets[k].text", "type": "string", "meaning": "the nugget's span of the response"},
            {"path": "[i].nuggets[k].act", "type": "string", "meaning": f"its dialogue act: {', '.join(acts)}"},
            {"path": "[i].nuggets[k].diff", "type": "list of {text, act} (optional)",
             "meaning": "alternatives with other acts (one per act): the nugget's score compares the "
                        "response with these in its place; the organisers' are used when left out"},
            {"path": "[i].nuggets[k].same", "type": "list of strings (optional)",
             "meaning": "rewordings with the same act, compared likewise; the organisers' are used when left out; "
                        f"at most {MAX_ALTERNATIVES_PER_NUGGET} alternatives per nugget, diff and same together"},
        ],
        # In the task's language: an English example on a Chinese task's data page read as a mistake.
        "example": {"id": "<context id>", "response": example_reply(config.language)[0],
                    "nuggets": [{"text": example_reply(config.language)[1], "act": first},
                                {"text": example_reply(config.language)[2], "act": second}]},
        "notes": [
            "Measures: " + "; ".join(f"{key}: {titles[key]}" for key in config.measures)
            + ". Every measure is a similarity: higher is better.",
            f"Language: {LANGUAGES[config.language]['name']}. BLEU-family tokens: sacrebleu's "
            f"{config.bleu.tokenizer} tokeniser"
            + (", lower-cased." if config.bleu.lowercase and config.delta_bleu.lowercase else ".")
            + (f" POSSCORE: spaCy pipeline {config.pipeline}, POS words {', '.join(config.tags)}, vectors: "
               f"{vectors_words(config.pipeline, config.vectors, config.vectors_name)}; "
               "the maximum over the references." if "posscore" in config.measures else ""),
            f"Nugget-level scores NS (Takehi et al. 2023): {scored_when}; measure {config.nugget_measure}, "
            f"K = {config.nuggets.k}, L = {config.nuggets.l}, weights {config.nuggets.w_phi:g}, "
            f"{config.nuggets.w_diff:g}, {config.nuggets.w_same:g}.",
            "Every context needs exactly one response; an id not in the test data, a repeated id or an empty "
            "response is refused, with every problem listed.",
            f"Nugget scores score every variant of a response (without each nugget, with each alternative): "
            f"a run whose variants would hold more than {MAX_NUGGET_WORK:,} characters in all (per response: "
            "its length times 1 + per nugget 1 + its alternatives) is refused at upload.",
        ],
    }
