"""The metrics track's part of the offline ``score`` command: a gold of several dimensions is
scored per dimension without a configuration naming them.

On the server a task names its dimensions in its configuration, because the board's columns are
made from it before any gold exists; the offline command has no board, so it takes them from the
gold (``MetricConfig.from_gold``). Reached through ``scoring.kinds.OFFLINE`` by the generic
command (``scoring.cli``), which names no kind itself; importing this module loads nothing.
"""

from __future__ import annotations

import argparse
import dataclasses

OPTIONS: dict[str, str] = {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No option of its own."""


def configure(options: argparse.Namespace, config: object) -> object:
    """The configuration that takes the dimensions, levels and languages from the gold."""
    return dataclasses.replace(config, from_gold=True)  # type: ignore[type-var]
