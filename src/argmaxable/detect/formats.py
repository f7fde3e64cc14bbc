"""One parser per checkpoint format, reading a :class:`~argmaxable.detect.source.Source` (a file on disk or one a
hub serves by range): where each tensor's bytes lie, every size, depth, stride and span bounded before anything is
allocated or fetched.

- ``.safetensors``: the u64 header length and the JSON header give each tensor's dtype, shape and byte offsets,
  which must tile the data exactly and end at the file's size;
- ``.bin``/``.pt``/``.pth`` in torch's zip format (torch >= 1.6): the zip's central directory, then ``data.pkl``
  (read by a restricted unpickler that records each tensor's storage, dtype, shape and stride and runs nothing),
  then the storage records;
- torch's format before 1.6 (the OPUS-MT conversions of 2020): five pickles, then each storage's element count and
  bytes in key order, so a storage's offset follows from the sizes the pickle records;
- ``.npz``: the zip's central directory and each member's ``.npy`` header (``.npy``: its one header);
- ``.gguf``: its header (metadata, then each tensor's name, shape, type and offset; data aligned as the metadata
  says), kept as read so that a file of some of its tensors can be written back around them.

A pickle is scanned opcode by opcode (:mod:`pickletools`) inside a bounded window before it is unpickled, so a
count it claims (``BINBYTES8`` of 2^40) is refused before the unpickler allocates it. A torch tensor's strides must
be positive and must not overlap, and its span must lie inside its storage record; tensors of a GGUF file must not
overlap. Every failure is one :class:`~argmaxable.detect.source.WeightsError` line naming the file.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import pickle
import pickletools
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from argmaxable.detect.source import MAX_READ, Reader, Source, WeightsError, first_line

MAX_HEADER = 100 << 20  # a safetensors JSON header larger than this is refused (the format's own limit)
MAX_PICKLE = MAX_READ  # bytes a checkpoint's pickle may take (a 7B model's data.pkl is well under 1 MiB)
MAX_GGUF_HEADER = 64 << 20  # bytes a GGUF file's metadata and tensor infos may take (gemma-3, 262,144 tokens: 6.2 MiB)
PICKLE_BLOCK = 4096  # bytes of a pickle read at a time (a remote source reads ahead of them and keeps them)
NPY_HEADER_MAX = 1 << 17  # bytes of a deflated .npy member inflated to read its header (numpy writes < 64 KiB)
DEFLATE_RATIO = 1032  # the most deflate makes of one byte (zlib's technical notes: 1032:1)
MAX_DEPTH = 16  # nesting of a state dict, a GGUF array or a safetensors JSON value
MAX_DIMS = 8  # dimensions of a tensor (GGUF allows 4)
TORCH_MAGIC = 0x1950A86A20F9469CFC6C  # the first pickle of torch's format before 1.6
NOT_TORCH = " (Marian's binary .bin models are not supported: use the .npz)"


@dataclass
class Tensor:
    """Where a tensor's bytes lie in a file: ``offset`` and ``nbytes``, with its dtype name and shape (and, for
    torch storages, the element strides; for .npy members whether Fortran-ordered; for GGUF the GGML type)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    info: dict = field(default_factory=dict)


def _fail(source: Source, reason: str) -> WeightsError:
    return WeightsError(f"{source.name!r}: {reason}")


def _int(value: Any) -> bool:
    """A plain integer (not a bool, not a float that happens to be whole)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _depth_ok(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``obj``'s containers nest at most ``limit`` deep (walked without recursion)."""
    stack = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth >= limit:
            return False
        stack.extend((c, depth + 1) for c in children)
    return True


# ------------------------------------------------------------------------------------------ safetensors

SAFETENSORS_DTYPES = {"F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2),
                      "BF16": ("bfloat16", 2), "I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2),
                      "I8": ("int8", 1), "U8": ("uint8", 1), "BOOL": ("bool", 1)}


def _json_header(source: Source, length: int) -> dict:
    text = source.read_exact(8, length, "the safetensors header", ahead=True)
    try:
        header = json.loads(text)
    except RecursionError:  # json's decoder recurses once per level of nesting
        raise _fail(source, "the safetensors header nests too deep to be a header (damaged)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _fail(source, f"unreadable safetensors header ({first_line(err)})") from None
    if not isinstance(header, dict):
        raise _fail(source, f"the safetensors header is a JSON {type(header).__name__}, not an object")
    if not _depth_ok(header):
        raise _fail(source, f"the safetensors header nests more than {MAX_DEPTH} deep (damaged)")
    return header


def safetensors_tensors(source: Source) -> tuple[dict[str, Tensor], dict]:
    """The tensors a .safetensors file's header lists, and its ``__metadata__``; they must tile the data exactly
    and end at the file's size."""
    (length,) = struct.unpack("<Q", source.read_exact(0, 8, "the safetensors header length", ahead=True))
    if not 0 < length <= MAX_HEADER or 8 + length > source.size:
        raise _fail(source, f"not a safetensors file (header length {length} of a {source.size}-byte file)")
    header = _json_header(source, length)
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _fail(source, "the safetensors __metadata__ is not a map of strings")
    tensors, spans = {}, []
    for name, spec in header.items():
        if not isinstance(spec, dict):
            raise _fail(source, f"tensor {name!r} is described by a JSON {type(spec).__name__}, not an object")
        dtype, size = SAFETENSORS_DTYPES.get(spec.get("dtype"), (None, 0)) if isinstance(spec.get("dtype"), str) \
            else (None, 0)
        shape, offsets = spec.get("shape"), spec.get("data_offsets")
        if dtype is None:
            raise _fail(source, f"tensor {name!r} has dtype {spec.get('dtype')!r}; readable: "
                                f"{', '.join(SAFETENSORS_DTYPES)}")
        if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(_int(s) and s >= 0 for s in shape):
            raise _fail(source, f"tensor {name!r} has shape {shape!r}: expected a list of at most {MAX_DIMS} "
                                "non-negative integers")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_int(o) for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            raise _fail(source, f"tensor {name!r} has data_offsets {offsets!r}: expected [begin, end] integers, "
                                "0 <= begin <= end")
        begin, end = offsets
        if end - begin != math.prod(shape) * size:
            raise _fail(source, f"tensor {name!r} ({spec['dtype']}, {shape}) does not match its {end - begin} bytes")
        tensors[name] = Tensor(name, dtype, tuple(shape), 8 + length + begin, end - begin)
        spans.append((begin, end))
    spans.sort()
    if any(a[1] != b[0] for a, b in itertools.pairwise(spans)) or (spans and spans[0][0] != 0) \
            or 8 + length + (spans[-1][1] if spans else 0) != source.size:
        raise _fail(source, f"the header's tensors do not tile the file's {source.size} bytes (overlapping, gaps, "
                            "or a file truncated or extended)")
    return tensors, meta


# ------------------------------------------------------------------------------------------------ pickles


class _Window:
    """A file object over ``source[start:stop]`` for :mod:`pickletools`, read in blocks: a read past ``stop`` is
    refused before anything is read (a count claiming 2^40 bytes is never allocated nor fetched)."""

    def __init__(self, source: Source, start: int, stop: int):
        self.source, self.start, self.stop, self.pos = source, start, stop, start
        self.block, self.block_at = b"", start

    def read(self, n: int) -> bytes:
        if n > self.stop - self.pos:
            raise WeightsError(f"{self.source.name!r}: a pickle opcode at byte {self.pos} claims {n} bytes, past "
                               f"the end of the pickle's {self.stop - self.start}-byte bound: truncated or damaged")
        at = self.pos - self.block_at
        if at + n > len(self.block):
            self.block_at, at = self.pos, 0
            self.block = self.source.read_exact(self.pos, min(max(n, PICKLE_BLOCK), self.stop - self.pos),
                                                "a pickle", bounded=True, ahead=True)
        self.pos += n
        return self.block[at:at + n]

    def readline(self) -> bytes:
        line = b""
        while not line.endswith(b"\n"):
            rest = self.block[self.pos - self.block_at:]
            if not rest:
                if self.pos >= self.stop:
                    raise WeightsError(f"{self.source.name!r}: a pickle line runs past its bound: truncated or "
                                       "damaged")
                self.block_at = self.pos
                self.block = self.source.read_exact(self.pos, min(PICKLE_BLOCK, self.stop - self.pos), "a pickle",
                                                    bounded=True, ahead=True)
                continue
            cut = rest.find(b"\n")
            piece = rest if cut < 0 else rest[:cut + 1]
            line += piece
            self.pos += len(piece)
        return line

    def tell(self) -> int:
        return self.pos - self.start


def pickle_at(source: Source, start: int, stop: int | None = None) -> tuple[bytes, int]:
    """The bytes of the pickle starting at ``start`` (scanned opcode by opcode, at most :data:`MAX_PICKLE` bytes,
    not past ``stop``) and the offset just past it."""
    stop = min(source.size if stop is None else stop, start + MAX_PICKLE)
    window = _Window(source, start, stop)
    try:
        for _ in pickletools.genops(window):
            pass
    except WeightsError:
        raise
    except Exception as err:  # pickletools raises ValueError on a bad or truncated opcode argument
        raise _fail(source, f"unreadable pickle at byte {start} ({first_line(err)})") from None
    end = start + window.tell()
    return source.read_exact(start, end - start, "a pickle"), end


class TorchStorage:
    """A storage a torch pickle names by persistent id: its key (the record's name), dtype and element count."""

    def __init__(self, key: str, dtype: str, numel: int):
        self.key, self.dtype, self.numel = key, dtype, numel


class TensorRef:
    """A tensor as torch's pickle rebuilds it: a storage, an element offset into it, a shape and strides."""

    def __init__(self, storage: TorchStorage, offset: int, shape: tuple, stride: tuple):
        self.storage, self.offset, self.shape, self.stride = storage, offset, shape, stride


class _StateDict(dict):
    """``collections.OrderedDict`` as a torch pickle builds it: a dict that takes the ``_metadata`` attribute
    ``nn.Module.state_dict`` sets on it."""


TORCH_STORAGES = {"FloatStorage": "float32", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
                  "DoubleStorage": "float64", "LongStorage": "int64", "IntStorage": "int32", "ByteStorage": "uint8",
                  "BoolStorage": "bool", "CharStorage": "int8", "ShortStorage": "int16"}
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
            "int8": 1, "uint8": 1, "bool": 1}


class _TorchPickle(pickle.Unpickler):
    """An unpickler of torch's pickles that runs nothing: storages become :class:`TorchStorage` records,
    ``_rebuild_tensor_v2`` a :class:`TensorRef`; any other global is refused."""

    def __init__(self, data: bytes, source: Source):
        super().__init__(io.BytesIO(data))
        self._source = source

    def find_class(self, module: str, name: str):
        if module == "collections" and name == "OrderedDict":
            return _StateDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return self._tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return lambda data, *_: data
        if module == "torch" and name in TORCH_STORAGES:
            return TORCH_STORAGES[name]
        raise _fail(self._source, f"refused to unpickle global {module}.{name} (a checkpoint's pickle may only "
                                  "name tensors and storages)")

    def _tensor(self, storage, offset, shape, stride, *_):
        if not (isinstance(storage, TorchStorage) and _int(offset) and isinstance(shape, tuple)
                and isinstance(stride, tuple) and len(shape) == len(stride) <= MAX_DIMS
                and all(_int(v) for v in (*shape, *stride))):
            raise _fail(self._source, "a tensor in the pickle is not (storage, offset, shape, stride) of integers")
        return TensorRef(storage, offset, shape, stride)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and pid[1] in ITEMSIZE
                and isinstance(pid[2], (str, int)) and _int(pid[4]) and pid[4] >= 0):
            raise _fail(self._source, "unexpected persistent id in the pickle (not a storage record)")
        return TorchStorage(str(pid[2]), pid[1], pid[4])


def _unpickle(data: bytes, source: Source) -> Any:
    try:
        return _TorchPickle(data, source).load()
    except WeightsError:
        raise
    except Exception as err:  # a pickle that pickletools can scan may still fail to build
        raise _fail(source, f"unreadable pickle ({first_line(err)})") from None


def _tensor_refs(obj: Any, source: Source, prefix: str = "", depth: int = 0) -> dict[str, TensorRef]:
    """The tensors of a (nested) state dict by dotted name, in the file's order; a bare tensor is named ``W``;
    entries that are neither (step counts, settings) are left out."""
    if isinstance(obj, TensorRef) and depth == 0:
        return {"W": obj}
    if depth > MAX_DEPTH:
        raise _fail(source, f"the state dict nests more than {MAX_DEPTH} deep")
    out = {}
    for key, value in obj.items() if isinstance(obj, dict) else ():
        if isinstance(value, dict):
            out |= _tensor_refs(value, source, f"{prefix}{key}.", depth + 1)
        elif isinstance(value, TensorRef):
            out[f"{prefix}{key}"] = value
    return out


def _torch_tensor(source: Source, name: str, ref: TensorRef, base: int, record: int, crc: int | None = None
                  ) -> Tensor:
    """A tensor of a storage whose bytes begin at ``base`` and take ``record`` bytes: strides positive and not
    overlapping, its span inside the record; ``crc``: the record's zip CRC-32, checked when the tensor spans all
    of it."""
    size = ITEMSIZE[ref.storage.dtype]
    if ref.offset < 0 or any(n < 0 for n in ref.shape) or any(s <= 0 for n, s in zip(ref.shape, ref.stride,
                                                                                       strict=True) if n > 1):
        raise _fail(source, f"tensor {name!r} has storage offset {ref.offset}, shape {list(ref.shape)} and strides "
                            f"{list(ref.stride)}: offsets and strides must be positive")
    reach = 1  # elements spanned by the dimensions of smaller stride: each stride must step past them
    for n, s in sorted(((n, s) for n, s in zip(ref.shape, ref.stride, strict=True) if n > 1), key=lambda t: t[1]):
        if s < reach:
            raise _fail(source, f"tensor {name!r} has overlapping strides {list(ref.stride)} for shape "
                                f"{list(ref.shape)}")
        reach = s * n
    span = 1 + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride, strict=True)) if all(ref.shape) else 0
    if ref.storage.numel * size != record or (ref.offset + span) * size > record:
        raise _fail(source, f"tensor {name!r} spans elements {ref.offset}..{ref.offset + span} of a storage record "
                            f"of {record} bytes ({ref.storage.numel} {ref.storage.dtype} declared)")
    info = {"stride": ref.stride, "storage": ref.storage.key}
    if crc is not None and ref.offset == 0 and span * size == record:
        info["crc"] = (crc, b"")
    return Tensor(name, ref.storage.dtype, ref.shape, base + ref.offset * size, span * size, info)


def _zip(source: Source) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(Reader(source))
    except WeightsError:
        raise
    except Exception as err:  # BadZipFile, struct errors, ... on a damaged directory
        raise _fail(source, f"unreadable zip directory ({first_line(err)})") from None


def member_data(source: Source, info: zipfile.ZipInfo, deflated: bool = False) -> int:
    """Where a stored (or, with ``deflated``, a deflated) zip member's bytes begin: past its local header, whose
    name and extra field lengths may differ from the central directory's (torch pads the extra field to align
    storages)."""
    if info.compress_type != zipfile.ZIP_STORED and not (deflated and info.compress_type == zipfile.ZIP_DEFLATED):
        raise _fail(source, f"member {info.filename} is compressed (method {info.compress_type}): save it "
                            "uncompressed (np.savez, torch.save)")
    local = source.read_exact(info.header_offset, 30, f"the local header of member {info.filename}")
    if local[:4] != b"PK\x03\x04":
        raise _fail(source, f"no local header for member {info.filename}")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    start = info.header_offset + 30 + name_len + extra_len
    source.check_span(start, info.compress_size, f"member {info.filename}")
    return start


def torch_zip_tensors(source: Source, keys: Sequence[str] | None = None) -> dict[str, Tensor]:
    """The tensors of a torch zip checkpoint: ``data.pkl`` read safely; the storage records of ``keys`` (None:
    all) located (a tensor not asked for has offset -1)."""
    with _zip(source) as zf:
        infos = zf.infolist()
    pkl = next((i for i in infos if i.filename.endswith("/data.pkl") or i.filename == "data.pkl"), None)
    if pkl is None:
        raise _fail(source, "a zip without data.pkl is not a torch checkpoint")
    root = pkl.filename[: -len("data.pkl")]
    order = next((i for i in infos if i.filename == f"{root}byteorder"), None)
    if order is not None and source.read_exact(member_data(source, order), order.file_size, "byteorder") != b"little":
        raise _fail(source, "a big-endian torch checkpoint: save it on a little-endian machine")
    start = member_data(source, pkl)
    data = pickle_at(source, start, start + pkl.file_size)[0]
    refs = _tensor_refs(_unpickle(data, source), source)
    members = {i.filename: i for i in infos}
    out = {}
    for name, ref in refs.items():
        if keys is not None and name not in keys:
            out[name] = Tensor(name, ref.storage.dtype, ref.shape, -1, 0)
            continue
        info = members.get(f"{root}data/{ref.storage.key}")
        if info is None:
            raise _fail(source, f"storage {ref.storage.key} of {name!r} is missing")
        out[name] = _torch_tensor(source, name, ref, member_data(source, info), info.file_size, info.CRC)
    return out


def torch_legacy_tensors(source: Source, keys: Sequence[str] | None = None) -> dict[str, Tensor]:
    """The tensors of a checkpoint in torch's format before 1.6: the storages follow the pickles in key order,
    each as an int64 element count and its bytes (the counts of the storages of ``keys``, None: all, are read and
    compared with what the pickle says)."""
    try:
        data, at = pickle_at(source, 0)
        magic = _unpickle(data, source)
    except WeightsError as err:
        raise WeightsError(f"{err}{NOT_TORCH}") from None
    if magic != TORCH_MAGIC:
        raise _fail(source, f"not a torch checkpoint (neither zip nor the legacy magic number){NOT_TORCH}")
    loaded = [magic]
    for _ in range(4):  # protocol version, system info, the state dict, the storage keys
        data, at = pickle_at(source, at)
        loaded.append(_unpickle(data, source))
    refs, order = _tensor_refs(loaded[3], source), loaded[4]
    if not isinstance(order, list) or len(order) > source.size // 8:
        raise _fail(source, "the storage keys of the legacy checkpoint are not a list")
    storages = {ref.storage.key: ref.storage for ref in refs.values()}
    bases = {}
    for key in map(str, order):
        storage = storages.get(key)
        if storage is None or key in bases:
            raise _fail(source, f"storage {key} is listed {'twice' if key in bases else 'but no tensor uses it'}")
        bases[key] = at + 8
        at += 8 + storage.numel * ITEMSIZE[storage.dtype]
    if at != source.size or set(bases) != set(storages):
        raise _fail(source, f"its storages end at byte {at}, the file at {source.size} (truncated or damaged)")
    out = {}
    for name, ref in refs.items():
        storage = ref.storage
        tensor = _torch_tensor(source, name, ref, bases[storage.key], storage.numel * ITEMSIZE[storage.dtype])
        if keys is None or name in keys:
            (count,) = struct.unpack("<q", source.read_exact(bases[storage.key] - 8, 8, f"the size of {name!r}"))
            if count != storage.numel:
                raise _fail(source, f"storage {storage.key} of {name!r} holds {count} elements where the pickle "
                                    f"says {storage.numel}")
        out[name] = tensor
    return out


# --------------------------------------------------------------------------------------------- npy, npz

_NPY_HEADERS = {(1, 0): (np.lib.format.read_array_header_1_0, "<H"), (2, 0): (np.lib.format.read_array_header_2_0,
                                                                             "<I")}


def npy_tensor(source: Source, name: str, start: int, size: int, what: str, crc: int | None = None) -> Tensor:
    """The array of the ``.npy`` bytes ``start:start+size`` (a file, or an .npz member whose zip CRC-32 is
    ``crc``, checked when the array is read), past its header."""
    magic = source.read_exact(start, 8, f"the .npy header of {what}")
    version = (magic[6], magic[7])
    if magic[:6] != b"\x93NUMPY" or version not in _NPY_HEADERS:
        raise _fail(source, f"{what} is not a .npy array (format {version})")
    reader, fmt = _NPY_HEADERS[version]
    (length,) = struct.unpack(fmt, source.read_exact(start + 8, struct.calcsize(fmt), f"the .npy header of {what}"))
    head = io.BytesIO(source.read_exact(start, 8 + struct.calcsize(fmt) + length, f"the .npy header of {what}"))
    np.lib.format.read_magic(head)
    try:
        shape, fortran, dtype = reader(head)
    except ValueError as err:
        raise _fail(source, f"{what}: unreadable .npy header ({first_line(err)})") from None
    if dtype.hasobject or len(shape) > MAX_DIMS:
        raise _fail(source, f"{what} holds {'Python objects' if dtype.hasobject else f'{len(shape)} dimensions'}"
                            ": not a weights array")
    nbytes = math.prod(shape) * dtype.itemsize
    if head.tell() + nbytes != size:
        raise _fail(source, f"{what} is not one array of its declared shape {shape} ({size} bytes; truncated or "
                            "damaged)")
    info = {"fortran": fortran} | ({} if crc is None else {"crc": (crc, head.getvalue())})
    return Tensor(name, dtype.str, tuple(shape), start + head.tell(), nbytes, info)


class _Bytes(Source):
    """Bytes in memory as a source (the inflated start of a deflated member), named as the file they came from."""

    def __init__(self, name: str, data: bytes):
        self.name, self.size, self.data, self.fetched = name, len(data), data, 0

    def read(self, offset: int, length: int, ahead: bool = True) -> bytes:
        return self.data[offset:offset + length]


def _inflated_start(source: Source, start: int, info: zipfile.ZipInfo) -> bytes:
    """The first :data:`NPY_HEADER_MAX` bytes a deflated member inflates to (enough for its ``.npy`` header)."""
    inflate, out, at, end = zlib.decompressobj(-zlib.MAX_WBITS), b"", start, start + info.compress_size
    want = min(NPY_HEADER_MAX, info.file_size)
    try:
        while len(out) < want and at < end and not inflate.eof:
            chunk = source.read_exact(at, min(1 << 16, end - at), f"member {info.filename}")
            at += len(chunk)
            out += inflate.decompress(chunk, want - len(out))
    except zlib.error as err:
        raise _fail(source, f"member {info.filename} does not inflate ({first_line(err)}): damaged") from None
    return out


def npz_tensors(source: Source, keys: Sequence[str] | None = None) -> dict[str, Tensor]:
    """The arrays of an .npz (a zip of ``.npy`` members, stored or deflated: ``np.savez``, ``np.savez_compressed``);
    those of ``keys`` (None: all) located past their ``.npy`` header (an array not asked for has offset -1 and no
    shape). A deflated member is located as its compressed bytes, inflated when it is read, and refused when it
    claims to inflate to more than deflate can make of its bytes."""
    with _zip(source) as zf:
        infos = [i for i in zf.infolist() if i.filename.endswith(".npy")]
    out = {}
    for info in infos:
        key, what = info.filename[:-4], f"member {info.filename}"
        if keys is not None and key not in keys:
            out[key] = Tensor(key, "", (), -1, 0)
            continue
        start = member_data(source, info, deflated=True)
        if info.compress_type == zipfile.ZIP_STORED:
            out[key] = npy_tensor(source, key, start, info.file_size, what, info.CRC)
            continue
        if info.file_size > DEFLATE_RATIO * info.compress_size + NPY_HEADER_MAX:
            raise _fail(source, f"{what} claims to inflate {info.compress_size} bytes to {info.file_size}, more "
                                "than deflate makes of them: damaged")
        array = npy_tensor(_Bytes(source.name, _inflated_start(source, start, info)), key, 0, info.file_size, what)
        out[key] = Tensor(key, array.dtype, array.shape, start, info.compress_size,
                          {"fortran": array.info["fortran"], "inflate": (info.file_size, array.offset, info.CRC)})
    return out


# ----------------------------------------------------------------------------------------------- GGUF

_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
                 12: "<d"}  # GGUF value types; 8 is a string, 9 an array
_GGUF_ARRAYS = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8",
                12: "<f8"}
GGUF_VERSIONS = (2, 3)


class _Cursor:
    """Read a source from the start, keeping every byte read (a GGUF header, written back as it was), at most
    :data:`MAX_GGUF_HEADER` bytes: a count or length the file claims is checked against what is left before it
    is read."""

    def __init__(self, source: Source):
        self.source, self.data, self.pos = source, bytearray(), 0
        self.limit = min(source.size, MAX_GGUF_HEADER)

    def need(self, n: int, what: str) -> None:
        if n > self.limit - self.pos:
            if self.pos + n > self.source.size:
                raise WeightsError(f"{self.source.name!r} is truncated: {what} at byte {self.pos} claims {n} bytes, "
                                   f"past the end of the {self.source.size}-byte file")
            raise _fail(self.source, f"{what} at byte {self.pos} claims {n} bytes: the GGUF header would pass "
                                     f"{MAX_GGUF_HEADER >> 20} MiB (damaged)")
        while len(self.data) < self.pos + n:
            want = min(self.limit - len(self.data), max(self.pos + n - len(self.data), len(self.data), 1 << 16))
            self.data += self.source.read_exact(len(self.data), want, "the GGUF header", bounded=True, ahead=True)

    def take(self, n: int, what: str) -> memoryview:
        self.need(n, what)
        self.pos += n
        return memoryview(self.data)[self.pos - n:self.pos]

    def unpack(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str) -> bytes:
        return bytes(self.take(self.unpack("<Q", what), what))

    def value(self, vtype: int, what: str, depth: int = 0):
        """A metadata value: a number, bytes (a string), an ndarray (an array of numbers) or a list."""
        if vtype in _GGUF_SCALARS:
            return self.unpack(_GGUF_SCALARS[vtype], what)
        if vtype == 8:
            return self.string(what)
        if vtype != 9:
            raise _fail(self.source, f"{what} has unknown GGUF value type {vtype}")
        if depth >= MAX_DEPTH:
            raise _fail(self.source, f"{what} nests arrays more than {MAX_DEPTH} deep (damaged)")
        item, count = self.unpack("<I", what), self.unpack("<Q", what)
        if item in _GGUF_ARRAYS:
            dtype = np.dtype(_GGUF_ARRAYS[item])
            self.need(count * dtype.itemsize, what)
            return np.frombuffer(bytes(self.take(count * dtype.itemsize, what)), dtype)
        self.need(count * (8 if item == 8 else 12), what)  # a string takes 8 bytes at least, an array 12
        return [self.value(item, what, depth + 1) for _ in range(count)]


@dataclass
class GGUFHeader:
    """A GGUF file's header: its metadata values by key, its tensors (``absent``: those whose data lie beyond the
    end of a file cut short), and what writing a file of some of them back needs."""

    version: int
    n_kv: int
    metadata: bytes  # the metadata's bytes as stored
    alignment: int
    fields: dict[str, Any]
    tensors: dict[str, Tensor]
    absent: list[str]

    def require(self, source: Source, names: Sequence[str]) -> None:
        """Refuse, in one line, a file that stops inside one of the tensors ``names``."""
        cut = [name for name in names if name in self.absent]
        if cut:
            raise WeightsError(f"{source.name!r} is truncated: it stops inside tensor {cut[0]} (join all its parts "
                               "in order, or the parts up to it)")

    def text(self, source: Source, key: str) -> str | list[str] | None:
        """A string (or list of strings) field as text, None when absent; a value that is not UTF-8 text is one
        line naming the field."""
        value = self.fields.get(key)
        if value is None:
            return None
        strings = value if isinstance(value, list) else [value]
        if not all(isinstance(v, bytes) for v in strings):
            raise _fail(source, f"metadata field {key} is not text")
        try:
            text = [v.decode("utf-8") for v in strings]
        except UnicodeDecodeError as err:
            raise _fail(source, f"metadata field {key} holds text that is not UTF-8 ({err.reason} at byte "
                                f"{err.start} of a value)") from None
        return text if isinstance(value, list) else text[0]


def gguf_header(source: Source) -> GGUFHeader:
    """The header of a GGUF file (magic, version, counts, metadata, tensor infos; data aligned to
    ``general.alignment``, a power of two), every count and length bounded by what the file holds."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    head = _Cursor(source)
    if source.size < 4 or bytes(head.take(4, "the magic")) != b"GGUF":
        raise _fail(source, "not a GGUF file (no GGUF magic); byte parts of a split file must be joined in order "
                            "first")
    version = head.unpack("<I", "the version")
    if version not in GGUF_VERSIONS:
        raise _fail(source, f"GGUF version {version} (readable: {', '.join(map(str, GGUF_VERSIONS))}; a "
                            "big-endian file reads as a huge version)")
    n_tensors, n_kv = head.unpack("<Q", "the tensor count"), head.unpack("<Q", "the metadata count")
    head.need(n_kv * 13 + n_tensors * 24, f"{n_kv} metadata entries and {n_tensors} tensor infos")
    fields: dict[str, Any] = {}
    for i in range(n_kv):
        key = head.string(f"metadata key {i}").decode("utf-8", "replace")
        fields[key] = head.value(head.unpack("<I", f"metadata {key}"), f"metadata {key}")
    metadata = bytes(head.data[24:head.pos])
    alignment = fields.get("general.alignment", 32)
    if not _int(alignment) or alignment <= 0 or alignment & (alignment - 1) or alignment > 1 << 20:
        raise _fail(source, f"general.alignment is {alignment!r}: it must be a power of two (damaged)")
    infos = []
    for i in range(n_tensors):
        name = head.string(f"tensor info {i}").decode("utf-8", "replace")
        n_dims = head.unpack("<I", f"tensor {name}")
        if n_dims > 4:
            raise _fail(source, f"tensor {name} has {n_dims} dimensions; GGUF allows 4")
        dims = [head.unpack("<Q", f"tensor {name}") for _ in range(n_dims)]
        infos.append((name, dims, head.unpack("<I", f"tensor {name}"), head.unpack("<Q", f"tensor {name}")))
    start = head.pos + (-head.pos % alignment)
    tensors, absent = {}, []
    for name, dims, kind, offset in infos:
        try:
            ggml = GGMLQuantizationType(kind)
        except ValueError:
            raise _fail(source, f"tensor {name} has unknown GGML type {kind}") from None
        block, size = GGML_QUANT_SIZES[ggml]
        if name in tensors or offset % alignment or (dims and dims[0] % block):
            raise _fail(source, f"tensor {name} is {'listed twice' if name in tensors else ''}"
                                f"{'' if name in tensors else 'misaligned (offset or row length)'}: damaged")
        numel = math.prod(dims)
        tensors[name] = Tensor(name, ggml.name, tuple(dims), start + offset, numel // block * size, {"type": kind})
        if start + offset + numel // block * size > source.size:
            absent.append(name)
    placed = sorted(tensors.values(), key=lambda t: (t.offset, t.nbytes))
    for a, b in itertools.pairwise(placed):
        if a.offset + a.nbytes > b.offset:
            raise _fail(source, f"tensors {a.name} and {b.name} overlap in the file's data (damaged)")
    return GGUFHeader(version, n_kv, metadata, alignment, fields, tensors, absent)


def gguf_values(source: Source, tensor: Tensor) -> np.ndarray:
    """A GGUF tensor's stored values as :mod:`gguf` reads them: numbers of its own type for the float and integer
    types, else its bytes by row (the form ``gguf.quants.dequantize`` takes)."""
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import quant_shape_to_byte_shape

    kind = GGMLQuantizationType(tensor.info["type"])
    data = source.array(tensor.offset, tensor.nbytes, f"tensor {tensor.name}")
    dims = tuple(reversed(tensor.shape))
    plain = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
             "I32": np.int32, "I64": np.int64}.get(kind.name)
    if plain is not None:
        return data.view(plain).reshape(dims)
    return data.reshape(quant_shape_to_byte_shape(dims, kind))


# ------------------------------------------------------------------------------------------- any format

FORMATS = ("safetensors", "torch-zip", "torch-legacy", "npz", "npy", "gguf")


def checkpoint_format(name: str, source: Source) -> str:
    """``safetensors``, ``gguf``, ``npz``, ``npy``, ``torch-zip`` or ``torch-legacy``, from the name and the
    first bytes (torch's formats share their suffixes)."""
    for suffix in ("safetensors", "npz", "npy", "gguf"):
        if name.lower().endswith(f".{suffix}"):
            return suffix
    return "torch-zip" if source.read(0, 4) == b"PK\x03\x04" else "torch-legacy"


def list_tensors(name: str, source: Source, keys: Sequence[str] | None = None) -> dict[str, Tensor]:
    """Every tensor of a checkpoint by name, and where the bytes of ``keys`` (None: all) lie; nothing but headers
    is read (locating a zip member costs a read of its local header, so only those asked for are located)."""
    fmt = checkpoint_format(name, source)
    if fmt == "safetensors":
        return safetensors_tensors(source)[0]
    if fmt == "gguf":
        return gguf_header(source).tensors
    if fmt == "npz":
        return npz_tensors(source, keys)
    if fmt == "npy":
        return {"W": npy_tensor(source, "W", 0, source.size, "the file")}
    return torch_zip_tensors(source, keys) if fmt == "torch-zip" else torch_legacy_tensors(source, keys)


def stored_values(source: Source, tensor: Tensor) -> np.ndarray:
    """A located tensor's values in its stored type and shape (bfloat16 as its uint16 bits, which numpy lacks),
    made from exactly its bytes (checked against their zip CRC-32 where the tensor is a whole zip member): strides
    were checked against its span when it was located."""
    data = source.array(tensor.offset, tensor.nbytes, f"tensor {tensor.name!r}")
    if "inflate" in tensor.info:
        data = _inflate(source, tensor, data)
    if "crc" in tensor.info:
        crc, prefix = tensor.info["crc"]
        if zlib.crc32(data, zlib.crc32(prefix)) != crc:
            raise _fail(source, f"tensor {tensor.name!r} fails its zip CRC-32 check: the file is damaged")
    dtype = np.dtype("<u2" if tensor.dtype == "bfloat16" else tensor.dtype)
    flat = data.view(dtype)
    if "stride" in tensor.info:
        if not all(tensor.shape):
            return np.zeros(tensor.shape, dtype)
        strides = tuple(s * dtype.itemsize for s in tensor.info["stride"])
        return np.lib.stride_tricks.as_strided(flat, tensor.shape, strides).copy()
    return flat.reshape(tensor.shape, order="F" if tensor.info.get("fortran") else "C")


def _inflate(source: Source, tensor: Tensor, data: np.ndarray) -> np.ndarray:
    """A deflated member's array bytes: inflated to the size its zip entry gives, checked against its CRC-32."""
    size, skip, crc = tensor.info["inflate"]
    try:
        raw = zlib.decompressobj(-zlib.MAX_WBITS).decompress(data, size)
    except zlib.error as err:
        raise _fail(source, f"tensor {tensor.name!r} does not inflate ({first_line(err)}): damaged") from None
    if len(raw) != size or zlib.crc32(raw) != crc:
        raise _fail(source, f"tensor {tensor.name!r} fails its zip CRC-32 check: the file is damaged")
    return np.frombuffer(raw, np.uint8, offset=skip).copy()


def as_float(values: np.ndarray, dtype: str) -> np.ndarray:
    """Stored values as numpy computes with them: half precision (float16; bfloat16 from its bits, exactly) as
    float32, every other type as stored."""
    if dtype == "bfloat16":
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float32) if values.dtype == np.float16 else values
