"""OpenImages v6 image-level labels (thesis §4.1.2, A.6.1).

Inputs, from https://storage.googleapis.com/openimages/web/download.html, in ``data/openimages/`` (or
``cfg.path``; rule ``download_dataset`` fetches them, or place them by hand): the human-verified image-level
label CSVs (ImageID, Source, LabelName, Confidence) of :data:`FILES` and the trainable class list
``oidv6-classes-trainable.txt``. Images go to
``images/<ImageID>.jpg`` in the same directory (the thesis used CVDF's shard of train images whose IDs start
with "1", N = 108228, and resized them to 448x448 at train time).

Positive labels are rows with Confidence == 1 on a trainable class. Train = images whose ID starts with
``cfg.train_id_prefix``; dev and test = the first ``dev_size``/``test_size`` images of the validation and
test CSVs (thesis: 5k and 10k); ``train_size``, when set, likewise keeps the first train images. The
vocabulary is the trainable classes seen in train (labels missing from train are removed from dev/test); the
thesis reports n = 8933 for this choice. Every image of the splits must be present: a missing one stops the
build with a message naming the first few.
Config fields read: path, train_id_prefix, train_size, dev_size, test_size, min_label_freq, max_active_labels.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from argmaxable.multilabel.datasets.builder import Loaded, MissingDataError
from argmaxable.multilabel.datasets.schema import DatasetConfig
from argmaxable.multilabel.datasets.splits import frequent_labels

FILES = {
    "train": "oidv6-train-annotations-human-imagelabels.csv",
    "dev": "validation-annotations-human-imagelabels.csv",
    "test": "test-annotations-human-imagelabels.csv",
}
CLASSES = "oidv6-classes-trainable.txt"
COLUMNS = ["ImageID", "Source", "LabelName", "Confidence"]
CHUNK = 1_000_000  # rows per CSV chunk; the train CSV has tens of millions of rows
MISSING_SHOWN = 5  # missing images named in the error: enough to look them up, short enough for one line


def _positives(path: Path, trainable: set[str], prefix: str, first: int | None) -> pd.DataFrame:
    """Images (in file order) with their positive trainable labels, optionally only the first ``first``."""
    parts, images = [], {}
    for chunk in pd.read_csv(path, usecols=COLUMNS, dtype={"ImageID": str, "LabelName": str}, chunksize=CHUNK):
        chunk = chunk[chunk["ImageID"].str.startswith(prefix)]
        chunk = chunk[(chunk["Confidence"] == 1) & chunk["LabelName"].isin(trainable)]
        images.update(dict.fromkeys(chunk["ImageID"]))
        parts.append(chunk)
        if first is not None and len(images) > first:
            break
    keep = list(images)[:first] if first is not None else list(images)
    rows = pd.concat(parts) if parts else pd.DataFrame(columns=COLUMNS)
    grouped = rows.groupby("ImageID", sort=False)["LabelName"].agg(lambda s: sorted(set(s)))
    return pd.DataFrame({"id": keep, "labels": grouped.reindex(keep).tolist()})


IMAGE_SPLITS = {"train": "train", "dev": "validation", "test": "test"}  # OpenImages' name of each split


def select(cfg: DatasetConfig, root: Path) -> dict[str, pd.DataFrame]:
    """The images of each split (id, labels, image_path) from the label CSVs in ``root``, images not needed.

    Shared by :func:`load` and the download (which fetches exactly these images).
    """
    missing = [name for name in [*FILES.values(), CLASSES] if not (root / name).is_file()]
    if missing:
        raise MissingDataError(
            f"OpenImages v6 files missing: {', '.join(str(root / m) for m in missing)}. Run rule download_dataset "
            f"(snakemake {root / 'manifest.json'}), or download the human-verified image-level label CSVs and the "
            f"trainable class list from https://storage.googleapis.com/openimages/web/download.html into {root}/, "
            f"and the images as {root}/images/<ImageID>.jpg"
        )
    trainable = {ln.strip() for ln in (root / CLASSES).read_text().splitlines() if ln.strip()}
    splits = {
        "train": _positives(root / FILES["train"], trainable, cfg.train_id_prefix, cfg.train_size),
        "dev": _positives(root / FILES["dev"], trainable, "", cfg.dev_size),
        "test": _positives(root / FILES["test"], trainable, "", cfg.test_size),
    }
    vocab = set(frequent_labels(splits["train"]["labels"], min_freq=cfg.min_label_freq))
    for split, df in splits.items():
        df = df.assign(labels=[[y for y in ys if y in vocab] for ys in df["labels"]])
        if cfg.max_active_labels is not None:
            df = df[df["labels"].map(len) <= cfg.max_active_labels]
        paths = [str(root / "images" / f"{i}.jpg") for i in df["id"]]
        splits[split] = df.assign(image_path=paths)[["id", "image_path", "labels"]]
    return splits


def load(cfg: DatasetConfig, data_root: Path) -> Loaded:
    """OpenImages train shard and the first dev/test images, with positive trainable labels."""
    root = Path(data_root) / (cfg.path or "openimages")
    splits = select(cfg, root)
    trainable = sum(1 for ln in (root / CLASSES).read_text().splitlines() if ln.strip())
    total = sum(len(df) for df in splits.values())
    missing = [p for df in splits.values() for p in df["image_path"] if not Path(p).is_file()]
    if missing:
        raise MissingDataError(
            f"OpenImages: {len(missing)} of {total} images missing under {root / 'images'}/ (first: "
            f"{', '.join(Path(p).name for p in missing[:MISSING_SHOWN])}); run rule download_dataset "
            f"(snakemake {root / 'manifest.json'}) or copy them there"
        )
    return Loaded(splits=splits, covering=True, inputs=[root / n for n in [*FILES.values(), CLASSES]],
                  info={"dir": str(root), "images": total, "trainable_classes": trainable})
