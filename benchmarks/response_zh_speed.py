"""A Chinese response run with every measure beside the same run in English (issue 42); a Markdown table.

    .venv/bin/python benchmarks/response_zh_speed.py                 # 1,500 items
    .venv/bin/python benchmarks/response_zh_speed.py --items 300

The Chinese demo's gold and its English translation (``fixtures.response_demo_zh``, the same ids,
choices and weights), each reply made distinct with an order number (the kind tags and encodes
distinct texts once, so repeated replies would flatter it); 3 references per item. Per language,
the preset's measures (Chinese ``response-zh``: BLEU, deltaBLEU, POSSCORE with the encoder's word
vectors, BERTScore; English ``response-bertscore``: the same with en_core_web_md's tags and vectors):
``compile_gold`` (tags the references), then two runs scored in one worker; the first pays for the
references' BERTScore encodings and the rescaling baseline, the second (warm) is what each later
upload costs. Wall and CPU seconds; the load average is printed (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import random
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalserver.settings")


def _distinct(entries: list[dict], rng: random.Random, language: str) -> None:
    for entry in entries:
        for text_holder in [*entry.get("references", []), entry]:
            key = "text" if "text" in text_holder else "response"
            if key in text_holder and isinstance(text_holder[key], str):
                number = rng.randint(100000, 999999)
                tail = f"订单{number}。" if language == "zh" else f" Order {number}."
                text_holder[key] = text_holder[key] + tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--languages", default="zh,en", help="which of zh, en to measure (one process each may "
                                                              "run them side by side)")
    parser.add_argument("--without-bertscore", action="store_true",
                        help="leave BERTScore out (it costs far more than the rest: the encoder's pass per text)")
    args = parser.parse_args()

    from fixtures import response_demo_zh as demo
    from scoring.kinds import get_kind

    kind = get_kind("response")
    print(f"{args.items:,} items, 3 references each; load average at start {os.getloadavg()[0]:.1f}\n")
    print("| language | measures | compile gold (s, CPU s) | first run (s, CPU s) | warm run (s, CPU s) "
          "| warm items/s | warm items per CPU-s |")
    print("|---|---|---:|---:|---:|---:|---:|", flush=True)
    chosen = args.languages.split(",")
    for language, preset in (("zh", "response-zh"), ("en", "response-bertscore")):
        if language not in chosen:
            continue
        scenarios = demo.SCENARIOS if language == "zh" else demo.SCENARIOS_EN
        gold = demo.generate_gold(args.items, seed=args.seed, scenarios=scenarios)
        runs = demo.generate_runs(gold, seed=args.seed)
        rng = random.Random(args.seed)
        _distinct(gold, rng, language)
        for run in runs.values():
            _distinct(run, rng, language)
        config = kind.config(kind.presets[preset])
        if args.without_bertscore:
            kept = tuple(name for name in config.measures if name != "bertscore")
            config = kind.config({**kind.presets[preset], "measures": list(kept), "official": list(kept)})
        kind.warm_up(config)
        figures = []
        started, cpu = time.perf_counter(), time.process_time()
        compiled = kind.compile_gold(gold, config)
        figures.append((time.perf_counter() - started, time.process_time() - cpu))
        print(f"  ({language}: gold compiled: {figures[-1][0]:.1f} s, {figures[-1][1]:.1f} CPU s)", flush=True)
        headlines = {}
        for name in ("medium", "strong"):
            started, cpu = time.perf_counter(), time.process_time()
            scored = kind.score(kind.parse_run(runs[name], compiled, config), compiled, config)
            figures.append((time.perf_counter() - started, time.process_time() - cpu))
            headlines[name] = scored.headlines
            print(f"  ({language}: {name} run scored: {figures[-1][0]:.1f} s, {figures[-1][1]:.1f} CPU s)", flush=True)
        warm, warm_cpu = figures[-1]
        cells = " | ".join(f"{wall:.1f} ({cpu_s:.1f})" for wall, cpu_s in figures)
        print(f"| {language} | {', '.join(config.measures)} | {cells} | {args.items / warm:,.0f} | "
              f"{args.items / warm_cpu:,.0f} |")
        print("|   | strong: " + ", ".join(f"{key} {value:.3f}" for key, value in headlines["strong"].items())
              + " | | | | | |", flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
