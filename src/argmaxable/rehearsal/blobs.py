"""Files whose bytes are made on request, in the formats released models ship in.

A replica of a released model holds GBs of seeded random weights at the model's true shape, so no replica is
written to disk: every file is a :class:`Blob`, a size and a function from a byte range to its bytes, and a server
(:mod:`argmaxable.rehearsal.server`) answers each HTTP ``Range`` from it. The formats are built here byte by byte
from their specifications, and the tests read each back with the format's own reader (safetensors, torch.load,
numpy.load, zipfile):

- :class:`Array`: a tensor's raw bytes (float32, float16, bfloat16; zeros, or seeded Gaussian values made in
  fixed chunks so that any range is made alone, with planted rows written over them);
- :func:`safetensors_blob`: the 8-byte header length, the JSON header, the tensors back to back;
- :func:`zip_blob` (members stored, as numpy and torch write them; CRC-32 of each member computed once):
  :func:`npz_blob` (``.npy`` members) and :func:`torch_zip_blob` (``torch.save`` since torch 1.6: ``data.pkl``
  and one record per storage, aligned to 64 bytes);
- :func:`torch_legacy_blob`: ``torch.save`` before torch 1.6 (the OPUS-MT conversions of 2020): five pickles,
  then each storage's element count and bytes.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import pickle
import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

CHUNK = 1 << 18  # elements made at once by a seeded generator: any byte range costs at most two extra chunks
DTYPES = {"float32": ("F32", 4), "float16": ("F16", 2), "bfloat16": ("BF16", 2)}  # name -> safetensors code, size


class Blob:
    """A file's bytes, made on request: ``size`` and ``read(offset, length)``."""

    size: int

    def read(self, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def chunks(self, block: int = 1 << 22):
        """The whole file, ``block`` bytes at a time."""
        for start in range(0, self.size, block):
            yield self.read(start, min(block, self.size - start))


class Bytes(Blob):
    """Bytes held in memory (headers, small files)."""

    def __init__(self, data: bytes):
        self.data, self.size = bytes(data), len(data)

    def read(self, offset: int, length: int) -> bytes:
        return self.data[offset:offset + length]


class Concat(Blob):
    """Blobs back to back."""

    def __init__(self, parts: Sequence[Blob]):
        self.parts = [p for p in parts if p.size]
        self.starts = np.cumsum([0, *(p.size for p in self.parts)]).tolist()
        self.size = self.starts[-1]

    def read(self, offset: int, length: int) -> bytes:
        end, out = min(offset + length, self.size), []
        i = bisect.bisect_right(self.starts, offset) - 1
        while offset < end:
            part, start = self.parts[i], self.starts[i]
            take = min(end, start + part.size) - offset
            out.append(part.read(offset - start, take))
            offset += take
            i += 1
        return b"".join(out)


def _bfloat16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even), as their 16-bit patterns."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def encode(values: np.ndarray, dtype: str) -> bytes:
    """float values as the bytes a tensor of ``dtype`` stores (little-endian)."""
    if dtype == "bfloat16":
        return _bfloat16(values).astype("<u2").tobytes()
    return values.astype(np.dtype(dtype).newbyteorder("<")).tobytes()


def decode(data: bytes, dtype: str) -> np.ndarray:
    """The float32 values of a tensor's bytes (the inverse of :func:`encode`)."""
    if dtype == "bfloat16":
        return (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(data, np.dtype(dtype).newbyteorder("<")).astype(np.float32)


@dataclass(frozen=True, eq=False)
class Array(Blob):
    """A tensor's raw bytes: zeros, or N(0, scale²) values from ``seed`` made CHUNK elements at a time (the same
    chunk always gives the same values), with ``patches`` (flat element offset -> values) written over them."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    seed: int | None = None  # None: zeros
    scale: float = 1.0
    patches: Mapping[int, np.ndarray] = field(default_factory=dict)

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][1]

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def size(self) -> int:  # type: ignore[override]
        return self.numel * self.itemsize

    def values(self, start: int, stop: int) -> np.ndarray:
        """Elements ``start:stop`` (flat, row-major) as float32, planted rows included."""
        if self.seed is None:
            out = np.zeros(stop - start, np.float32)
        else:
            first, last = start // CHUNK, (stop - 1) // CHUNK if stop > start else start // CHUNK - 1
            parts = [np.random.default_rng([self.seed, c]).standard_normal(CHUNK, np.float32)
                     for c in range(first, last + 1)]
            whole = np.concatenate(parts) if parts else np.zeros(0, np.float32)
            out = whole[start - first * CHUNK:stop - first * CHUNK] * np.float32(self.scale)
        for at, value in self.patches.items():
            flat = np.asarray(value, np.float32).reshape(-1)
            lo, hi = max(start, at), min(stop, at + flat.size)
            if lo < hi:
                out[lo - start:hi - start] = flat[lo - at:hi - at]
        return out

    @property
    def key(self) -> str:
        """What identifies the values (for caches of their hashes and CRCs)."""
        patches = hashlib.sha1(b"".join(np.asarray(v, np.float32).tobytes() for _, v in sorted(self.patches.items())))
        return f"{self.shape}:{self.dtype}:{self.seed}:{self.scale}:{sorted(self.patches)}:{patches.hexdigest()}"

    def row(self, i: int) -> np.ndarray:
        """Row ``i`` as float32 (as stored: rounded to the array's dtype)."""
        width = self.numel // self.shape[0]
        return decode(encode(self.values(i * width, (i + 1) * width), self.dtype), self.dtype)

    def read(self, offset: int, length: int) -> bytes:
        end = min(offset + length, self.size)
        if offset >= end:
            return b""
        if self.seed is None and not self.patches:
            return bytes(end - offset)
        first, last = offset // self.itemsize, -(-end // self.itemsize)
        data = encode(self.values(first, last), self.dtype)
        return data[offset - first * self.itemsize:end - first * self.itemsize]


def safetensors_blob(tensors: Sequence[tuple[str, Array]], metadata: Mapping[str, str] | None = None) -> Blob:
    """A .safetensors file: u64 header length, the JSON header (padded with spaces to 8 bytes), the data."""
    header: dict = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    for name, array in tensors:
        header[name] = {"dtype": DTYPES[array.dtype][0], "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.size]}
        offset += array.size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return Concat([Bytes(struct.pack("<Q", len(text)) + text), *(a for _, a in tensors)])


# ------------------------------------------------------------------------------------------------ zip


def _crc(blob: Blob) -> int:
    crc = 0
    for block in blob.chunks():
        crc = zlib.crc32(block, crc)
    return crc


class Lazy(Blob):
    """A blob whose parts are laid out on first use (a zip needs its members' CRC-32 before its first byte)."""

    def __init__(self, size: int, build: Callable[[], Blob]):
        self.size, self._build, self._blob, self._lock = size, build, None, threading.Lock()

    @property
    def blob(self) -> Blob:
        with self._lock:  # built once, however many readers ask at once
            if self._blob is None:
                self._blob = self._build()
                assert self._blob.size == self.size, (self._blob.size, self.size)
        return self._blob

    def read(self, offset: int, length: int) -> bytes:
        return self.blob.read(offset, length)


def _content_key(blob: Blob) -> str | None:
    """A key naming a blob's content when it is made from a seed (an Array, or bytes before one), else None."""
    if isinstance(blob, Array):
        return blob.key
    if isinstance(blob, Concat) and any(isinstance(p, Array) for p in blob.parts):
        return "+".join(p.key if isinstance(p, Array) else hashlib.sha1(p.read(0, p.size)).hexdigest()
                        for p in blob.parts)
    return None


def zip_blob(members: Sequence[tuple[str, Blob]], align: int = 0, crcs: dict | None = None) -> Blob:
    """A zip archive of ``members`` stored uncompressed (as ``numpy.savez`` and ``torch.save`` write them), each
    member's data aligned to ``align`` bytes by padding its local header's extra field (torch's ``FB`` field).
    CRC-32s are computed on first read (``crcs``: a dict that keeps those of generated members across blobs)."""
    names = [name.encode() for name, _ in members]

    def extra(offset: int, name: bytes) -> bytes:
        if not align:
            return b""
        pad = -(offset + 30 + len(name) + 4) % align
        return b"FB" + struct.pack("<H", pad) + b"\0" * pad

    offsets, offset = [], 0
    for name, (_, data) in zip(names, members, strict=True):
        offsets.append(offset)
        offset += 30 + len(name) + len(extra(offset, name)) + data.size
    central = sum(46 + len(n) for n in names)
    size = offset + central + 22
    if size >= 1 << 32:
        raise ValueError(f"zip of {size} bytes needs zip64, which replicas do not write")

    def build() -> Blob:
        parts: list[Blob] = []
        records = []
        for name, (_, data), at in zip(names, members, offsets, strict=True):
            cache_key = _content_key(data)
            crc = crcs.get(cache_key) if crcs is not None and cache_key else None
            if crc is None:
                crc = _crc(data)
                if crcs is not None and cache_key:
                    crcs[cache_key] = crc
            ext = extra(at, name)
            local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, data.size, data.size, len(name),
                                len(ext))
            parts += [Bytes(local + name + ext), data]
            records.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0x21, crc, data.size,
                                       data.size, len(name), 0, 0, 0, 0, 0, at) + name)
        directory = b"".join(records)
        end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(records), len(records), len(directory), offset, 0)
        return Concat([*parts, Bytes(directory + end)])

    return Lazy(size, build)


def npy_header(shape: tuple[int, ...], dtype: str) -> bytes:
    """The ``.npy`` header of a C-ordered array (format 1.0)."""
    descr = np.lib.format.dtype_to_descr(np.dtype(dtype).newbyteorder("<"))
    text = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)}).encode()
    pad = -(10 + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def npz_blob(arrays: Sequence[tuple[str, Array]], crcs: dict | None = None) -> Blob:
    """A ``numpy.savez`` archive: one stored ``<key>.npy`` member per array (float32/float16, or bytes as uint8)."""
    members = []
    for key, array in arrays:
        dtype = "uint8" if array.dtype == "uint8" else array.dtype
        members.append((f"{key}.npy", Concat([Bytes(npy_header(array.shape, dtype)), array])))
    return zip_blob(members, crcs=crcs)


@dataclass(frozen=True, eq=False)
class RawBytes(Blob):
    """Bytes of a uint8 array held in memory (e.g. Marian's ``special:model.yml``), shaped like an array."""

    data: bytes
    dtype: str = "uint8"

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.data),)

    @property
    def size(self) -> int:  # type: ignore[override]
        return len(self.data)

    def read(self, offset: int, length: int) -> bytes:
        return self.data[offset:offset + length]


# ---------------------------------------------------------------------------------------------- torch

_STORAGES = {"float32": "FloatStorage", "float16": "HalfStorage", "bfloat16": "BFloat16Storage"}


class _Storage:
    def __init__(self, key: str, array: Array, legacy: bool):
        self.key, self.array, self.legacy = key, array, legacy


class _Tensor:
    """What a pickled tensor is: ``torch._utils._rebuild_tensor_v2(storage, 0, shape, stride, False, {})``."""

    def __init__(self, storage: _Storage):
        self.storage = storage

    def __reduce__(self):
        import torch

        shape = self.storage.array.shape
        stride = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
        return torch._utils._rebuild_tensor_v2, (self.storage, 0, tuple(shape), stride, False, OrderedDict())


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if not isinstance(obj, _Storage):
            return None
        import torch

        kind = getattr(torch, _STORAGES[obj.array.dtype])
        base = ("storage", kind, obj.key, "cpu", obj.array.numel)
        return (*base, None) if obj.legacy else base


def _state_pickle(tensors: Sequence[tuple[str, Array]], legacy: bool) -> tuple[bytes, list[_Storage]]:
    storages = [_Storage(str(i), array, legacy) for i, (_, array) in enumerate(tensors)]
    state = OrderedDict((name, _Tensor(s)) for (name, _), s in zip(tensors, storages, strict=True))
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump(state)
    return buf.getvalue(), storages


def torch_zip_blob(tensors: Sequence[tuple[str, Array]], crcs: dict | None = None, archive: str = "archive") -> Blob:
    """A ``torch.save`` file (zip format, torch >= 1.6) of a state dict of ``tensors``, one storage each."""
    data_pkl, storages = _state_pickle(tensors, legacy=False)
    members: list[tuple[str, Blob]] = [(f"{archive}/data.pkl", Bytes(data_pkl)),
                                       (f"{archive}/.format_version", Bytes(b"1")),
                                       (f"{archive}/.storage_alignment", Bytes(b"64")),
                                       (f"{archive}/byteorder", Bytes(b"little"))]
    members += [(f"{archive}/data/{s.key}", s.array) for s in storages]
    members += [(f"{archive}/version", Bytes(b"3\n")), (f"{archive}/.data/serialization_id", Bytes(b"0" * 40))]
    return zip_blob(members, align=64, crcs=crcs)


def torch_legacy_blob(tensors: Sequence[tuple[str, Array]]) -> Blob:
    """A ``torch.save`` file in the format before torch 1.6: magic number, protocol version and system info
    pickles, the state dict's pickle, the sorted storage keys, then per storage its element count and bytes."""
    main, storages = _state_pickle(tensors, legacy=True)
    head = b"".join(pickle.dumps(obj, protocol=2) for obj in (
        0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001, "little_endian": True,
                                       "type_sizes": {"short": 2, "int": 4, "long": 4}}))
    keys = sorted(s.key for s in storages)
    by_key = {s.key: s for s in storages}
    parts: list[Blob] = [Bytes(head + main + pickle.dumps(keys, protocol=2))]
    for key in keys:
        array = by_key[key].array
        parts += [Bytes(struct.pack("<q", array.numel)), array]
    return Concat(parts)
