"""BLEU and POSSCORE speed per task language (issue 27), through the task-kind interface; a Markdown table.

    .venv/bin/python benchmarks/response_languages_speed.py                # 2,000 items per language
    .venv/bin/python benchmarks/response_languages_speed.py --items 5000

Items are helpdesk replies of the language (English: devtools/dialogues.py; Chinese: the replies of
tests/kinds/response/test_languages.py; Japanese: fixtures/response_demo_ja.py), two or three sentences
put together with an order number so that almost every text is distinct (the kind tags distinct
texts once), 3 references per item. Per language and measure, a configuration with that measure
alone (presets response, response-zh with an uploaded table, response-ja): ``compile_gold``, then
two runs scored in the same worker; the second (warm) is timed: tokenisation or tagging of the run's
responses, statistics and scores. Targets (issue 27) are for English: BLEU >= 5,000 and POSSCORE
>= 1,000 items/s; Chinese and Japanese figures are reported. The load average is printed, and the
throughput per CPU second of this process, which other load on a shared machine changes far less.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalserver.settings")


def sentences(language: str) -> list[str]:
    if language == "en":
        from devtools.dialogues import dialogues

        return sorted({reply for dialogue in dialogues(400, seed=9) for sender, reply in dialogue.turns
                       if sender == "agent"})
    if language == "zh":
        from devtools.chinese import ZH

        return [reply for replies in ZH.values() for reply in replies]
    from fixtures.response_demo_ja import SCENARIOS

    return [reply for _, replies in SCENARIOS.values() for reply in replies]


def text(rng: random.Random, pool: list[str], language: str) -> str:
    parts = rng.sample(pool, rng.randint(2, 3))
    number = rng.randint(100000, 999999)
    tail = f" Order {number}." if language == "en" else f"订单{number}。" if language == "zh" else f"注文番号{number}。"
    return (" " if language == "en" else "").join(parts) + tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    from devtools.chinese import zh_vectors, zh_words
    from scoring.kinds import get_kind
    from scoring.kinds.response.kind import set_vector_directory, store_vector_table

    kind = get_kind("response")
    set_vector_directory(tempfile.mkdtemp(prefix="bench-vectors-"))
    digest, _ = store_vector_table(zh_vectors(zh_words()), name="zh-bench")
    presets = {"en": dict(kind.presets["response"]), "zh": {**kind.presets["response-zh"],
                                                            "vectors": {"sha256": digest, "name": "zh-bench"}},
               "ja": dict(kind.presets["response-ja"])}
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.items:,} items, 3 references each")
    print()
    print("| language | tokeniser / pipeline | measure | compile gold (s) | warm run (s) | items/s | "
          "items per CPU second |")
    print("|---|---|---|---|---|---|---|")
    for language, preset in presets.items():
        rng = random.Random(args.seed)
        pool = sentences(language)
        gold = [{"id": f"i{k}", "context": [{"sender": "user", "text": "?"}],
                 "references": [{"text": text(rng, pool, language), "weight": weight} for weight in (1.0, 0.6, -0.4)]}
                for k in range(args.items)]
        runs = [[{"id": f"i{k}", "response": text(rng, pool, language)} for k in range(args.items)] for _ in range(2)]
        for measure in ("bleu", "posscore"):
            config = kind.config({**preset, "measures": [measure], "official": [measure],
                                  "nuggets": {**preset["nuggets"], "score": "never"}})
            started = time.perf_counter()
            compiled = kind.compile_gold(gold, config)
            compile_seconds = time.perf_counter() - started
            kind.score(kind.parse_run(runs[0], compiled, config), compiled, config)
            started, cpu = time.perf_counter(), time.process_time()
            kind.score(kind.parse_run(runs[1], compiled, config), compiled, config)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            how = config.bleu.tokenizer if measure == "bleu" else config.pipeline
            print(f"| {language} | {how} | {measure} | {compile_seconds:.1f} | {seconds:.2f} | "
                  f"{args.items / seconds:,.0f} | {args.items / cpu:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
