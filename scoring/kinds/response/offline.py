"""The response kind's part of the offline ``score`` command: ``--vectors TABLE.txt``, a word2vec
table for POSSCORE (and vBLEU's rater) checked and kept as an organiser's upload is.

Reached through ``scoring.kinds.OFFLINE`` by the generic command (``scoring.cli``), which names no
kind itself. Importing this module loads nothing of the kind (spaCy, sacrebleu): only ``configure``
does, when the option is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
from pathlib import Path

from scoring.offline import Invalid

OPTIONS = {"vectors": "--vectors"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vectors", type=Path, default=None, metavar="TABLE.txt",
                        help="response: a word2vec text table of the task's language for POSSCORE (and vBLEU's "
                             "rater), instead of the pipeline's vectors; what a Chinese task (--preset response-zh) "
                             "needs, as an organiser uploads it on the server")


def configure(options: argparse.Namespace, config: object) -> object:
    """The configuration naming the table ``--vectors`` gives: the table is checked (every bad line
    named) and kept under its sha256 in a vector directory, as an organiser's upload is."""
    if options.vectors is None:
        return config
    from scoring.kinds.response.kind import set_vector_directory, store_vector_table
    from scoring.kinds.response.nlp import VectorTableError

    path: Path = options.vectors
    try:
        data = path.read_bytes()
    except OSError as error:
        raise Invalid([f"--vectors: {path}: cannot read: {error.strerror or error}"]) from None
    if not os.environ.get("EVALSERVER_VECTOR_DIR"):
        set_vector_directory(tempfile.mkdtemp(prefix="evalserver-vectors-"))
    try:
        digest, _ = store_vector_table(data, name=path.name)
    except VectorTableError as error:
        raise Invalid([f"--vectors: {path}: {line}" for line in error.problems]) from None
    return dataclasses.replace(config, vectors=digest, vectors_name=path.name)
