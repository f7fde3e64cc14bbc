"""Debian packages tagged with debtags: the real multi-label text dataset of the offline default.

Each example is one binary package: text = package name, short and long description; labels = its debtags
(``Tag`` field, e.g. ``interface::commandline``). The records come from apt's own lists (a package registry is
the only network offline), never from a hard-coded mirror: ``apt-get -o Acquire::Languages=en update`` fetches
``*_Packages`` (with ``Tag`` and ``Description-md5``) and ``*_Translation-en`` (the long ``Description-en`` keyed by
the same md5), and ``/usr/lib/apt/apt-helper cat-file`` decompresses them.

Many systems lack apt or the Tag field (Ubuntu), so the package ships a snapshot built here
(``argmaxable/data/debtags.parquet``: package, text, tags, split) with its provenance (distribution, release
date, list hashes) in ``debtags.meta.json``; the default build reads it. Provenance names each list by its path
in the archive (``debian/dists/bookworm/main/binary-amd64/Packages``), never by the host it came from: apt's
local file names start with the host, which :func:`archive_path` drops. Rebuild it with
:func:`make_snapshot` (rule ``make_debtags_snapshot``).

Config fields read: ``source`` ("snapshot" or "apt"), ``min_label_freq``, ``num_labels``,
``max_active_labels``, ``train_size``/``dev_size``/``test_size`` (caps on the snapshot's splits), ``seed``.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from argmaxable.multilabel.datasets.builder import Loaded, MissingDataError
from argmaxable.multilabel.datasets.schema import DatasetConfig
from argmaxable.multilabel.datasets.splits import covering_split, frequent_labels
from argmaxable.provenance import atomic_path, code_version, file_sha256, write_json

APT_LISTS = Path("/var/lib/apt/lists")
APT_HELPER = "/usr/lib/apt/apt-helper"
SNAPSHOT = Path(__file__).resolve().parents[2] / "data" / "debtags.parquet"
# Snapshot split, in the proportions of the thesis's BioASQ splits (100k/5k/10k, Table A.4): test and dev
# of 10% and 5% of the ~30k tagged packages, the rest train; label-covering over tags on >= 5 packages
# (the BioASQ frequency threshold, §4.1.2), so every such tag occurs in both train and test.
SNAPSHOT_SIZES: dict[str, int | None] = {"test": 3000, "dev": 1500, "train": None}
SNAPSHOT_MIN_FREQ = 5
SNAPSHOT_SEED = 0


def _cat(path: Path) -> str:
    """Text of an apt list file, decompressed by apt's own helper (or by Python where apt is absent)."""
    if Path(APT_HELPER).exists():
        out = subprocess.run([APT_HELPER, "cat-file", str(path)], capture_output=True, check=True)
        return out.stdout.decode("utf-8", errors="replace")
    opener = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}.get(path.suffix, open)
    if path.suffix == ".lz4":
        raise MissingDataError(f"{path} is lz4-compressed and {APT_HELPER} is absent; use the shipped snapshot")
    with opener(path, "rb") as fh:
        return fh.read().decode("utf-8", errors="replace")


def parse_deb822(text: str) -> Iterator[dict[str, str]]:
    """Stanzas of a Debian control-format file; continuation lines are kept, joined by newlines."""
    record: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if not line.strip():
            if record:
                yield record
            record, key = {}, None
        elif line[0] in " \t" and key is not None:
            record[key] += "\n" + line
        elif ":" in line:
            key, value = line.split(":", 1)
            record[key] = value.strip()
    if record:
        yield record


def _long_description(desc: str) -> str:
    """Short line plus long description of a Description(-en) field, with Debian's ' .' as blank lines."""
    first, *rest = desc.split("\n")
    body = ["" if ln.strip() == "." else ln[1:] if ln.startswith(" ") else ln for ln in rest]
    return "\n".join([first.strip(), *body]).strip()


def archive_path(list_file: str) -> str:
    """Path in the archive of an apt list file, without the host apt fetched it from.

    apt names a list by its URI with the scheme dropped, ``/`` turned into ``_`` and ``_`` escaped as ``%5f``
    (``<host>_debian_dists_bookworm_InRelease``); the text before the first ``_`` is the host.

    >>> archive_path("host.example_debian_dists_bookworm_main_binary-amd64_Packages.lz4")
    'debian/dists/bookworm/main/binary-amd64/Packages.lz4'
    """
    path = list_file.split("_", 1)[1] if "_" in list_file else list_file
    return path.replace("_", "/").replace("%5f", "_")


def _release_info(lists_dir: Path) -> list[dict[str, str]]:
    """Origin, suite, version and date of each release whose lists were read (from its InRelease file)."""
    keep = ("Origin", "Label", "Suite", "Codename", "Version", "Date")
    out = []
    for path in sorted(lists_dir.glob("*InRelease")) + sorted(lists_dir.glob("*_Release")):
        text = path.read_text(errors="replace")
        fields = next(parse_deb822(text.split("\n\n", 1)[-1] if text.startswith("-----BEGIN") else text), {})
        release = {k: fields[k] for k in keep if k in fields}
        out.append({"file": archive_path(path.name), "sha256": file_sha256(path), **release})
    return out


def read_apt_lists(lists_dir: Path = APT_LISTS) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Tagged packages from apt lists: a table (package, text, tags) and its provenance.

    Parameters
    ----------
    lists_dir : path, default /var/lib/apt/lists
        Directory holding ``*_Packages*`` and ``*_Translation-en*`` files (run
        ``apt-get -o Acquire::Languages=en update`` first to fetch the English descriptions).

    Returns
    -------
    (pandas.DataFrame, dict)
        One row per tagged package (the first record of a package in list-file name order wins), sorted by
        package name; and the provenance (release info, list files with SHA-256, counts).
    """
    lists_dir = Path(lists_dir)
    packages = sorted(p for p in lists_dir.glob("*_Packages*") if p.is_file() and "diff" not in p.name)
    translations = sorted(p for p in lists_dir.glob("*_Translation-en*") if p.is_file())
    if not packages:
        raise MissingDataError(
            f"no *_Packages lists in {lists_dir}; on Debian run `apt-get -o Acquire::Languages=en update` "
            "as root, or use the shipped snapshot (datasets.debtags.source=snapshot)"
        )
    long_desc: dict[str, str] = {}
    for path in translations:
        for rec in parse_deb822(_cat(path)):
            if "Description-md5" in rec and "Description-en" in rec:
                long_desc.setdefault(rec["Description-md5"], _long_description(rec["Description-en"]))
    rows: dict[str, dict[str, Any]] = {}
    translated = 0
    for path in packages:
        for rec in parse_deb822(_cat(path)):
            name, tags = rec.get("Package"), rec.get("Tag")
            if not name or not tags or name in rows:
                continue
            md5 = rec.get("Description-md5", "")
            translated += md5 in long_desc
            desc = long_desc[md5] if md5 in long_desc else _long_description(rec.get("Description", ""))
            tag_list = sorted({t.strip() for t in tags.replace("\n", " ").split(",") if t.strip()})
            rows[name] = {"package": name, "text": f"{name}\n{desc}", "tags": tag_list}
    df = pd.DataFrame(sorted(rows.values(), key=lambda r: r["package"]), columns=["package", "text", "tags"])
    info = {
        "releases": _release_info(lists_dir),
        "lists": {archive_path(p.name): file_sha256(p) for p in packages + translations},
        "n_packages": len(df),
        "n_with_long_description": translated,
    }
    return df, info


def split_packages(df: pd.DataFrame, *, seed: int = SNAPSHOT_SEED) -> pd.Series:
    """The snapshot's label-covering split of all packages (see :data:`SNAPSHOT_SIZES`)."""
    vocab = {t: i for i, t in enumerate(frequent_labels(df["tags"], min_freq=SNAPSHOT_MIN_FREQ))}
    encoded = [[vocab[t] for t in tags if t in vocab] for tags in df["tags"]]
    return pd.Series(covering_split(encoded, SNAPSHOT_SIZES, seed=seed), index=df.index, name="split")


def make_snapshot(out: Path = SNAPSHOT, lists_dir: Path = APT_LISTS) -> None:
    """Write the debtags snapshot (zstd parquet) and its provenance ``<stem>.meta.json`` beside it.

    Parameters
    ----------
    out : path, default the package's ``data/debtags.parquet``
    lists_dir : path, default /var/lib/apt/lists
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    df, info = read_apt_lists(lists_dir)
    df["split"] = split_packages(df)
    out = Path(out)
    with atomic_path(out) as tmp:
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp, compression="zstd",
                       compression_level=19)
    meta = {
        **info,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "code_version": code_version(),
        "split": {"sizes": SNAPSHOT_SIZES, "min_freq": SNAPSHOT_MIN_FREQ, "seed": SNAPSHOT_SEED,
                  "counts": df["split"].value_counts().to_dict()},
        "sha256": file_sha256(out),
    }
    write_json(meta, out.with_suffix(".meta.json"))
    for path in (out, out.with_suffix(".meta.json")):
        path.chmod(0o644)  # shipped package data: readable by everyone (temporary files are created 0600)


def load_snapshot(path: Path = SNAPSHOT) -> pd.DataFrame:
    """The shipped snapshot (package, text, tags, split), after checking it against its recorded hash."""
    path = Path(path)
    meta_path = path.with_suffix(".meta.json")
    if not path.is_file() or not meta_path.is_file():
        raise MissingDataError(f"debtags snapshot {path} (or its .meta.json) is missing; rebuild it with rule "
                               "make_debtags_snapshot on a Debian machine")
    recorded = json.loads(meta_path.read_text())["sha256"]
    if file_sha256(path) != recorded:
        raise ValueError(f"{path} does not match the sha256 in {meta_path.name}; rebuild the snapshot")
    return pd.read_parquet(path)


def load(cfg: DatasetConfig, data_root: Path) -> Loaded:
    """Debtags examples in the snapshot's splits, capped to the configured sizes (label-covering)."""
    if cfg.source == "snapshot":
        df = load_snapshot()
        inputs, info = [SNAPSHOT], json.loads(SNAPSHOT.with_suffix(".meta.json").read_text())
    elif cfg.source == "apt":
        df, info = read_apt_lists(Path(cfg.path) if cfg.path else APT_LISTS)
        df["split"] = split_packages(df)
        inputs = []
    else:
        raise ValueError(f"datasets.debtags.source must be 'snapshot' or 'apt'; got {cfg.source!r}")
    vocab = set(frequent_labels(df["tags"], min_freq=cfg.min_label_freq, num_labels=cfg.num_labels))
    df = df.assign(id=df["package"], labels=[[t for t in tags if t in vocab] for tags in df["tags"]])
    if cfg.max_active_labels is not None:
        df = df[df["labels"].map(len) <= cfg.max_active_labels]
    sizes = {"train": cfg.train_size, "dev": cfg.dev_size, "test": cfg.test_size}
    ids = {t: i for i, t in enumerate(sorted(vocab))}
    splits = {}
    for split, size in sizes.items():
        part = df[df["split"] == split].reset_index(drop=True)
        if size is not None:
            encoded = [[ids[t] for t in tags] for tags in part["labels"]]
            cover = (split,) if split in ("train", "test") else ()
            part = part[covering_split(encoded, {split: size}, cover=cover, seed=cfg.seed) == split]
        splits[split] = part[["id", "text", "labels"]]
    return Loaded(splits=splits, covering=True, inputs=inputs, info=info)

