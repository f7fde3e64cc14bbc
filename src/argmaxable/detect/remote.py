"""Read only the head of a checkpoint a server holds: byte ranges over HTTP, and a file of the head's tensors.

A checkpoint says in its header where each tensor lies, so the output layer of a 13 GB model is found and read
without the rest: :class:`Remote` is a :class:`~argmaxable.detect.source.Source` reading byte ranges over HTTP
(``Range``), the format's header is read by the same parser as a file on disk (:mod:`argmaxable.detect.formats`),
and :func:`extract_head` writes a file of the checkpoint's own format holding only the named tensors, their bytes
copied as stored (a GGUF file's header written back as it was around the tensors kept).

Every remote read is checked: the file's size, ETag and commit come from one ``HEAD`` (``X-Linked-Size``,
``X-Linked-Etag`` or ``ETag``, ``X-Repo-Commit``, as the hub sends them; redirects to another host lose the
``Authorization`` header, as huggingface_hub's do); each range must come back as ``206`` with the
``Content-Range`` asked for, the same ETag (``If-Range``: a file that changed comes back whole, which is refused)
and the length the header promises. Transient failures are retried as every download is
(:func:`argmaxable.fetch.retrying`), resuming a range from the bytes already received; large ranges are written to
part files that a later run resumes after the process was killed. A range cannot be checked against the whole
file's sha-256 (that needs the whole file): what is checked is the ETag the hub publishes, the lengths, and the
header's own consistency (its tensors inside the file, not overlapping; for safetensors, tiling the data exactly).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import struct
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from argmaxable.detect.formats import (
    SAFETENSORS_DTYPES,
    GGUFHeader,
    Tensor,
    checkpoint_format,
    gguf_header,
    list_tensors,
    stored_values,
)
from argmaxable.detect.source import BLOCK, Local, Source, WeightsError
from argmaxable.fetch import DownloadError, Refused, retrying

READ_AHEAD = 1 << 16  # bytes fetched around a small read (headers, pickles, zip directories)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are followed by :class:`Remote` itself: the hub's metadata is on the redirect response."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


_OPENER = urllib.request.build_opener(_NoRedirect)
MAX_REDIRECTS = 10


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
    retries: int | None = None  # default: the downloads' own (argmaxable.fetch.RETRIES)
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

    def _retrying(self, attempt):
        return retrying(attempt, self.url, self.retries)

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


def _gguf_file(chosen: Sequence[Tensor], files: Sequence[Path], header: GGUFHeader, dest: Path) -> None:
    """A GGUF file of ``chosen`` (their bytes in ``files``) with the original's metadata, version and alignment."""
    align = header.alignment
    infos, at = b"", 0
    for t in chosen:
        name = t.name.encode("utf-8")
        infos += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(t.shape))
        infos += b"".join(struct.pack("<Q", d) for d in t.shape) + struct.pack("<IQ", t.info["type"], at)
        at += t.nbytes + (-t.nbytes % align)
    text = b"GGUF" + struct.pack("<IQQ", header.version, len(chosen), header.n_kv) + header.metadata + infos
    with open(dest, "wb") as out:
        out.write(text + b"\0" * (-len(text) % align))
        for t, part in zip(chosen, files, strict=True):
            with open(part, "rb") as f:
                while block := f.read(BLOCK):
                    out.write(block)
            out.write(b"\0" * (-t.nbytes % align))


def tensors_of(name: str, source: Source, keys: Sequence[str] | None = None) -> dict[str, Tensor]:
    """:func:`argmaxable.detect.formats.list_tensors` of a file a server holds: a file its parser refuses is a
    :class:`~argmaxable.fetch.Refused` download, with the parser's own line."""
    try:
        return list_tensors(name, source, keys)
    except WeightsError as err:
        raise Refused(str(err)) from None


def _part_values(tensor: Tensor, part: Path, name: str) -> np.ndarray:
    """A tensor's stored values from the part file holding exactly its bytes (of the file a server calls
    ``name``); bytes that fail their check are a :class:`~argmaxable.fetch.Refused` download."""
    try:
        return stored_values(Local(part, name), dataclasses.replace(tensor, offset=0))
    except WeightsError as err:
        raise Refused(str(err)) from None


def gguf_of(source: Source) -> GGUFHeader:
    """The header of a GGUF file a server holds; a header its parser refuses is a :class:`~argmaxable.fetch.Refused`
    download, with the parser's line."""
    try:
        return gguf_header(source)
    except WeightsError as err:
        raise Refused(str(err)) from None


def extract_head(name: str, source: Source, keys: Sequence[str], dest: Path, parts: Path,
                 header: GGUFHeader | None = None) -> dict[str, Any]:
    """Write ``dest``: a file of the checkpoint's own format holding only ``keys``, their bytes read by range
    (through part files under ``parts``, resumed after an interrupted run); return what was read. ``header``: a
    GGUF file's header when the caller has read it already. A file its format's parser refuses, or one that
    stops inside a tensor asked for, is :class:`~argmaxable.fetch.Refused` with the parser's line."""
    fmt = checkpoint_format(name, source)
    if fmt == "gguf":
        header = gguf_of(source) if header is None else header
        try:
            header.require(source, keys)
        except WeightsError as err:
            raise Refused(str(err)) from None
    tensors = header.tensors if header is not None else tensors_of(name, source, keys)
    chosen = [tensors[k] for k in keys]
    tag = (getattr(source, "etag", None) or f"{source.size}").replace("/", "_")
    files = [source.fetch(t.offset, t.nbytes, parts / f"{tag}.{t.offset}-{t.nbytes}.part") for t in chosen]
    dest.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "safetensors":
        layout, at = {}, 0
        for t in chosen:
            code = next(c for c, (d, _) in SAFETENSORS_DTYPES.items() if d == t.dtype)
            layout[t.name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [at, at + t.nbytes]}
            at += t.nbytes
        text = json.dumps(layout, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(dest, "wb") as out:
            out.write(struct.pack("<Q", len(text)) + text)
            for part in files:
                with open(part, "rb") as f:
                    while block := f.read(BLOCK):
                        out.write(block)
    elif header is not None:
        _gguf_file(chosen, files, header, dest)
    elif fmt == "npz":
        arrays = {t.name: _part_values(t, part, source.name) for t, part in zip(chosen, files, strict=True)}
        with open(dest, "wb") as out:
            np.savez(out, **arrays)
    else:
        import torch

        def as_torch(t: Tensor, part: Path):
            values = torch.from_numpy(_part_values(t, part, source.name))
            return values.view(torch.bfloat16) if t.dtype == "bfloat16" else values

        state = {t.name: as_torch(t, part) for t, part in zip(chosen, files, strict=True)}
        torch.save(state, dest)
    for part in files:
        part.unlink()
    return {"format": fmt, "tensors": {t.name: {"dtype": t.dtype, "shape": list(t.shape), "bytes": t.nbytes}
                                       for t in chosen}, **source.record()}


def part_dir(dest: str | os.PathLike) -> Path:
    """Where the ranges of ``dest``'s download wait between runs: a hidden directory beside it."""
    dest = Path(dest)
    return dest.parent / f".{dest.name}.parts"
