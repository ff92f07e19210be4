"""The response kind's compiled gold (references tagged once, stored as a deterministic ``.npz``),
a parsed run, and the checks that refuse a gold the task's language or pipeline cannot serve."""

from __future__ import annotations

import io
import json
import re
import threading
import zipfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scoring.kinds.response import bertscore as bertscore_module
from scoring.kinds.response import bleu as bleu_module
from scoring.kinds.response import encodings
from scoring.kinds.response.config import LANGUAGES, ResponseConfig
from scoring.kinds.response.encoder import DEFAULT_PREFIX, E5Encoder
from scoring.kinds.response.formats import (
    ResponseGold,
    ResponseRun,
)
from scoring.kinds.response.languages import MAIN as MAIN_LANGUAGES
from scoring.kinds.response.languages import script_class
from scoring.kinds.response.nlp import (
    VectorTable,
    load_pipeline,
    pipeline_provenance,
)
from scoring.kinds.response.posscore import (
    PosEncoder,
    PreparedReferences,
    TaggedTexts,
    rows_from_tagged,
)
from scoring.kinds.response.resources import _checksum, _shared_get, _shared_put, _tagging_key

# Token vectors are kept as float16 (half the memory of a large extended gold; cosines are computed
# in float64 from them), responses too, so that a response equal to a reference scores exactly 1.
TOKEN_DTYPE = np.float16
# A gold the pipeline cannot serve is refused (RESPONSE-SPEC.md): most reference texts one BLEU
# token (a Chinese gold under 13a), or fewer than half of the reference tokens with a vector.
MAX_SINGLE_TOKEN_SHARE = 0.5
MIN_VECTOR_COVERAGE = 0.5
# The script of a reference text (docs/response.md, "The gold's script", has the measurements): its
# units are Chinese characters, kana and Latin words (URLs and e-mail addresses left out); it is
# written in Chinese characters (CJK) when they and kana are at least CJK_TEXT_SHARE of its units, and
# is Japanese when kana are at least KANA_TEXT_SHARE of those. More than FOREIGN_REFUSE_SHARE of the
# classified reference texts in another language than the task's refuses the gold; at least
# FOREIGN_WARN_SHARE warns.
CJK_TEXT_SHARE = 0.5
KANA_TEXT_SHARE = 0.1
FOREIGN_REFUSE_SHARE = 0.5
FOREIGN_WARN_SHARE = 0.1
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
_KANA = re.compile("[\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
_LATIN_WORD = re.compile("[A-Za-z\u00c0-\u024f\uff21-\uff3a\uff41-\uff5a]+")
# ASCII only: Chinese and Japanese put no space after a link, so \S+ would swallow the sentence.
_URL_OR_MAIL = re.compile(r"(?:https?://|www\.)[!-~]+|[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}", re.IGNORECASE)
GOLD_FORMAT = "evalserver-response-gold/1"


def _squash(text: str) -> str:
    return "".join(text.split())


@dataclass
class CompiledResponseGold:
    """A validated gold version with its references' tags (POSSCORE), ready to score runs.

    ``tagged`` holds the kept tokens and tags of every reference POSSCORE uses (weight > 0), item i's
    being texts ``tagged_items[i]:tagged_items[i + 1]``; ``tagging`` says which pipeline made them.
    What scoring prepares from it (BLEU n-gram tables, POSSCORE reference vectors) is cached on the
    object, per configuration.
    """

    gold: ResponseGold
    warnings: list[str] = field(default_factory=list)
    tagged: TaggedTexts | None = None
    tagged_items: np.ndarray | None = None
    tagging: dict[str, Any] | None = None
    # How the added references were found: "embedding" when the gold's added references record a
    # cosine (vBERTScore's extension, scoring.kinds.response.vbleu); None for BM25 (vBLEU's).
    retrieval: str | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def item_ids(self) -> list[str]:
        return self.gold.ids

    def __len__(self) -> int:
        return len(self.gold)

    @property
    def has_alternatives(self) -> bool:
        return any(self.gold.alternatives)

    def posscore_texts(self) -> tuple[list[str], np.ndarray]:
        """The reference texts POSSCORE compares with (weight > 0) and each item's first one."""
        texts: list[str] = []
        offsets = [0]
        for references in self.gold.references:
            texts += [text for text, weight in references if weight > 0]
            offsets.append(len(texts))
        return texts, np.array(offsets, dtype=np.int64)

    def tag(self, encoder: PosEncoder, pipeline: str) -> None:
        texts, offsets = self.posscore_texts()
        tagging = {"source": pipeline, **pipeline_provenance(load_pipeline(pipeline))}
        key = ("tags", _tagging_key(tagging), _checksum([texts, offsets.tolist()]))
        # The same texts tagged by the same pipeline before in this process (the version a vBLEU
        # version extends): the same tags, without spaCy.
        tagged = _shared_get(key)
        self.tagged = tagged if tagged is not None else encoder.tag(texts)
        self.tagged_items = offsets
        self.tagging = tagging
        _shared_put(key, self.tagged)

    def share_tags(self) -> None:
        """Offer this gold's stored tags to the next gold compiled with the same reference texts."""
        if self.tagged is not None and self.tagging is not None:
            texts, offsets = self.posscore_texts()
            if np.array_equal(offsets, self.tagged_items):
                _shared_put(("tags", _tagging_key(self.tagging), _checksum([texts, offsets.tolist()])), self.tagged)

    def bleu_references(self, options: bleu_module.BleuConfig) -> bleu_module.PreparedReferences:
        """The original references, prepared for a BLEU-family measure."""
        key = ("bleu", options)
        with self._lock:
            if key not in self._cache:
                shared = ("bleu", options, _checksum(self.gold.references))
                prepared = _shared_get(shared)
                if prepared is None:
                    prepared = bleu_module.prepare_references(self.gold.references, options)
                _shared_put(shared, prepared)
                self._cache[key] = prepared
            return self._cache[key]

    @property
    def has_extended(self) -> bool:
        """Whether the gold holds references vBLEU added (then runs are scored with ``vbleu`` too)."""
        return self.gold.has_extended

    def vbleu_references(self, options: bleu_module.BleuConfig) -> bleu_module.PreparedReferences:
        """The original and the added references with their weights, prepared for vBLEU."""
        key = ("vbleu", options)
        with self._lock:
            if key not in self._cache:
                # The added references are scored but never set rho (RESPONSE-SPEC.md).
                self._cache[key] = bleu_module.prepare_references(self.gold.references, options,
                                                                  added=self.gold.extended)
            return self._cache[key]

    def bert_texts(self) -> list[str]:
        """Every distinct text BERTScore (the original references rated above 0) and, on a gold vBLEU
        extended, vBERTScore (every original and added reference) compare with, in gold order."""
        texts = [text for references in self.gold.references for text, weight in references if weight > 0]
        if self.gold.has_extended:
            texts += [text for references in self.gold.references for text, _ in references]
            texts += [text for added in self.gold.extended for text, _, _ in added]
        return list(dict.fromkeys(texts))

    def bert_vectors(self, encoder: E5Encoder, layer: int) -> dict[str, np.ndarray]:
        """``bert_texts``' token vectors (float16), encoded once per gold version: kept in this
        object, and in the encoding store (``encodings``) for processes that load this gold later."""
        key = ("bert_texts", encoder.sha256, layer)
        if key not in self._cache:
            texts = self.bert_texts()
            vectors = encodings.encoded_texts(texts, encoder.sha256, layer, DEFAULT_PREFIX, encoder.hidden,
                                              lambda batch: encoder.encode(batch, layer, DEFAULT_PREFIX))
            self._cache[key] = dict(zip(texts, vectors))
        return self._cache[key]

    def bert_references(self, encoder: E5Encoder, layer: int, *, weighted: bool
                        ) -> tuple[bertscore_module.PreparedBertReferences, float, int]:
        """BERTScore's references (``weighted=False``: the original ones rated above 0, weight 1) or
        vBERTScore's (the original and the added ones with their weights), each text encoded once per
        gold version (``bert_vectors``), and the baseline b with the number of shuffled pairs behind it
        (the first positive reference of each item against another item's: texts of the task's language)."""
        key = ("bertscore", encoder.sha256, layer, weighted)
        if weighted and not self.has_extended:
            raise ValueError("vBERTScore's references are those of a gold vBLEU extended; this gold has none added")
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            known = self.bert_vectors(encoder, layer)
            references = [list(original) + [(text, weight) for text, weight, _ in added]
                          for original, added in zip(self.gold.references,
                                                     self.gold.extended or [[] for _ in self.gold.references])]
            chosen = [[(text, weight if weighted else 1.0) for text, weight in item if weighted or weight > 0]
                      for item in (references if weighted else self.gold.references)]
            prepared = bertscore_module.prepare_references(
                [known[text] for item in chosen for text, _ in item], [w for item in chosen for _, w in item],
                [len(item) for item in chosen], dtype=TOKEN_DTYPE)
            first = [known[next(text for text, weight in item if weight > 0)] for item in self.gold.references]
            b, pairs = bertscore_module.baseline(first)
            self._cache[key] = (prepared, b, pairs)
            return self._cache[key]

    def source_entries(self) -> list[dict[str, Any]]:
        """The gold as a JSON list of ``{"id", "context", "references"}`` (original references only),
        the input ``vbleu.extend_gold`` takes, the same for the same gold. Nugget alternatives are left
        out (the compiled gold keeps their texts but not the acts of ``diff``), so a caller that must
        not lose them checks ``has_alternatives`` first and asks for the gold file instead."""
        return [{"id": item_id, "context": [dict(utterance) for utterance in context],
                 "references": [{"text": text, "weight": weight} for text, weight in references]}
                for item_id, context, references in zip(self.gold.ids, self.gold.contexts, self.gold.references)]

    def posscore_references(self, config: ResponseConfig, encoder: PosEncoder, table: VectorTable
                            ) -> tuple[PreparedReferences, dict[str, Any], list[str]]:
        """The references' POSSCORE arrays in the task's vectors and tags, how they were tagged, and
        a warning when they had to be tagged now (a gold compiled for another pipeline or without
        POSSCORE)."""
        key = ("posscore", config.pipeline, config.tags, table.checksum, table.file_checksum, table.attribute)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            warnings: list[str] = []
            tagged, tagged_items, tagging = self.tagged, self.tagged_items, self.tagging
            current = {"source": config.pipeline, **pipeline_provenance(load_pipeline(config.pipeline))}
            same_pipeline = tagging is not None and all(
                tagging.get(name) == current[name] for name in ("source", "pipeline", "pipeline_version"))
            if tagged is None or not same_pipeline:
                retag_key = ("tagged", config.pipeline)
                if retag_key not in self._cache:
                    texts, offsets = self.posscore_texts()
                    self._cache[retag_key] = (encoder.tag(texts), offsets)
                tagged, tagged_items = self._cache[retag_key]
                tagging = current
                before = ("without POSSCORE" if self.tagged is None or self.tagging is None else
                          f"with pipeline {self.tagging.get('pipeline')} {self.tagging.get('pipeline_version')}")
                warnings.append(f"the references were tagged while scoring (the gold was compiled {before}): "
                                "compile the gold again with this configuration to tag them once")
            rows = rows_from_tagged(tagged, table, config.tags)
            prepared = PreparedReferences.from_rows(rows, tagged_items)
            self._cache[key] = (prepared, tagging, warnings)
            return self._cache[key]

    # Bytes: a deterministic zip of .npy members (numpy's own format, read with allow_pickle=False).
    def to_bytes(self) -> bytes:
        gold = self.gold
        header = {
            "format": GOLD_FORMAT,
            "ids": gold.ids,
            "references": [[[text, weight] for text, weight in references] for references in gold.references],
            "contexts": gold.contexts,
            "alternatives": [[[act, key, list(diff), list(same)] for (act, key), (diff, same) in alternatives.items()]
                             for alternatives in gold.alternatives],
            "acts": list(gold.acts),
            "warnings": self.warnings,
            "tagging": None if self.tagged is None else {**(self.tagging or {}), "words": self.tagged.words,
                                                         "tag_names": self.tagged.tag_names},
        }
        if gold.extended:
            # Only a gold with vBLEU references has the key: any other compiles to the bytes it always did.
            header["extended"] = [[[text, weight, origin] for text, weight, origin in added]
                                  for added in gold.extended]
        if self.retrieval is not None:
            header["retrieval"] = self.retrieval  # likewise: a BM25-extended gold compiles as it did
        arrays = {"header": np.frombuffer(json.dumps(header, ensure_ascii=False, allow_nan=False).encode(), np.uint8)}
        if self.tagged is not None:
            arrays.update(word=self.tagged.word.astype(np.int32), tag=self.tagged.tag.astype(np.uint8),
                          text_offsets=self.tagged.offsets.astype(np.int64),
                          item_offsets=np.asarray(self.tagged_items, dtype=np.int64))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, array in arrays.items():
                member = io.BytesIO()
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, member.getvalue())
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> CompiledResponseGold:
        try:
            with zipfile.ZipFile(io.BytesIO(blob)) as archive:
                arrays = {name[:-4]: np.lib.format.read_array(io.BytesIO(archive.read(name)), allow_pickle=False)
                          for name in archive.namelist()}
            header = json.loads(arrays["header"].tobytes().decode())
        except (zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
            raise ValueError(f"not a compiled response gold: {error}") from None
        if header.get("format") != GOLD_FORMAT:
            raise ValueError(f"not a compiled response gold of format {GOLD_FORMAT}: {header.get('format')!r}")
        gold = ResponseGold(
            ids=header["ids"],
            references=[[(text, float(weight)) for text, weight in references] for references in header["references"]],
            contexts=header["contexts"],
            alternatives=[{(act, key): (tuple(diff), tuple(same)) for act, key, diff, same in alternatives}
                          for alternatives in header["alternatives"]],
            acts=tuple(header["acts"]),
            extended=[[(text, float(weight), origin) for text, weight, origin in added]
                      for added in header.get("extended", [])],
        )
        compiled = cls(gold, warnings=list(header["warnings"]), retrieval=header.get("retrieval"))
        tagging = header.get("tagging")
        if tagging is not None:
            words, tag_names = tagging.pop("words"), tagging.pop("tag_names")
            compiled.tagged = TaggedTexts(words, arrays["word"], tag_names, arrays["tag"], arrays["text_offsets"])
            compiled.tagged_items = arrays["item_offsets"]
            compiled.tagging = tagging
        return compiled


@dataclass
class ParsedResponseRun:
    """A validated run with what ``score`` needs: the responses (gold order), warnings, n_missing."""

    run: ResponseRun
    warnings: list[str] = field(default_factory=list)
    n_missing: int = 0
    _encoded: dict = field(default_factory=dict, repr=False, compare=False)

    def token_vectors(self, encoder: E5Encoder, layer: int, positions: np.ndarray,
                      known: Mapping[str, np.ndarray] | None = None) -> list[np.ndarray]:
        """The responses' token vectors at ``positions``: every response encoded once per run and layer.

        A response that is the text of a reference takes that reference's vectors (``known``: the gold's,
        same encoder, layer and prefix) instead of being encoded again, which saves the encoding; the
        bits are the same either way, since the encoder never pads a text into a batch (padded, a text
        had other last bits, and a reply copied from its reference scored 1 - 1e-9)."""
        key = (encoder.sha256, layer)
        if key not in self._encoded:
            known = known or {}
            new = [text for text in dict.fromkeys(self.run.responses) if text not in known]
            encoded = dict(zip(new, (vectors.astype(TOKEN_DTYPE) for vectors in
                                     bertscore_module.encode_distinct(encoder, new, layer))))
            self._encoded[key] = [known[text] if text in known else encoded[text] for text in self.run.responses]
        vectors = self._encoded[key]
        return [vectors[position] for position in positions]

    @property
    def items(self) -> np.ndarray:
        return np.asarray(self.run.items, dtype=np.int64)


def _choose_language(config: ResponseConfig) -> str:
    others = [f'"{code}" ({spec["name"]}; preset response-{code})' if code != "en" else f'"en" ({spec["name"]}; '
              'preset response)' for code, spec in MAIN_LANGUAGES.items() if code != config.language]
    return f"set the task's \"language\" to the gold's: {' or '.join(others)}"


# Which extension added a gold's references, in a reader's words (vbertscore's settings say it).
EXTENSIONS = {
    "bm25": "vBLEU's extension: pool pairs retrieved by BM25 over the utterances (Tsuta et al. 2023, section 4)",
    "embedding": "vBERTScore's extension: pool pairs retrieved by the cosine of multilingual-e5-small sentence "
                 "vectors of the utterances (Tsuta et al. 2023, section 4.3)",
}


def _retrieval_of(data: object) -> str | None:
    """"embedding" when an added reference of the gold file records the cosine that retrieved it."""
    for entry in data if isinstance(data, list) else ():
        for reference in entry.get("references", ()) if isinstance(entry, dict) else ():
            if isinstance(reference, dict) and reference.get("origin") == "pool" and "cosine" in reference:
                return "embedding"
    return None


def text_language(text: str) -> str | None:
    """The language a text's script points to: "zh" (Chinese characters, no or few kana), "ja"
    (Chinese characters with kana), "en" (Latin words), or None (no letters: digits, punctuation,
    emoji, a URL alone). Latin words count as one unit each, like a Chinese character, since either
    is about one word's worth of meaning; URLs and e-mail addresses are left out (a Chinese reply with
    a link is still Chinese)."""
    text = _URL_OR_MAIL.sub(" ", text)
    han, kana, latin = len(_HAN.findall(text)), len(_KANA.findall(text)), len(_LATIN_WORD.findall(text))
    cjk = han + kana
    if not cjk + latin:
        return None
    if cjk < CJK_TEXT_SHARE * (cjk + latin):
        return "en"
    return "ja" if kana >= KANA_TEXT_SHARE * cjk else "zh"


def _script_problems(gold: ResponseGold, config: ResponseConfig) -> tuple[list[str], list[str]]:
    """Problems and warnings about reference texts written in another script than the task's
    language: a Chinese gold under the English preset was scored silently (8.3 13a tokens a
    reference against 49.3 under zh, yet only 5.7% of STC-3's Chinese references a single token)."""
    texts = [text for references in gold.references for text, _ in references]
    counts = Counter(language for language in map(text_language, texts) if language is not None)
    classified = sum(counts.values())
    # A language of another script (Korean, Thai, Russian...) is in none of the three classes: its
    # texts are those left unclassified, and every text counts towards the shares.
    own = script_class(config.language)
    if own is None:
        classified = len(texts)
    foreign = sum(counts.values()) - (counts[own] if own is not None else 0)
    if not foreign:
        return [], []
    task = LANGUAGES[config.language]["name"]
    language, most = max(((code, n) for code, n in counts.items() if code != own), key=lambda c: c[1])
    preset = "response" if language == "en" else f"response-{language}"
    looks = ", ".join(f"{counts[code]:,} {LANGUAGES[code]['name']}" for code in MAIN_LANGUAGES
                      if code != own and counts[code])
    sentence = (f"references: {foreign:,} of the {classified:,} reference texts with letters are written in "
                f"another script than the task's language, {task} ({looks}: Chinese characters without kana "
                "count as Chinese, with kana as Japanese, Latin words as English)")
    if foreign > FOREIGN_REFUSE_SHARE * classified:
        return [f"{sentence}, so its tokeniser and tagger would score them silently wrong: set the task's "
                f"\"language\" to \"{language}\" ({LANGUAGES[language]['name']}; preset {preset})"], []
    if foreign >= FOREIGN_WARN_SHARE * classified:
        return [], [f"{sentence}: they are scored with the {task} tokeniser and tagger; if the gold is "
                    f"{LANGUAGES[language]['name']}, set the task's \"language\" to \"{language}\" (preset {preset})"]
    return [], []


def _single_token_problems(gold: ResponseGold, config: ResponseConfig) -> list[str]:
    """A gold whose reference texts are mostly one BLEU token cannot be scored meaningfully: a
    language written without spaces under 13a (Chinese STC-3 replies were 8.2 tokens each under
    13a against 49.4 under zh, and many a single one)."""
    options = config.bleu
    texts = [text for references in gold.references for text, _ in references]
    single = sum(1 for text in texts if len(bleu_module.tokenize(text, options.lowercase, options.tokenizer)) <= 1)
    if not texts or single <= MAX_SINGLE_TOKEN_SHARE * len(texts):
        return []
    return [f"references: {single:,} of the {len(texts):,} reference texts are a single token under sacrebleu's "
            f"{options.tokenizer} tokeniser ({LANGUAGES[config.language]['name']}), so BLEU could only match whole "
            f"replies; a language written without spaces needs its own tokeniser: {_choose_language(config)}"]


def _coverage_problems(compiled: CompiledResponseGold, config: ResponseConfig, table: VectorTable) -> list[str]:
    """POSSCORE compares mean word vectors: with fewer than half of the reference tokens in the
    vector table it would compare next to nothing (a reply identical to its reference scored 0 in
    96% of Chinese items with the English pipeline)."""
    tagged = compiled.tagged
    if tagged is None or not len(tagged.word):
        return []
    found = table.lookup_words(tagged.words)[0][tagged.word] >= 0
    coverage = float(found.mean())
    if coverage >= MIN_VECTOR_COVERAGE:
        return []
    vectors = "the pipeline's vectors" if config.vectors == "pipeline" else \
        f"the uploaded table {config.vectors_name or config.vectors[:12]}"
    return [f"references: only {coverage:.1%} of the {len(found):,} reference tokens POSSCORE compares have a vector "
            f"in {vectors} ({table.name}, pipeline {config.pipeline}, language "
            f"{LANGUAGES[config.language]['name']}); POSSCORE needs at least {MIN_VECTOR_COVERAGE:.0%}: upload "
            f"vectors of the gold's language (manage.py load_vectors) or {_choose_language(config)}"]
