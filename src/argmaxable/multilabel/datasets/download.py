"""Fetch a multi-label dataset's files into ``data/<name>/`` with a manifest (rule ``download_dataset``).

A dataset's ``download`` block (config/datasets/<name>.yaml) says what to fetch:

- ``files``: ``{local path: URL}`` (``http(s)://`` or ``file://``);
- ``checksums``: URL of a ``sha256  path`` list published beside the files (PhysioNet's ``SHA256SUMS.txt``):
  every fetched file it names must match;
- ``credentials``: ``physionet`` (HTTP basic auth from ``PHYSIONET_USERNAME``/``PHYSIONET_PASSWORD``) or
  ``bioasq`` (the file's URL from ``BIOASQ_URL``, the token from ``BIOASQ_TOKEN``); absent credentials stop
  the job with one line saying how to get access;
- ``images`` (openimages): URL template with ``{split}`` and ``{image_id}``; after the label CSVs, the images
  of exactly the splits the build uses are fetched to ``images/<ImageID>.jpg`` (``workers`` at once);
- ``unpack``: archives to extract after fetching (then deleted).

Every file goes through :func:`argmaxable.fetch.fetch_url` (temporary name renamed when complete,
retries, resume). Datasets run to 10^5 files and tens of GB, so files already present are kept and a rerun
fetches only what is missing; ``manifest.json`` (sizes and SHA-256 of every file) is written last, so its
presence marks a complete download.
"""

from __future__ import annotations

import contextlib
import os
import urllib.request
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from argmaxable.fetch import MANIFEST, DownloadError, fetch_url, inside, unpack, write_manifest
from argmaxable.multilabel.datasets.schema import DatasetConfig
from argmaxable.provenance import file_sha256

ACCESS = {  # credentials kind -> (environment variables, how to get them)
    "physionet": (("PHYSIONET_USERNAME", "PHYSIONET_PASSWORD"),
                  "MIMIC-III needs PhysioNet credentialed access: request it at "
                  "https://physionet.org/content/mimiciii/ (training course and data use agreement), then set "
                  "PHYSIONET_USERNAME and PHYSIONET_PASSWORD"),
    "bioasq": (("BIOASQ_URL", "BIOASQ_TOKEN"),
               "BioASQ needs registration: register for Task A at http://participants-area.bioasq.org/, then set "
               "BIOASQ_URL to the link of the Training v.2021 (txt) file allMeSH_2021.zip and BIOASQ_TOKEN to "
               "your token"),
}


def _credentials(kind: str) -> dict[str, str]:
    """The environment variables of a credentials kind; :class:`DownloadError` naming how to get them."""
    if not kind:
        return {}
    if kind not in ACCESS:
        raise DownloadError(f"unknown credentials {kind!r}; use one of {sorted(ACCESS)}")
    names, how = ACCESS[kind]
    values = {name: os.environ.get(name, "") for name in names}
    if not all(values.values()):
        absent = [name for name, value in values.items() if not value]
        raise DownloadError(f"{', '.join(absent)} not set. {how}")
    return values


@contextlib.contextmanager
def _authenticated(kind: str, secrets: Mapping[str, str], urls: list[str]) -> Iterator[None]:
    """Make every urllib request of the block carry the credentials (fetch_url opens URLs with urllib)."""
    handlers: list[Any] = []
    headers: list[tuple[str, str]] = []
    if kind == "physionet":
        passwords = urllib.request.HTTPPasswordMgrWithDefaultRealm()
        for url in urls:
            passwords.add_password(None, url, secrets["PHYSIONET_USERNAME"], secrets["PHYSIONET_PASSWORD"])
        handlers.append(urllib.request.HTTPBasicAuthHandler(passwords))
    elif kind == "bioasq" and "{token}" not in secrets["BIOASQ_URL"]:
        headers.append(("Authorization", f"Bearer {secrets['BIOASQ_TOKEN']}"))
    opener = urllib.request.build_opener(*handlers)
    opener.addheaders = [*opener.addheaders, *headers]
    urllib.request.install_opener(opener)
    try:
        yield
    finally:
        urllib.request.install_opener(None)  # back to urllib's default opener


def _sha256_list(url: str, into: Path) -> dict[str, str]:
    """A published ``sha256  path`` list, fetched beside the files and kept with them."""
    path = fetch_url(url, inside(into, Path(url.rsplit("/", 1)[-1]).name, "checksums file"))
    sums = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.strip().lstrip("*")] = digest.lower()
    return sums


def _fetch(url: str, dest: Path, sha256: str = "") -> None:
    """One file, unless a complete copy (matching ``sha256`` when known) is already there."""
    if dest.is_file() and (not sha256 or file_sha256(dest) == sha256):
        return
    fetch_url(url, dest, sha256=sha256)


def _fetch_images(cfg: DatasetConfig, root: Path, template: str, workers: int) -> int:
    """The images of the splits the openimages build uses; returns how many there are."""
    from argmaxable.multilabel.datasets import openimages

    splits = openimages.select(cfg, root)
    jobs = [(template.format(split=openimages.IMAGE_SPLITS[split], image_id=i),
             inside(root, os.path.relpath(p, root), "image path"))
            for split, df in splits.items() for i, p in zip(df["id"], df["image_path"], strict=True)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda job: _fetch(*job), jobs))  # list(): re-raises the first failure
    return len(jobs)


def download_dataset(cfg: DatasetConfig, root: str | os.PathLike) -> dict[str, Any]:
    """Fetch what ``cfg.download`` lists into ``root`` and write ``root/manifest.json`` last.

    Parameters
    ----------
    cfg : DatasetConfig
        The dataset's config; its ``download`` block is described in this module's docstring.
    root : path
        The dataset's directory, ``data/<name>`` (what the build reads).

    Returns
    -------
    dict
        The manifest: dataset, sources, files (size and sha256 per relative path).

    Raises
    ------
    DownloadError
        One line: absent credentials (and how to get them), a failed or mismatching file (and that the
        machine may be offline). Files completed before the failure stay for the next run; no manifest.
    """
    spec = dict(cfg.download)
    root = Path(root)
    kind = spec.get("credentials", "")
    secrets = _credentials(kind)
    files = dict(spec.get("files") or {})
    if kind == "bioasq":  # the registered user's link, with the token in it or sent as a header
        files = {name: secrets["BIOASQ_URL"].replace("{token}", secrets["BIOASQ_TOKEN"]) for name in files}
    if not files and not spec.get("images"):
        raise DownloadError(f"dataset {cfg.name!r} has nothing to download: its download block lists no files")
    (root / MANIFEST).unlink(missing_ok=True)  # a manifest only ever describes a complete download
    try:
        with _authenticated(kind, secrets, [*files.values(), spec.get("checksums", "")]):
            sums = _sha256_list(spec["checksums"], root) if spec.get("checksums") else {}
            for name, url in files.items():
                _fetch(url, inside(root, name, "download.files"), sums.get(name, ""))
            for name in spec.get("unpack") or []:
                unpack(inside(root, name, "download.unpack"), root)
                (root / name).unlink()
            images = _fetch_images(cfg, root, spec["images"], int(spec.get("workers", 16))) if spec.get("images") else 0
    except DownloadError as err:
        raise DownloadError(f"cannot download dataset {cfg.name!r}: {err} (this machine may be offline, or the "
                            "credentials may lack access)") from None
    return write_manifest(root, dataset=cfg.name, sources=files, images=images)
