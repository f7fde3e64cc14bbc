"""Build a multi-label dataset into an Arrow ``DatasetDict`` with its label vocabulary and statistics.

Every source module (debtags, mimic3, bioasq, openimages) exposes ``load(cfg, data_root) -> Loaded``: split
tables whose ``labels`` column holds label names. This module turns label names into ids, checks the split
invariants, and writes, atomically, into one directory:

- the ``DatasetDict`` (``save_to_disk``) with splits train/dev/test and columns id, text (or image_path), labels;
- ``labels.json``: label names, index = label id (most frequent in train first);
- ``stats.json``: n, k (max active labels over train), mean active labels, split sizes, histograms;
- ``active_labels.png``/``.pdf``: histogram of active labels per train example (thesis Fig. 5.1).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from argmaxable.multilabel.datasets.schema import DatasetConfig
from argmaxable.multilabel.datasets.splits import frequent_labels
from argmaxable.provenance import metadata, save_figure, sidecar, write_json

SOURCES = ("debtags", "mimic3", "bioasq", "openimages")
SPLITS = ("train", "dev", "test")


class MissingDataError(FileNotFoundError):
    """An input file of a dataset is absent; the message says which file goes where and how to get it."""


@dataclass
class Loaded:
    """What a source hands to :func:`build`.

    ``splits`` maps train/dev/test to tables with columns ``id`` (str), ``text`` or ``image_path`` (str) and
    ``labels`` (list of label names). With ``covering`` the vocabulary is the labels seen in train and other
    labels are removed from dev/test (BioASQ-style); without it, the vocabulary is the union over the splits
    (MIMIC-III's given CAML splits). ``inputs`` are hashed into the provenance; ``info`` is stored verbatim.
    """

    splits: dict[str, pd.DataFrame]
    covering: bool
    inputs: list[Path] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def _source(name: str):
    if name not in SOURCES:
        raise ValueError(f"dataset name must be one of {list(SOURCES)}; got {name!r} (config/datasets/*.yaml)")
    return importlib.import_module(f"argmaxable.multilabel.datasets.{name}")


def encoder_files(config: Any, name: str) -> list[tuple[str, str]]:
    """(path, URL) of each weights file that a multi-label run on dataset ``name`` reads (its encoder's
    ``checkpoint``), the URL being where the dataset's download block fetches it from ("" when it does not).

    ``config`` is the whole composed config (plain containers) or None (then nothing is required).
    """
    if not isinstance(config, dict) or not config.get("multilabel", {}).get("enabled"):
        return []
    run = config["multilabel"].get("runs", {}).get(name)
    checkpoint = run["encoder"].get("checkpoint") if run else ""
    files = config.get("datasets", {}).get(name, {}).get("download", {}).get("files") or {}
    return [(checkpoint, str(files.get(Path(checkpoint).name, "")))] if checkpoint else []


def _check_encoder_files(config: Any, name: str) -> None:
    """A missing encoder checkpoint stops the build (hours before training would), in one line."""
    for path, url in encoder_files(config, name):
        if not Path(path).is_file():
            where = f"Rule download_dataset fetches it with the dataset's files (from {url}), or download it and " \
                    "place it there" if url else "Place it there"
            raise MissingDataError(
                f"encoder weights missing: {path} (multilabel.runs.{name}.encoder.checkpoint). {where}; or set "
                f"multilabel.runs.{name}.encoder.checkpoint='' to start from the library's own pretrained weights"
            )


def _encode(loaded: Loaded) -> tuple[dict[str, pd.DataFrame], list[str], dict[str, int]]:
    """Label names to ids; with ``covering``, drop labels absent from train and examples left with none."""
    missing = [s for s in SPLITS if s not in loaded.splits]
    if missing:
        raise ValueError(f"source returned no {missing} split(s); expected {list(SPLITS)}")
    train = loaded.splits["train"]["labels"]
    names = frequent_labels(train)
    if not loaded.covering:  # then labels only in dev/test follow, most frequent first
        in_train = set(names)
        every = frequent_labels(ys for s in SPLITS for ys in loaded.splits[s]["labels"])
        names += [y for y in every if y not in in_train]
    index = {name: i for i, name in enumerate(names)}
    out, dropped = {}, {}
    for split in SPLITS:
        df = loaded.splits[split].copy()
        df["labels"] = [sorted(index[y] for y in set(ys) if y in index) for ys in df["labels"]]
        keep = df["labels"].map(len) > 0
        dropped[split] = int((~keep).sum())
        out[split] = df[keep].reset_index(drop=True)
    return out, names, dropped


def _stats(splits: dict[str, pd.DataFrame], names: list[str], dropped: dict[str, int]) -> dict[str, Any]:
    counts = {s: splits[s]["labels"].map(len).to_numpy() for s in SPLITS}
    seen = {s: {i for ys in splits[s]["labels"] for i in ys} for s in SPLITS}
    return {
        "n_labels": len(names),
        "k": int(counts["train"].max()),  # thesis §5.1: k = max active labels per example
        "k_per_split": {s: int(c.max()) if c.size else 0 for s, c in counts.items()},
        "mean_active": {s: float(c.mean()) if c.size else 0.0 for s, c in counts.items()},
        "split_sizes": {s: len(splits[s]) for s in SPLITS},
        "labels_seen": {s: len(seen[s]) for s in SPLITS},
        "labels_not_in_train": {s: len(seen[s] - seen["train"]) for s in ("dev", "test")},
        "examples_dropped_without_labels": dropped,
        "histogram_active": {s: {int(k): int(v) for k, v in sorted(Counter(c).items())} for s, c in counts.items()},
    }


def _histogram_figure(hist: dict[int, int], title: str):
    """Thesis Fig. 5.1: number of training examples per number of active labels."""
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no GUI backend

    fig = Figure(figsize=(4.5, 3))
    ax = fig.subplots()
    ax.bar(list(hist), list(hist.values()), width=1.0)
    ax.set_xlabel("number of active labels, k")
    ax.set_ylabel("training examples")
    ax.set_title(title)
    return fig


def build(cfg: DatasetConfig, out_dir: Path, data_root: Path, *, config: Any = None) -> None:
    """Build one dataset into ``out_dir`` (replaced atomically).

    Parameters
    ----------
    cfg : DatasetConfig
        The dataset's config (``cfg.datasets.<name>``); ``cfg.name`` selects the source.
    out_dir : path
        Output directory; built in a temporary sibling and renamed into place.
    data_root : path
        Where user-supplied inputs live (``data/``): ``data_root/<name>/...`` unless ``cfg.path`` is set.
    config : optional
        The whole composed config, stored in the provenance of ``stats.json``.

    Raises
    ------
    MissingDataError
        An input file is absent; the message names it, where it goes and how to obtain it.
    """
    out_dir, data_root = Path(out_dir), Path(data_root)
    _check_encoder_files(config, cfg.name)
    loaded = _source(cfg.name).load(cfg, data_root)
    splits, names, dropped = _encode(loaded)
    stats = _stats(splits, names, dropped)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        _to_arrow(splits).save_to_disk(str(tmp))
        (tmp / "labels.json").write_text(json.dumps(names, indent=0) + "\n")
        meta = metadata(config, loaded.inputs, dataset=cfg.name, source=loaded.info)
        write_json({**stats, "provenance": meta}, tmp / "stats.json")
        fig = _histogram_figure(stats["histogram_active"]["train"], f"{cfg.name} (n={len(names)})")
        for suffix in (".png", ".pdf"):
            save_figure(fig, tmp / f"active_labels{suffix}", config=config, inputs=[tmp / "stats.json"])
        tmp.chmod(0o755)  # mkdtemp creates the directory private; results are meant to be shared
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for suffix in (".png", ".pdf"):  # record the figure's input where it now lives, not the temporary directory
        write_json(metadata(config, [out_dir / "stats.json"]), sidecar(out_dir / f"active_labels{suffix}"))


def _to_arrow(splits: dict[str, pd.DataFrame]):
    from datasets import Dataset, DatasetDict, Features, List, Value

    def one(df: pd.DataFrame):
        features = {c: Value("string") for c in df.columns if c != "labels"}
        features["labels"] = List(Value("int32"))
        columns = {c: df[c].astype(str).tolist() for c in df.columns if c != "labels"}
        columns["labels"] = df["labels"].tolist()
        return Dataset.from_dict(columns, features=Features(features))

    return DatasetDict({s: one(splits[s]) for s in SPLITS})


def load_built(out_dir: Path):
    """Load a dataset written by :func:`build`.

    Returns
    -------
    (datasets.DatasetDict, list of str)
        The splits and the label names (index = label id).
    """
    from datasets import load_from_disk

    out_dir = Path(out_dir)
    if not (out_dir / "labels.json").is_file():
        raise FileNotFoundError(f"{out_dir} holds no built dataset (no labels.json); run rule build_dataset")
    return load_from_disk(str(out_dir)), json.loads((out_dir / "labels.json").read_text())

