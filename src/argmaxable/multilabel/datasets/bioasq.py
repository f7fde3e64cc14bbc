"""BioASQ Task A 2021 semantic indexing (thesis §4.1.2, A.6.1).

Input: ``allMeSH_2021.json`` (BioASQ registration required, http://participants-area.bioasq.org/), in
``data/bioasq/`` (or ``cfg.path``): fetched by rule ``download_dataset`` from the user's link and token, or
placed by hand. The file is ``{"articles":[`` followed by one JSON article per line,
latin-1 encoded, with fields journal, title, abstractText, meshMajor (list of MeSH headings), pmid. The real
file is ~25 GB, so it is streamed twice: once for the labels of the first ``max_records`` articles (the
thesis's 1m subset), once for the texts of the articles the split keeps.

Thesis settings (config/datasets/bioasq.yaml): the 20000 most frequent headings with frequency >= 5, k = 50,
label-covering train/dev/test of 100k/5k/10k (Table A.4), text = journal, title, abstract.
Config fields read: path, text_fields, max_records, num_labels, min_label_freq, max_active_labels, sizes, seed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.multilabel.datasets.builder import Loaded, MissingDataError
from argmaxable.multilabel.datasets.schema import DatasetConfig
from argmaxable.multilabel.datasets.splits import UNUSED, covering_split, frequent_labels

FILE = "allMeSH_2021.json"
HEADER = '{"articles":['


def iter_articles(path: Path, limit: int | None = None, digest: Any = None) -> Iterator[dict[str, Any]]:
    """Articles of an allMeSH json file, one per line, without loading the file (latin-1).

    ``digest`` (a hashlib object), when given, is updated with the raw bytes read, so the provenance can
    record the hash of exactly the prefix used.
    """
    count = 0
    with open(path, "rb") as fh:
        for raw in fh:
            if limit is not None and count >= limit:
                return
            if digest is not None:
                digest.update(raw)
            line = raw.decode("latin-1").strip()
            if line.startswith(HEADER):
                line = line[len(HEADER):]
            line = line.removesuffix("]}").rstrip().removesuffix(",")
            if not line:
                continue
            yield json.loads(line)
            count += 1


def load(cfg: DatasetConfig, data_root: Path) -> Loaded:
    """The label-covering BioASQ splits (two passes over the file)."""
    path = Path(data_root) / (cfg.path or "bioasq") / FILE
    if not path.is_file():
        raise MissingDataError(
            f"BioASQ file missing: {path}. Register for BioASQ Task A (http://participants-area.bioasq.org/), "
            "then set BIOASQ_URL (the link of allMeSH_2021.zip) and BIOASQ_TOKEN for rule download_dataset, or "
            f"download the 2021 training set {FILE} yourself (unzip it) and place it at {path}"
        )
    if cfg.test_size is None or cfg.dev_size is None:
        raise ValueError("dataset.bioasq needs dev_size and test_size (thesis Table A.4: 5000 and 10000)")

    # Pass 1: labels of the first max_records articles, as ids of a growing vocabulary (memory: ints only).
    digest = hashlib.sha256()
    ids: dict[str, int] = {}
    raw_labels = [
        [ids.setdefault(m, len(ids)) for m in dict.fromkeys(a.get("meshMajor", []))]
        for a in iter_articles(path, cfg.max_records, digest)
    ]
    names = list(ids)
    vocab = frequent_labels(([names[i] for i in y] for y in raw_labels), min_freq=cfg.min_label_freq,
                            num_labels=cfg.num_labels)
    keep = {ids[name] for name in vocab}
    labels = [[i for i in y if i in keep] for y in raw_labels]
    valid = [bool(y) and (cfg.max_active_labels is None or len(y) <= cfg.max_active_labels) for y in labels]
    sizes = {"test": cfg.test_size, "dev": cfg.dev_size, "train": cfg.train_size}
    split = np.full(len(labels), UNUSED, dtype=object)
    idx = np.flatnonzero(valid)
    split[idx] = covering_split([labels[i] for i in idx], sizes, seed=cfg.seed)

    # Pass 2: texts of the kept articles.
    fields = list(cfg.text_fields) or ["journal", "title", "abstractText"]
    rows: dict[str, list[dict[str, Any]]] = {s: [] for s in sizes}
    for i, article in enumerate(iter_articles(path, len(labels))):
        if split[i] != UNUSED:
            text = "\n".join(str(article.get(f) or "") for f in fields)
            rows[split[i]].append({"id": str(article.get("pmid", i)), "text": text,
                                   "labels": [names[j] for j in labels[i]]})
    info = {"file": str(path), "records_read": len(labels), "prefix_sha256": digest.hexdigest(),
            "headings_seen": len(ids), "text_fields": fields}
    return Loaded(splits={s: pd.DataFrame(r, columns=["id", "text", "labels"]) for s, r in rows.items()},
                  covering=True, info=info)
