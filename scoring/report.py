"""Plain-text rendering of a run of any kind for people (``score --format table``); DQ/ND keeps
its own table in ``scoring.kinds.stc3.report``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scoring.kinds import MeasureSpec, Scored


def format_scored_table(scored: Scored, specs: list[MeasureSpec], item_noun: str = "item", per_item: bool = False,
                        digits: int = 4) -> str:
    """A run of any kind: one line per measure (its figure and direction), then, with ``per_item``,
    one line per item and the kind's per-act means if it has them (the response kind)."""
    shown = [spec for spec in specs if spec.key in scored.headlines]
    lines = [f"{item_noun}s: {scored.n_items}"]
    if scored.n_missing:
        lines.append(f"note: {scored.n_missing} gold {item_noun}(s) missing from the run were left out")
    width = max([len(spec.key) for spec in shown] + [7]) + 2
    lines += ["", "measure".ljust(width) + "value".rjust(digits + 4) + "   run figure   direction"]
    for spec in shown:
        figure = "corpus" if spec.headline == "corpus" else "mean" if spec.headline == "mean" else "whole run"
        lines.append(spec.key.ljust(width) + f"{scored.headlines[spec.key]:.{digits}f}".rjust(digits + 4)
                     + f"   {figure.ljust(10)}   {spec.direction}{'  (official)' if spec.official else ''}")
    if per_item:
        keys = [spec.key for spec in shown]
        lines += ["", f"Per {item_noun}", "\t".join(["id", *keys])]
        for row, item_id in enumerate(scored.item_ids):
            lines.append("\t".join([item_id] + [f"{scored.per_item[key][row]:.6f}" for key in keys]))
        acts = scored.details.get("acts")
        if isinstance(acts, dict) and acts:
            lines += ["", "Mean nugget score (NS) per dialogue act"]
            lines += [f"{act}\t{value:.{digits}f}" for act, value in acts.items()]
    lines += ["", "Measures: " + "; ".join(f"{spec.key} = {spec.title}" for spec in shown)]
    return "\n".join(lines) + "\n"
