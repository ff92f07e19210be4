"""Nugget scores of the demo task, bit for bit, from this tree and from another revision (issue 24).

Writes the response demo (``fixtures.response_demo``: 60 items, its five runs and two baselines),
scores every file's nugget-level scores with each nugget measure (POSSCORE, BLEU, deltaBLEU) in
this tree and in ``--before`` (a git revision, exported to a temporary folder), each in its own
process, and compares every D_phi, MD_diff, MD_same and NS as ``float.hex``. Exit 1 on any
difference.

    python benchmarks/nugget_equality.py --before 5ce54e8
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _hex(value: object) -> object:
    return float(value).hex() if isinstance(value, float) else value


def dump(folder: Path) -> dict[str, object]:
    """Every nugget score of every demo file and nugget measure (run inside the tree to test)."""
    from fixtures.response_demo import write_demo
    from scoring.kinds import get_kind

    paths = write_demo(folder)
    kind = get_kind("response")
    gold_data = json.loads(paths["gold"].read_bytes())
    out: dict[str, object] = {}
    for measure in ("posscore", "bleu", "delta_bleu"):
        config = kind.config({"measures": [measure], "official": [measure],
                              "nuggets": {"score": "always", "measure": measure}})
        gold = kind.compile_gold(gold_data, config)
        for name, path in sorted(paths.items()):
            if name in ("gold", "test"):
                continue
            scored = kind.score(kind.parse_run(json.loads(path.read_bytes()), gold, config), gold, config)
            out[f"{measure}/{name}"] = {item: [{key: _hex(value) for key, value in nugget.items()} for nugget in turn]
                                        for item, turn in scored.details["nuggets"].items()}
    return out


def _run(tree: Path) -> dict[str, object]:
    code = (f"import sys, json, tempfile, pathlib; sys.path.insert(0, {str(tree)!r}); "
            f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import nugget_equality as n; "
            "print(json.dumps(n.dump(pathlib.Path(tempfile.mkdtemp()))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        before = _run(Path(folder))
    after = _run(ROOT)
    differences = 0
    nuggets = 0
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old != new:
            differences += 1
            print(f"DIFFERENT: {key}")
        nuggets += sum(len(turn) for turn in (new or {}).values())
    print(f"{len(after)} files x measures, {nuggets:,} nugget scores: "
          f"{'bit-identical' if not differences else f'{differences} differ'} to {args.before}")
    return 1 if differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
