"""Fetch inputs (model weights, vocabularies, data files) into a local directory, atomically, with a manifest.

Shared by the families that download (:mod:`argmaxable.detect.download` for models,
:mod:`argmaxable.multilabel.datasets.download` for data sets). Every fetch writes under a temporary name
or into a temporary directory beside its destination and renames it into place only when everything arrived
and matched its checksum, so a failed or interrupted download leaves nothing behind. The destination then
holds ``manifest.json``: source, revision, and size and SHA-256 of every file.

- :func:`mirrored`: a URL rewritten by the configured mirrors (URL prefix -> replacement);
- :func:`fetch_url`: one URL (http(s) or file) with a timeout, retries with back-off, resume by HTTP
  ``Range`` after a dropped connection, a SHA-256 check, and a temporary name until complete;
- :func:`staging_dir`: a temporary directory renamed onto the destination on success;
- :func:`unpack`: a zip or tar archive extracted, refusing members that would land outside;
- :func:`inside`: a path built from a config value, refused unless it stays inside its root;
- :func:`write_manifest`: the manifest of a directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from argmaxable.provenance import file_sha256, removed_on_termination

T = TypeVar("T")
MANIFEST = "manifest.json"
BLOCK = 1 << 20  # bytes read per chunk: 1 MiB keeps memory flat for files of many GB
RETRIES = 5  # further attempts after a transient failure (connection errors, timeouts, HTTP 5xx, 408, 429)
BACKOFF = 1.0  # seconds before the first retry, doubled after each (read at each retry: tests shorten it)


class DownloadError(RuntimeError):
    """A fetch that failed; the message is one line naming what was fetched, from where, and why."""


class Refused(DownloadError):
    """The server answered, and no retry or other network changes the answer (no such repo, revision or file, a
    gated repo, bytes that differ from their checksum)."""


def mirrored(url: str, mirrors: dict[str, str]) -> str:
    """``url`` with its longest prefix among ``mirrors`` (prefix -> replacement) replaced: how users behind an
    institutional mirror, and the tests' local server, reach the URLs the configs name.

    Examples
    --------
    >>> mirrored("https://data.statmt.org/wmt17_systems/en-de/model.npz", {"https://data.statmt.org/": "http://m/s/"})
    'http://m/s/wmt17_systems/en-de/model.npz'
    """
    prefix = max((p for p in mirrors if url.startswith(p)), key=len, default=None)
    return url if prefix is None else mirrors[prefix] + url[len(prefix):]


def inside(root: str | os.PathLike, name: str | os.PathLike, what: str) -> Path:
    """``root / name``, refused in one line unless it stays inside ``root`` (no absolute path, no '..' that climbs
    out, no symlink that leads out): every path built from a config value or an archive member goes through it."""
    root, real = Path(root), Path(root).resolve()
    path = root / name
    if Path(name).is_absolute() or not path.resolve().is_relative_to(real) or path.resolve() == real:
        raise DownloadError(f"{what} {str(name)!r} is not a path inside {str(root)!r}: refused")
    return path


# ------------------------------------------------------------------------------------------------ URLs


def _permanent(err: Exception) -> bool:
    """Errors that a retry cannot fix: a missing file or a client error other than timeout/rate limit."""
    if isinstance(err, urllib.error.HTTPError):
        return 400 <= err.code < 500 and err.code not in (408, 429)
    reason = getattr(err, "reason", err)
    return isinstance(reason, (FileNotFoundError, PermissionError, IsADirectoryError))


def transient(err: Exception) -> bool:
    """A failure that a later attempt may not meet: a connection error or timeout, HTTP 5xx, 408 or 429."""
    if isinstance(err, urllib.error.HTTPError):
        return err.code >= 500 or err.code in (408, 429)
    return isinstance(err, (urllib.error.URLError, OSError)) and not _permanent(err)


def retrying(attempt: Callable[[], T], what: str, retries: int | None = None, backoff: float | None = None) -> T:
    """``attempt()``, tried again after each transient failure (:func:`transient`) with back-off: the one retry
    policy of every download. Other failures, and the last one, are one :class:`DownloadError` line naming
    ``what``; a DownloadError the attempt raises itself passes through."""
    retries = RETRIES if retries is None else retries
    for i in range(retries + 1):
        try:
            return attempt()
        except DownloadError:
            raise
        except (urllib.error.URLError, OSError) as err:  # HTTP errors, timeouts, resets, DNS, refused connections
            if not transient(err) or i == retries:
                raise DownloadError(f"cannot download {what}: {failure_reason(err)}") from None
        time.sleep((BACKOFF if backoff is None else backoff) * 2 ** i)
    raise AssertionError("unreachable")


def failure_reason(err: Exception) -> str:
    """One line saying why a fetch failed."""
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP {err.code} {err.reason}"
    reason = getattr(err, "reason", None) or err
    text = str(reason).strip().splitlines()
    return text[0] if text else type(reason).__name__


def _fetch_rest(url: str, part: Path, timeout: float) -> None:
    """One attempt of :func:`fetch_url`: append to ``part`` the bytes of ``url`` it lacks (``Range``), or write the
    whole file when the server ignores the range; a connection that drops early raises ``ConnectionError``."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            resumed = have > 0 and getattr(response, "status", None) == 206
            length = response.headers.get("Content-Length")
            expected = (have if resumed else 0) + int(length) if length else None
            with open(part, "ab" if resumed else "wb") as out:
                while block := response.read(BLOCK):
                    out.write(block)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # nothing left to send: the partial file is complete
            return
        raise
    # http.client ends a chunked read quietly when the connection drops: compare the length
    if expected is not None and part.stat().st_size < expected:
        raise ConnectionError(f"connection closed after {part.stat().st_size} of {expected} bytes")


def fetch_url(url: str, dest: str | os.PathLike, *, sha256: str = "", retries: int | None = None,
              timeout: float = 60.0, backoff: float | None = None) -> Path:
    """Download ``url`` to ``dest``: temporary name until complete, resumed after dropped connections.

    Parameters
    ----------
    url : str
        An ``http(s)://`` or ``file://`` URL.
    dest : path
        Where the file ends up (its directory is created).
    sha256 : str, optional
        Expected SHA-256 (hex) of the whole file; a mismatch deletes the download and raises.
    retries : int, default :data:`RETRIES`
        Further attempts after a transient failure (timeout, reset connection, HTTP 5xx/408/429). Each
        attempt asks the server for the missing bytes only (``Range``); a server that ignores the
        request sends the whole file again, which then replaces the partial one.
    timeout : float, default 60
        Seconds without data before an attempt fails.
    backoff : float, default :data:`BACKOFF`
        Seconds before the first retry, doubled after each.

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    DownloadError
        Permanent failure (404, missing file), retries exhausted, or checksum mismatch; one line, nothing
        left behind.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.part")
    part.unlink(missing_ok=True)
    with removed_on_termination() as staged:
        staged.append(part)
        try:
            retrying(lambda: _fetch_rest(url, part, timeout), url, retries, backoff)
            if sha256:
                got = file_sha256(part)
                if got != sha256.lower():
                    raise DownloadError(f"{url} does not match its expected sha256 {sha256} (got {got})")
            os.replace(part, dest)
        finally:
            part.unlink(missing_ok=True)
    return dest


# ------------------------------------------------------------------------------------------- directories


@contextlib.contextmanager
def staging_dir(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``dest``; on success it replaces ``dest``, else it is removed.

    An existing ``dest`` (an old download, or the empty directory a workflow engine made for the outputs)
    is moved aside first and deleted once the new one is in place.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with removed_on_termination() as staged:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
        staged.append(tmp)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes the directory owner-only; downloads are for everyone
        try:
            yield tmp
            old = None
            if dest.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
                staged.append(old)
                os.replace(dest, old / dest.name)
            os.replace(tmp, dest)
            if old is not None:
                shutil.rmtree(old)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def unpack(archive: Path, into: Path) -> None:
    """Extract a .zip/.whl or a .tar(.gz/.bz2/.xz) archive into ``into``, refusing members that escape it."""
    root = into.resolve()
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                for name in zf.namelist():
                    inside(root, name, f"archive {archive.name}'s member")
                zf.extractall(into)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tar:
                tar.extractall(into, filter="data")  # the "data" filter rejects absolute paths, links out, devices
        else:
            raise DownloadError(f"{archive.name} is neither a zip nor a tar archive: set 'unpack: false'")
    except (zipfile.BadZipFile, tarfile.TarError, OSError) as err:
        raise DownloadError(f"cannot unpack {archive.name}: {failure_reason(err)}") from None


def manifest_files(root: Path) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of every file under ``root`` (the manifest itself excluded), by relative path."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)
    return {p.relative_to(root).as_posix(): {"size": p.stat().st_size, "sha256": file_sha256(p)} for p in files}


def write_manifest(root: str | os.PathLike, **record: Any) -> dict[str, Any]:
    """Write ``root/manifest.json``: ``record`` (source, revision, ...) plus the files found under ``root``."""
    root = Path(root)
    manifest = {**record, "files": manifest_files(root)}
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def read_manifest(root: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a downloaded directory, after checking that each file it lists is there with its size.

    Raises
    ------
    DownloadError
        No manifest (the download step has not run), or a listed file missing or of another size (the
        directory was changed after the download); sizes only: hashing GBs again would cost minutes.
    """
    root = Path(root)
    if not (root / MANIFEST).is_file():
        raise DownloadError(f"{root / MANIFEST} is missing: run the download step first (snakemake rule "
                            "download_model)")
    manifest = json.loads((root / MANIFEST).read_text())
    for rel, entry in manifest["files"].items():
        path = root / rel
        if not path.is_file() or path.stat().st_size != entry["size"]:
            raise DownloadError(f"{path} is missing or changed since it was downloaded: delete {root} and "
                                "download it again")
    return manifest
