"""The shipped debtags snapshot (src/argmaxable/data/debtags.parquet) and the offline default's dataset.

Oracle for the sizes: the Debian data as debtags publishes it (about 30k tagged packages, about 600 tags,
mean 3.7 and max about 60 tags per package).
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from argmaxable.config import load_config
from argmaxable.multilabel.datasets import build, debtags, load_built


@pytest.fixture(scope="module")
def snapshot() -> pd.DataFrame:
    return debtags.load_snapshot()  # also checks the file against the sha256 in debtags.meta.json


def test_snapshot_has_the_expected_size(snapshot):
    meta = json.loads(debtags.SNAPSHOT.with_suffix(".meta.json").read_text())
    n_tags = snapshot["tags"].map(len)
    assert len(snapshot) == meta["n_packages"] and 25_000 < len(snapshot) < 40_000
    assert snapshot["package"].is_unique
    assert 400 < snapshot["tags"].explode().nunique() < 1000
    assert 3.2 < n_tags.mean() < 4.2 and 40 <= n_tags.max() <= 100 and n_tags.min() >= 1
    assert all(t.startswith(p + "\n") for p, t in zip(snapshot["package"], snapshot["text"], strict=True))
    assert meta["releases"] and all(len(h) == 64 for h in meta["lists"].values())


def test_snapshot_provenance_names_archive_paths_not_hosts():
    text = debtags.SNAPSHOT.with_suffix(".meta.json").read_text()
    meta = json.loads(text)
    paths = [*meta["lists"], *(r["file"] for r in meta["releases"])]
    # An archive path starts with the archive's directory ("debian", "debian-security"); a host has dots.
    assert all("/dists/" in p and "." not in p.split("/")[0] for p in paths), paths
    assert not re.search(r"[\w-]+(\.[\w-]+)+_dists_", text)  # no apt file name, which starts with the host


def test_snapshot_split_is_label_covering_and_reproducible(snapshot):
    sizes = snapshot["split"].value_counts().to_dict()
    assert sizes["test"] == debtags.SNAPSHOT_SIZES["test"] and sizes["dev"] == debtags.SNAPSHOT_SIZES["dev"]
    freq = snapshot["tags"].explode().value_counts()
    frequent = set(freq[freq >= debtags.SNAPSHOT_MIN_FREQ].index)
    for split in ("train", "test"):
        assert frequent <= set(snapshot.loc[snapshot["split"] == split, "tags"].explode())
    assert (debtags.split_packages(snapshot[["package", "text", "tags"]]) == snapshot["split"]).all()


def test_default_debtags_dataset_builds(tmp_path, snapshot):
    cfg = load_config([]).datasets.debtags
    build(cfg, tmp_path / "debtags", tmp_path)
    dsd, names = load_built(tmp_path / "debtags")
    stats = json.loads((tmp_path / "debtags" / "stats.json").read_text())
    freq = snapshot["tags"].explode().value_counts()
    assert set(names) == set(freq[freq >= cfg.min_label_freq].index)
    assert {s: len(dsd[s]) for s in dsd} == {"train": cfg.train_size, "dev": cfg.dev_size, "test": cfg.test_size}
    train = {i for y in dsd["train"]["labels"] for i in y}
    assert train == {i for y in dsd["test"]["labels"] for i in y} == set(range(len(names)))
    assert stats["n_labels"] == len(names) and stats["k"] == max(map(len, dsd["train"]["labels"]))
