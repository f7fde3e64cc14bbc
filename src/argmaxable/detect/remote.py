"""Read only the head of a checkpoint: byte ranges of a local or remote file, and the formats' headers.

A checkpoint says in its header where each tensor lies, so the output layer of a 13 GB model is found and read
without the rest: :class:`Remote` reads byte ranges over HTTP (``Range``), :class:`Local` the same of a file on
disk, and :func:`extract_head` writes a file of the checkpoint's own format holding only the named tensors, their
bytes copied as stored:

- ``.safetensors``: the u64 header length and the JSON header give each tensor's dtype, shape and byte offsets;
- ``.bin``/``.pt`` in torch's zip format (torch >= 1.6): the zip's central directory, then ``data.pkl`` (read
  by a restricted unpickler that records each tensor's storage, dtype, shape and stride and runs nothing), then
  the storage records;
- ``.bin`` in torch's format before 1.6 (the OPUS-MT conversions of 2020): five pickles, then each storage's
  element count and bytes in key order, so a storage's offset follows from the sizes the pickle records;
- ``.npz``: the zip's central directory and each member's ``.npy`` header;
- ``.gguf``: its header (metadata, then each tensor's name, shape, type and offset; data aligned as the metadata
  says), written back as it was around the tensors kept.

Every remote read is checked: the file's size, ETag and commit come from one ``HEAD`` (``X-Linked-Size``,
``X-Linked-Etag`` or ``ETag``, ``X-Repo-Commit``, as the hub sends them; redirects to another host lose the
``Authorization`` header, as huggingface_hub's do); each range must come back as ``206`` with the
``Content-Range`` asked for, the same ETag (``If-Range``: a file that changed comes back whole, which is refused)
and the length the header promises. Transient failures (connection errors, timeouts, HTTP 5xx, 408, 429) are
retried with back-off, resuming a range from the bytes already received; large ranges are written to part files
that a later run resumes after the process was killed. A range cannot be checked against the whole file's
sha-256 (that needs the whole file): what is checked is the ETag the hub publishes, the lengths, and the
header's own consistency (its tensors tile the data exactly and end at the file's size).
"""

from __future__ import annotations

import io
import itertools
import json
import os
import pickle
import struct
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from argmaxable.fetch import DownloadError, Refused, failure_reason

BLOCK = 1 << 20
READ_AHEAD = 1 << 16  # bytes fetched around a small read (headers, pickles, zip directories)
MAX_HEADER = 100 << 20  # a safetensors JSON header larger than this is refused (the format's own limit)
RETRIES = 5
BACKOFF = 1.0  # seconds before the first retry, doubled after each (read at each retry: tests shorten it)


# ---------------------------------------------------------------------------------------------- sources


class Source:
    """A file's bytes by range: ``size``, ``read(offset, length)`` and ``fetch(offset, length, part)`` (a large
    range, into a part file). ``fetched`` counts the bytes read from it."""

    name: str
    size: int
    fetched: int = 0

    def read(self, offset: int, length: int, ahead: bool = True) -> bytes:
        """Bytes ``offset:offset+length``; ``ahead``: a remote source may fetch more around them (headers)."""
        raise NotImplementedError

    def fetch(self, offset: int, length: int, part: Path) -> Path:
        """Bytes ``offset:offset+length`` into ``part`` (appending to what it holds already); return ``part``."""
        part.parent.mkdir(parents=True, exist_ok=True)
        have = part.stat().st_size if part.exists() else 0
        if have > length:
            part.unlink()
            have = 0
        with open(part, "ab") as out:
            while have < length:
                block = self.read(offset + have, min(BLOCK << 4, length - have))
                out.write(block)
                have += len(block)
        return part

    def record(self) -> dict[str, Any]:
        return {"size": self.size, "fetched": self.fetched}


class Local(Source):
    """A file on disk (a pre-filled hub cache read offline)."""

    def __init__(self, path: Path):
        self.path, self.name, self.size = Path(path), Path(path).name, Path(path).stat().st_size

    def read(self, offset: int, length: int, ahead: bool = True) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read(length)
        self.fetched += len(data)
        return data


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are followed by :class:`Remote` itself: the hub's metadata is on the redirect response."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


_OPENER = urllib.request.build_opener(_NoRedirect)
MAX_REDIRECTS = 10


def _transient(err: Exception) -> bool:
    if isinstance(err, urllib.error.HTTPError):
        return err.code >= 500 or err.code in (408, 429)
    return isinstance(err, (urllib.error.URLError, OSError))


def normalize_etag(value: str | None) -> str | None:
    """An ETag without its weak prefix and quotes (as huggingface_hub compares them)."""
    return None if value is None else value.removeprefix("W/").strip('"')


@dataclass
class Remote(Source):
    """A file read by HTTP ranges, checked against the size, ETag and commit its ``HEAD`` gives.

    ``commit``: the commit the hub must say it serves (``X-Repo-Commit``); ``hub``: the server is a Hugging Face
    hub, so the response must carry that header (a mirror that drops it is refused, as huggingface_hub refuses it).
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    commit: str | None = None
    hub: bool = True
    timeout: float = 300.0  # seconds without data (a hub may hash a large file before answering its HEAD)
    retries: int = RETRIES
    name: str = ""
    size: int = 0
    etag: str | None = None
    fetched: int = 0

    def __post_init__(self):
        self.name = self.name or urllib.parse.unquote(self.url.rsplit("/", 1)[-1].split("?")[0])
        self._retrying(self._head)
        self._cache: list[tuple[int, bytes]] = []  # the last few small reads (a zip's directory, a header)

    def _open(self, method: str, extra: Mapping[str, str] | None = None):
        request = urllib.request.Request(self.url, method=method, headers={**self.headers, **(extra or {}),
                                                                            "Accept-Encoding": "identity"})
        return _OPENER.open(request, timeout=self.timeout)

    def _retrying(self, attempt: Callable[[], Any]) -> Any:
        for i in range(self.retries + 1):
            try:
                return attempt()
            except DownloadError:
                raise
            except (urllib.error.URLError, OSError) as err:
                if not _transient(err) or i == self.retries:
                    raise DownloadError(f"cannot read {self.url}: {failure_reason(err)}") from None
            time.sleep(BACKOFF * 2 ** i)
        raise AssertionError("unreachable")

    def _head(self) -> None:
        """Size, ETag and commit from a HEAD, following redirects as huggingface_hub does: on the same origin
        (a renamed repo), and to another host (the hub's storage) only for the data, whose metadata the redirect
        response itself carries; ``Authorization`` never leaves the hub's origin."""
        url, h, served = self.url, None, None
        for _ in range(MAX_REDIRECTS):
            try:
                with self._open("HEAD") as response:
                    h = response.headers
                    break
            except urllib.error.HTTPError as err:
                if err.code not in (301, 302, 303, 307, 308) or not err.headers.get("Location"):
                    raise
                target = urllib.parse.urljoin(self.url, err.headers["Location"])
                if _origin(target) == _origin(self.url):
                    self.url = target  # a renamed repo: ask its new name
                    continue
                h, self.url = err.headers, target  # the storage host: data from there, metadata from here
                self.headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
                break
        if h is None:
            raise DownloadError(f"{url}: more than {MAX_REDIRECTS} redirects")
        self.size = int(h.get("X-Linked-Size") or h.get("Content-Length") or -1)
        self.etag = normalize_etag(h.get("X-Linked-Etag") or h.get("ETag"))
        served = h.get("X-Repo-Commit")
        if self.size < 0:
            raise DownloadError(f"{url}: the server gives no file size (X-Linked-Size or Content-Length)")
        if self.hub and served is None:
            raise Refused(f"{url}: no X-Repo-Commit header, so this is not a Hugging Face hub endpoint "
                          "(check HF_ENDPOINT)")
        if self.hub and not self.etag:
            raise Refused(f"{url}: no ETag, so the file cannot be checked")
        if self.commit is not None and served is not None and served != self.commit:
            raise Refused(f"{url}: the hub serves commit {served}, not the pinned {self.commit}")

    def _range(self, offset: int, length: int, out) -> None:
        """One attempt at ``offset:offset+length`` into ``out`` (a file or BytesIO); partial data stays in
        ``out`` and the caller resumes after it."""
        extra = {"Range": f"bytes={offset}-{offset + length - 1}"}
        if self.etag:
            extra["If-Range"] = f'"{self.etag}"'
        with self._open("GET", extra) as response:
            want = f"bytes {offset}-{offset + length - 1}/{self.size}"
            got = response.headers.get("Content-Range")
            if response.status != 206 or got != want:
                raise Refused(f"{self.url}: asked for {want}, got HTTP {response.status} "
                              f"{got or 'without Content-Range'} (the file changed since, or the server "
                              "ignores Range)")
            etag = normalize_etag(response.headers.get("ETag"))
            if self.etag and etag and etag != self.etag:
                raise Refused(f"{self.url}: the ETag changed from {self.etag} to {etag} during the download")
            left = length
            while left and (block := response.read1(min(BLOCK, left))):
                out.write(block)
                out.flush()  # what arrived is on disk, for the next run, should this one be killed
                self.fetched += len(block)
                left -= len(block)
        if left:
            raise ConnectionError(f"connection closed with {left} of {length} bytes missing")

    def read(self, offset: int, length: int, ahead: bool = True) -> bytes:
        """Bytes ``offset:offset+length`` (fewer at the end of the file), read ahead and cached for small reads."""
        length = max(0, min(length, self.size - offset))
        if (hit := self._cached(offset, length)) is not None:
            return hit
        span = min(max(length, READ_AHEAD if ahead else length), self.size - offset)
        buf = io.BytesIO()

        def attempt():
            have = buf.tell()
            self._range(offset + have, span - have, buf)

        self._retrying(attempt)
        self._cache = [*self._cache[-7:], (offset, buf.getvalue())]
        return self._cache[-1][1][:length]

    def _cached(self, offset: int, length: int) -> bytes | None:
        for start, data in self._cache:
            if start <= offset and offset + length <= start + len(data):
                return data[offset - start:offset - start + length]
        return None

    def fetch(self, offset: int, length: int, part: Path) -> Path:
        part.parent.mkdir(parents=True, exist_ok=True)
        if part.exists() and part.stat().st_size > length:
            part.unlink()
        if (hit := self._cached(offset, length)) is not None:  # read already, with the header
            part.write_bytes(hit)
            return part

        def attempt():
            have = part.stat().st_size if part.exists() else 0
            if have < length:
                with open(part, "ab") as out:
                    self._range(offset + have, length - have, out)

        self._retrying(attempt)
        return part

    def record(self) -> dict[str, Any]:
        return {"size": self.size, "fetched": self.fetched, "etag": self.etag}


class Reader(io.RawIOBase):
    """A seekable file object over a :class:`Source` (for zipfile and pickle), reading ahead in blocks."""

    def __init__(self, source: Source):
        self.source, self.pos = source, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.source.size + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, b) -> int:
        data = self.source.read(self.pos, len(b))
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)


# ---------------------------------------------------------------------------------------------- formats


@dataclass
class Tensor:
    """Where a tensor's bytes lie in a file: ``offset`` and ``nbytes``, with its dtype name and shape (and, for
    torch storages, the storage's element offset and strides)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    info: dict = field(default_factory=dict)


_ST_DTYPES = {"F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2),
              "I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2), "I8": ("int8", 1), "U8": ("uint8", 1),
              "BOOL": ("bool", 1)}


def safetensors_tensors(source: Source) -> tuple[dict[str, Tensor], dict]:
    """The tensors a .safetensors file's header lists, checked: they tile the data and end at the file's size."""
    (length,) = struct.unpack("<Q", source.read(0, 8))
    if not 0 < length <= MAX_HEADER or 8 + length > source.size:
        raise DownloadError(f"{source.name}: not a safetensors file (header length {length} of a "
                            f"{source.size}-byte file)")
    try:
        header = json.loads(source.read(8, length))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DownloadError(f"{source.name}: unreadable safetensors header ({err})") from None
    meta = header.pop("__metadata__", {}) or {}
    tensors, spans = {}, []
    for name, spec in header.items():
        dtype, size = _ST_DTYPES.get(spec.get("dtype"), (None, 0))
        begin, end = spec.get("data_offsets", (0, -1))
        shape = tuple(int(s) for s in spec.get("shape", ()))
        if dtype is None or end - begin != int(np.prod(shape, dtype=np.int64)) * size:
            raise DownloadError(f"{source.name}: tensor {name!r} ({spec.get('dtype')}, {list(shape)}) does not "
                                f"match its {end - begin} bytes")
        tensors[name] = Tensor(name, dtype, shape, 8 + length + begin, end - begin)
        spans.append((begin, end))
    spans.sort()
    if any(a[1] != b[0] for a, b in itertools.pairwise(spans)) or (spans and spans[0][0] != 0) \
            or 8 + length + (spans[-1][1] if spans else 0) != source.size:
        raise DownloadError(f"{source.name}: the header's tensors do not tile the file's {source.size} bytes")
    return tensors, meta


class _TorchStorage:
    def __init__(self, key: str, dtype: str, numel: int):
        self.key, self.dtype, self.numel = key, dtype, numel


class _TensorRef:
    def __init__(self, storage: _TorchStorage, offset: int, shape, stride):
        self.storage, self.offset, self.shape, self.stride = storage, int(offset), tuple(shape), tuple(stride)


_TORCH_TYPES = {"FloatStorage": "float32", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
                "DoubleStorage": "float64", "LongStorage": "int64", "IntStorage": "int32", "ByteStorage": "uint8",
                "BoolStorage": "bool", "CharStorage": "int8", "ShortStorage": "int16"}
_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
             "int8": 1, "uint8": 1, "bool": 1}


class _TorchPickle(pickle.Unpickler):
    """An unpickler of torch's ``data.pkl`` that runs nothing: storages become records of their key, dtype and
    size, ``_rebuild_tensor_v2`` a record of the tensor's place; any other global is refused."""

    def __init__(self, file, name: str):
        super().__init__(file)
        self._name = name

    def find_class(self, module: str, name: str):
        if module == "collections" and name == "OrderedDict":
            return dict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return lambda storage, offset, shape, stride, *_: _TensorRef(storage, offset, shape, stride)
        if module == "torch" and name in _TORCH_TYPES:
            return _TORCH_TYPES[name]
        raise DownloadError(f"{self._name}: refused to unpickle global {module}.{name} (a checkpoint's pickle may "
                            "only name tensors and storages)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and pid[1] in _ITEMSIZE):
            raise DownloadError(f"{self._name}: unexpected persistent id in the pickle")
        return _TorchStorage(str(pid[2]), pid[1], int(pid[4]))


def _flat_refs(obj, prefix: str = "") -> dict[str, _TensorRef]:
    out = {}
    if isinstance(obj, dict):
        for key, value in obj.items():
            out |= _flat_refs(value, f"{prefix}{key}.")
    elif isinstance(obj, _TensorRef):
        out[prefix[:-1]] = obj
    return out


def _ref_tensor(name: str, ref: _TensorRef, base: int) -> Tensor:
    size = _ITEMSIZE[ref.storage.dtype]
    span = 1 + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride, strict=True)) if all(ref.shape) else 0
    return Tensor(name, ref.storage.dtype, ref.shape, base + ref.offset * size, span * size,
                  {"stride": ref.stride, "storage": ref.storage.key})


def _member_data(source: Source, info: zipfile.ZipInfo) -> int:
    """Where a stored zip member's bytes begin: past its local header, whose name and extra field lengths may
    differ from the central directory's (torch pads the extra field to align storages)."""
    if info.compress_type != zipfile.ZIP_STORED:
        raise DownloadError(f"{source.name}: member {info.filename} is compressed: its bytes cannot be read by "
                            "range")
    local = source.read(info.header_offset, 30, ahead=False)
    if local[:4] != b"PK\x03\x04":
        raise DownloadError(f"{source.name}: no local header for member {info.filename}")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return info.header_offset + 30 + name_len + extra_len


def torch_zip_tensors(source: Source, keys: Sequence[str] | None) -> dict[str, Tensor]:
    """The tensors of a torch zip checkpoint: ``data.pkl`` read safely; the storage records of ``keys`` (None:
    all) located (a tensor not asked for has offset -1)."""
    with zipfile.ZipFile(Reader(source)) as zf:
        pkl = next((i for i in zf.infolist() if i.filename.endswith("/data.pkl") or i.filename == "data.pkl"), None)
        if pkl is None:
            raise DownloadError(f"{source.name}: a zip without data.pkl is not a torch checkpoint")
        root = pkl.filename[: -len("data.pkl")]
        refs = _flat_refs(_TorchPickle(io.BytesIO(zf.read(pkl)), source.name).load())
        members = {i.filename: i for i in zf.infolist()}
    out = {}
    for name, ref in refs.items():
        if keys is not None and name not in keys:
            out[name] = Tensor(name, ref.storage.dtype, ref.shape, -1, 0)
            continue
        info = members.get(f"{root}data/{ref.storage.key}")
        if info is None:
            raise DownloadError(f"{source.name}: storage {ref.storage.key} of {name!r} is missing")
        base = _member_data(source, info)
        tensor = _ref_tensor(name, ref, base)
        if tensor.offset + tensor.nbytes > base + info.file_size:
            raise DownloadError(f"{source.name}: {name!r} extends past its storage record")
        out[name] = tensor
    return out


def torch_legacy_tensors(source: Source) -> dict[str, Tensor]:
    """The tensors of a checkpoint in torch's format before 1.6: the storages follow the pickles in key order,
    each as an int64 element count and its bytes."""
    reader = io.BufferedReader(Reader(source), buffer_size=READ_AHEAD)
    plain = _TorchPickle(reader, source.name)
    magic = plain.load()
    if magic != 0x1950A86A20F9469CFC6C:
        raise DownloadError(f"{source.name}: not a torch checkpoint (neither zip nor the legacy magic number)")
    plain.load(), plain.load()  # protocol version, system info
    refs = _flat_refs(_TorchPickle(reader, source.name).load())
    keys = _TorchPickle(reader, source.name).load()
    offset = reader.tell()
    storages = {ref.storage.key: ref.storage for ref in refs.values()}
    bases = {}
    for key in keys:
        storage = storages.get(str(key))
        if storage is None:
            raise DownloadError(f"{source.name}: storage {key} is listed but no tensor uses it")
        bases[str(key)] = offset + 8
        offset += 8 + storage.numel * _ITEMSIZE[storage.dtype]
    if offset != source.size:
        raise DownloadError(f"{source.name}: its storages end at byte {offset}, the file at {source.size}")
    return {name: _ref_tensor(name, ref, bases[ref.storage.key]) for name, ref in refs.items()}


def npz_tensors(source: Source, keys: Sequence[str] | None) -> dict[str, Tensor]:
    """The arrays of an .npz (a zip of stored ``.npy`` members); those of ``keys`` (None: all) located past their
    ``.npy`` header (an array not asked for has offset -1 and no shape)."""
    with zipfile.ZipFile(Reader(source)) as zf:
        infos = [i for i in zf.infolist() if i.filename.endswith(".npy")]
    read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    out = {}
    for info in infos:
        key = info.filename[:-4]
        if keys is not None and key not in keys:
            out[key] = Tensor(key, "", (), -1, 0)
            continue
        start = _member_data(source, info)
        (length,) = struct.unpack("<H", source.read(start + 8, 2, ahead=False))
        head = io.BytesIO(source.read(start, 10 + length, ahead=False))
        version = np.lib.format.read_magic(head)
        if version not in read_header:
            raise DownloadError(f"{source.name}: member {info.filename} has .npy format {version}")
        shape, fortran, dtype = read_header[version](head)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if head.tell() + nbytes != info.file_size:
            raise DownloadError(f"{source.name}: member {info.filename} is not one array of its declared shape")
        out[key] = Tensor(key, dtype.str, tuple(shape), start + head.tell(), nbytes, {"fortran": fortran})
    return out


_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
                 12: "<d"}  # GGUF value types; 8 is a string, 9 an array


class _Recorder:
    """Read a source from the start, keeping every byte read (a GGUF file's header, written back as it was)."""

    def __init__(self, source: Source):
        self.source, self.data, self.pos = source, bytearray(), 0

    def take(self, n: int) -> bytes:
        while len(self.data) < self.pos + n:
            got = self.source.read(len(self.data), max(READ_AHEAD, self.pos + n - len(self.data)))
            if not got:
                raise EOFError(f"{self.source.name}: the GGUF header runs past the end of the file")
            self.data += got
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> bytes:
        return self.take(self.unpack("<Q"))

    def value(self, vtype: int):
        if vtype in _GGUF_SCALARS:
            return self.unpack(_GGUF_SCALARS[vtype])
        if vtype == 8:
            return self.string()
        if vtype != 9:
            raise ValueError(f"unknown GGUF value type {vtype}")
        item, count = self.unpack("<I"), self.unpack("<Q")
        if item in _GGUF_SCALARS:  # skipped: only general.alignment is read
            self.take(count * struct.calcsize(_GGUF_SCALARS[item]))
        else:
            for _ in range(count):
                self.value(item)
        return None


def gguf_tensors(source: Source) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """The tensors of a GGUF file (header: magic, version, counts, metadata, tensor infos; data aligned to
    ``general.alignment``) and what writing a file of some of them needs: the version, the metadata's bytes as
    they are, the alignment."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    head = _Recorder(source)
    if head.take(4) != b"GGUF":
        raise DownloadError(f"{source.name}: not a GGUF file")
    version, n_tensors, n_kv = head.unpack("<I"), head.unpack("<Q"), head.unpack("<Q")
    alignment = 32
    for _ in range(n_kv):
        key, vtype = head.string(), head.unpack("<I")
        value = head.value(vtype)
        if key == b"general.alignment":
            alignment = int(value)
    metadata = bytes(head.data[24:head.pos])
    infos = []
    for _ in range(n_tensors):
        name = head.string().decode("utf-8")
        dims = [head.unpack("<Q") for _ in range(head.unpack("<I"))]
        infos.append((name, dims, head.unpack("<I"), head.unpack("<Q")))
    start = head.pos + (-head.pos % alignment)
    out = {}
    for name, dims, kind, offset in infos:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        numel = int(np.prod(dims, dtype=np.int64))
        out[name] = Tensor(name, GGMLQuantizationType(kind).name, tuple(dims), start + offset, numel // block * size,
                           {"type": kind})
        if out[name].offset + out[name].nbytes > source.size:
            raise DownloadError(f"{source.name}: tensor {name!r} extends past the end of the file")
    return out, {"version": version, "n_kv": n_kv, "metadata": metadata, "alignment": alignment}


def _gguf_file(chosen: Sequence[Tensor], files: Sequence[Path], header: Mapping[str, Any], dest: Path) -> None:
    """A GGUF file of ``chosen`` (their bytes in ``files``) with the original's metadata, version and alignment."""
    align = header["alignment"]
    infos, at = b"", 0
    for t in chosen:
        name = t.name.encode("utf-8")
        infos += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(t.shape))
        infos += b"".join(struct.pack("<Q", d) for d in t.shape) + struct.pack("<IQ", t.info["type"], at)
        at += t.nbytes + (-t.nbytes % align)
    text = b"GGUF" + struct.pack("<IQQ", header["version"], len(chosen), header["n_kv"]) + header["metadata"] + infos
    with open(dest, "wb") as out:
        out.write(text + b"\0" * (-len(text) % align))
        for t, part in zip(chosen, files, strict=True):
            with open(part, "rb") as f:
                while block := f.read(BLOCK):
                    out.write(block)
            out.write(b"\0" * (-t.nbytes % align))


def checkpoint_format(name: str, source: Source) -> str:
    """``safetensors``, ``gguf``, ``torch-zip``, ``torch-legacy`` or ``npz``, from the name and the first bytes."""
    if name.endswith(".safetensors"):
        return "safetensors"
    if name.endswith(".npz"):
        return "npz"
    if name.endswith(".gguf"):
        return "gguf"
    return "torch-zip" if source.read(0, 4) == b"PK\x03\x04" else "torch-legacy"


def list_tensors(name: str, source: Source, keys: Sequence[str] | None = None) -> dict[str, Tensor]:
    """Every tensor of a checkpoint by name, and where the bytes of ``keys`` (None: all) lie; nothing but headers
    is read (locating a zip member costs a read of its local header, so only those asked for are located)."""
    fmt = checkpoint_format(name, source)
    try:
        if fmt == "safetensors":
            return safetensors_tensors(source)[0]
        if fmt == "gguf":
            return gguf_tensors(source)[0]
        if fmt == "npz":
            return npz_tensors(source, keys)
        return torch_zip_tensors(source, keys) if fmt == "torch-zip" else torch_legacy_tensors(source)
    except (zipfile.BadZipFile, pickle.UnpicklingError, EOFError, struct.error, ValueError, KeyError) as err:
        raise DownloadError(f"{name}: unreadable {fmt} checkpoint ({failure_reason(err)})") from None


def _array(tensor: Tensor, data: bytes) -> Any:
    """A tensor's bytes as a numpy array (torch for bfloat16, which numpy lacks) of its shape and strides."""
    if tensor.dtype == "bfloat16":
        import torch

        flat = torch.frombuffer(bytearray(data), dtype=torch.bfloat16)
        stride = tensor.info.get("stride") or tuple(int(np.prod(tensor.shape[i + 1:])) for i in
                                                     range(len(tensor.shape)))
        return flat.as_strided(tensor.shape, stride).contiguous()
    dtype = np.dtype(tensor.dtype)
    flat = np.frombuffer(data, dtype)
    if "stride" in tensor.info:
        strides = tuple(s * dtype.itemsize for s in tensor.info["stride"])
        return np.lib.stride_tricks.as_strided(flat, tensor.shape, strides).copy()
    order = "F" if tensor.info.get("fortran") else "C"
    return flat.reshape(tensor.shape, order=order)


def extract_head(name: str, source: Source, keys: Sequence[str], dest: Path, parts: Path) -> dict[str, Any]:
    """Write ``dest``: a file of the checkpoint's own format holding only ``keys``, their bytes read by range
    (through part files under ``parts``, resumed after an interrupted run); return what was read."""
    fmt = checkpoint_format(name, source)
    tensors, header = list_tensors(name, source, keys), {}
    if fmt == "gguf":
        header = gguf_tensors(source)[1]  # read from the cache: what writing the file back needs
    chosen = [tensors[k] for k in keys]
    tag = (getattr(source, "etag", None) or f"{source.size}").replace("/", "_")
    files = [source.fetch(t.offset, t.nbytes, parts / f"{tag}.{t.offset}-{t.nbytes}.part") for t in chosen]
    dest.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "safetensors":
        header, at = {}, 0
        for t in chosen:
            code = next(c for c, (d, _) in _ST_DTYPES.items() if d == t.dtype)
            header[t.name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [at, at + t.nbytes]}
            at += t.nbytes
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(dest, "wb") as out:
            out.write(struct.pack("<Q", len(text)) + text)
            for part in files:
                with open(part, "rb") as f:
                    while block := f.read(BLOCK):
                        out.write(block)
    elif fmt == "gguf":
        _gguf_file(chosen, files, header, dest)
    else:
        arrays = {t.name: _array(t, part.read_bytes()) for t, part in zip(chosen, files, strict=True)}
        if fmt == "npz":
            with open(dest, "wb") as out:
                np.savez(out, **arrays)
        else:
            import torch

            torch.save({k: torch.as_tensor(v) for k, v in arrays.items()}, dest)
    for part in files:
        part.unlink()
    return {"format": fmt, "tensors": {t.name: {"dtype": t.dtype, "shape": list(t.shape), "bytes": t.nbytes}
                                       for t in chosen}, **source.record()}


def part_dir(dest: str | os.PathLike) -> Path:
    """Where the ranges of ``dest``'s download wait between runs: a hidden directory beside it."""
    dest = Path(dest)
    return dest.parent / f".{dest.name}.parts"
