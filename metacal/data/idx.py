"""Reader for the IDX format of (Fashion-)MNIST: 4-byte magic (0, 0, type code, ndim), ndim big-endian
uint32 sizes, then the data in big-endian order. Gzip-compressed files are detected by their magic bytes."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
           0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in an IDX file (raw or .gz), in native byte order."""
    path = Path(path)
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise ValueError(f"{path} is not an IDX file (bad magic number {data[:4].hex()})")
    dtype, ndim = np.dtype(_DTYPES[data[2]]), data[3]
    header = 4 + 4 * ndim
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError(f"{path}: IDX header promises shape {shape} ({expected} bytes) but the file "
                         f"holds {len(data) - header} bytes; the file is truncated or corrupt")
    array = np.frombuffer(data, dtype=dtype, count=int(np.prod(shape)), offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))
