"""A model file's bytes by range, whether it lies on disk or on a hub: what every parser of a model file reads.

Each format's parser (:mod:`argmaxable.detect.formats`) reads through a :class:`Source`: :class:`Local` for a file
on disk, :class:`argmaxable.detect.remote.Remote` for one a server sends by HTTP ``Range``. The local readers and
the head-only fetch are therefore the same code, and a damaged or hostile file gives the same one line on both
paths. A source refuses any read that does not lie inside the file, and any single read larger than
:data:`MAX_READ` that no parser asked for by a size it had bounded itself (:meth:`Source.read_exact` with
``bounded=True``), so no length a file claims is allocated or fetched before it is checked.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np

BLOCK = 1 << 20
MAX_READ = 64 << 20  # the largest read a header's own numbers may ask for (zip directories, pickles, JSON)


class WeightsError(ValueError):
    """A model file that cannot be read or lacks the requested tensor; the message is one line."""


def first_line(err: BaseException) -> str:
    """An exception's message as one line (its type's name when it has none)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class Source:
    """A file's bytes by range: ``name`` (what messages call it), ``size``, ``read(offset, length)``, and
    ``fetch(offset, length, part)`` (a large range, into a part file). ``fetched`` counts the bytes read."""

    name: str
    size: int
    fetched: int = 0

    def read(self, offset: int, length: int, ahead: bool = True) -> bytes:
        """Bytes ``offset:offset+length`` (fewer at the end of the file); ``ahead``: a remote source may fetch
        more around them (headers are read in many small pieces)."""
        raise NotImplementedError

    def read_exact(self, offset: int, length: int, what: str, bounded: bool = False, ahead: bool = False) -> bytes:
        """Exactly ``length`` bytes at ``offset`` for ``what``, or one line saying the file is truncated there.
        ``bounded``: the caller has checked ``length`` against a limit of its own (a tensor's bytes against the
        file), else it may be at most :data:`MAX_READ`; ``ahead``: as for :meth:`read`."""
        self.check_span(offset, length, what)
        if not bounded and length > MAX_READ:
            raise WeightsError(f"{self.name!r}: {what} claims {length} bytes, more than the {MAX_READ >> 20} MiB "
                               "a header may take: damaged or not a model file")
        data = self.read(offset, length, ahead=ahead)
        if len(data) != length:
            raise WeightsError(f"{self.name!r} is truncated: {what} stops after {len(data)} of {length} bytes")
        return data

    def check_span(self, offset: int, length: int, what: str) -> None:
        """Refuse, in one line, a span that does not lie inside the file."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise WeightsError(f"{self.name!r} is truncated or damaged: {what} claims bytes {offset}..{offset + length}"
                               f" of a {self.size}-byte file")

    def array(self, offset: int, length: int, what: str) -> np.ndarray:
        """The ``length`` bytes at ``offset`` as a writeable uint8 array (a tensor's data, already bounded)."""
        return np.frombuffer(bytearray(self.read_exact(offset, length, what, bounded=True)), np.uint8)

    def fetch(self, offset: int, length: int, part: Path) -> Path:
        """Bytes ``offset:offset+length`` into ``part`` (appending to what it holds already); return ``part``."""
        part.parent.mkdir(parents=True, exist_ok=True)
        have = part.stat().st_size if part.exists() else 0
        if have > length:
            part.unlink()
            have = 0
        with open(part, "ab") as out:
            while have < length:
                block = self.read_exact(offset + have, min(BLOCK << 4, length - have), "a tensor", bounded=True)
                out.write(block)
                have += len(block)
        return part

    def record(self) -> dict[str, Any]:
        return {"size": self.size, "fetched": self.fetched}


class Local(Source):
    """A file on disk (a weights file, or a pre-filled hub cache read offline); messages name it as given, or as
    ``name`` (a part file holding some bytes of a file a server holds)."""

    def __init__(self, path: str | os.PathLike, name: str | None = None):
        self.path = Path(path)
        if not self.path.is_file():
            raise WeightsError(f"{str(path)!r} does not exist")
        self.name, self.size, self.fetched = name or str(path), self.path.stat().st_size, 0

    def read(self, offset: int, length: int, ahead: bool = True) -> bytes:
        length = max(0, min(length, self.size - offset))
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read(length)
        self.fetched += len(data)
        return data

    def array(self, offset: int, length: int, what: str) -> np.ndarray:
        self.check_span(offset, length, what)
        out = np.empty(length, np.uint8)
        with open(self.path, "rb") as f:
            f.seek(offset)
            got = f.readinto(memoryview(out))
        if got != length:
            raise WeightsError(f"{self.name!r} is truncated: {what} stops after {got} of {length} bytes")
        self.fetched += got
        return out


class Reader(io.RawIOBase):
    """A seekable file object over a :class:`Source` (for zipfile), each read bounded by the file and by
    :data:`MAX_READ` (a zip directory that claims more is refused before anything is read)."""

    def __init__(self, source: Source):
        self.source, self.pos = source, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.source.size + offset
        if pos < 0:
            raise OSError(f"seek to byte {pos}")  # as a file does: zipfile then finds no zip directory
        self.pos = pos
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, size: int = -1) -> bytes:
        left = max(0, self.source.size - self.pos)
        size = left if size is None or size < 0 else min(size, left)
        data = self.source.read_exact(self.pos, size, "a zip record", ahead=True)
        self.pos += len(data)
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)
