"""The response kind's modules after the split (issue 38.1): every public name of the old
``kind.py`` and ``vbleu.py`` is still importable from its old path, and module state has one home
(setting it through the old path changes what the code reads)."""

from __future__ import annotations

from pathlib import Path

from scoring.kinds.response import kind, resources, vbleu
from scoring.kinds.response.vbleu import encodings, extension, pool, rater, retrieval

# The public top-level names of kind.py and vbleu.py before the split, written out.
KIND_NAMES = """BLEU_KEYS VBLEU VBLEU_CITATION VBERTSCORE VBERTSCORE_CITATION PACKAGE_MODEL TOKEN_DTYPE NUGGET_MEASURES
NUGGET_MODES LANGUAGES MAX_SINGLE_TOKEN_SHARE MIN_VECTOR_COVERAGE CJK_TEXT_SHARE KANA_TEXT_SHARE FOREIGN_REFUSE_SHARE
FOREIGN_WARN_SHARE GENERIC_REPLY GOLD_FORMAT MAX_ACTS MAX_ACT_CHARS ConfigInvalid ResponseConfig nugget_reasons
parse_config RESOURCE_SUFFIXES set_vector_directory set_resource_locator set_tagging_processes resource_path
vector_table_path encoder_model_path store_vector_table task_vectors task_tokenizer task_encoder warm_up
CompiledResponseGold ParsedResponseRun TEXT_BLOCK_CHARS text_blocks EXTENSIONS text_language ResponseKind
rows_from_tagged""".split()
VBLEU_NAMES = """MAX_POOL_PAIRS MAX_LINE_BYTES POOL_KEYS BM25_METHODS MIN_RATER_PAIRS MAPPINGS RETRIEVERS RATER_FEATURES
ORIGINS Progress canonical_sha256 Pool read_pool RetrievalSettings Candidate PoolIndex METHODS method_of
SCORE_BLOCK_VALUES EmbeddingIndex build_index SentenceEncoder ENCODINGS_FORMAT ENCODE_CHUNK SENTENCE_PREFIX
default_sentence_encoder pool_texts PoolEncodings encodings_key encode_pool SentenceLookup sentence_lookup RaterSettings
FEATURES ENCODER_FEATURES Rater weights_from_probabilities train_rater CHANCE_LEVEL RaterAtChance chance_p_value
check_rater Extension list_candidates extend_gold settings_from_provenance reproduce""".split()


def test_every_public_name_is_importable_from_the_old_paths():
    assert [name for name in KIND_NAMES if not hasattr(kind, name)] == []
    assert [name for name in VBLEU_NAMES if not hasattr(vbleu, name)] == []
    # The same objects, not copies: one home each.
    assert kind.set_vector_directory is resources.set_vector_directory
    assert vbleu.extend_gold is extension.extend_gold and vbleu.Pool is pool.Pool
    assert vbleu.train_rater is rater.train_rater and vbleu.build_index is retrieval.build_index
    assert vbleu.PoolEncodings is encodings.PoolEncodings


def test_module_state_set_through_the_old_path_is_what_the_code_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "_VECTOR_DIRECTORY", None)
    monkeypatch.setattr(resources, "_RESOURCE_LOCATOR", None)
    kind.set_vector_directory(tmp_path)
    assert resources._VECTOR_DIRECTORY == tmp_path
    assert kind.vector_table_path("ab" * 32) == tmp_path / f"{'ab' * 32}.txt"
    kind.set_resource_locator(lambda what, sha256: Path("/elsewhere") / what / sha256)
    assert kind.encoder_model_path("cd" * 32) == Path("/elsewhere/encoders") / ("cd" * 32)
