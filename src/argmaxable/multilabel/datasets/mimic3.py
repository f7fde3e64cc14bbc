"""MIMIC-III clinical coding in the CAML preprocessing (Mullenbach et al., 2018; thesis §4.1.2, A.6.1).

The thesis uses CAML's own splits (47723/1631/3372 notes) and its full ICD-9 code set, n = 8921. The files
come from running CAML's preprocessing on MIMIC-III, which needs PhysioNet credentialing; rule
``download_dataset`` fetches the MIMIC-III tables it reads and CAML's split ids (config/datasets/mimic3.yaml);
the preprocessing itself is CAML's notebook. Expected under ``data/mimic3/`` (or ``cfg.path``):
``train_full.csv``, ``dev_full.csv``, ``test_full.csv`` with columns SUBJECT_ID, HADM_ID, TEXT, LABELS
(';'-joined ICD-9 codes), length.

The label vocabulary is counted from the three files (the union of their codes), not assumed.
Config fields read: ``path``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from argmaxable.multilabel.datasets.builder import Loaded, MissingDataError
from argmaxable.multilabel.datasets.schema import DatasetConfig

FILES = {"train": "train_full.csv", "dev": "dev_full.csv", "test": "test_full.csv"}
COLUMNS = ["SUBJECT_ID", "HADM_ID", "TEXT", "LABELS", "length"]


def load(cfg: DatasetConfig, data_root: Path) -> Loaded:
    """CAML's train/dev/test notes with their ICD-9 codes."""
    root = Path(data_root) / (cfg.path or "mimic3")
    missing = [name for name in FILES.values() if not (root / name).is_file()]
    if missing:
        raise MissingDataError(
            f"MIMIC-III files missing: {', '.join(str(root / m) for m in missing)}. MIMIC-III needs PhysioNet "
            "credentialing (https://physionet.org/content/mimiciii/); with access, rule download_dataset fetches "
            f"the tables and CAML's split ids into {root}/ (PHYSIONET_USERNAME/PHYSIONET_PASSWORD set); then run "
            "the CAML preprocessing (github.com/jamesmullenbach/caml-mimic, notebooks/dataproc_mimic_III.ipynb) "
            f"there to write {', '.join(FILES.values())}"
        )
    splits = {}
    for split, name in FILES.items():
        df = pd.read_csv(root / name, dtype={"SUBJECT_ID": str, "HADM_ID": str, "LABELS": str})
        absent = [c for c in COLUMNS if c not in df.columns]
        if absent:
            raise ValueError(f"{root / name} lacks CAML columns {absent}; expected {COLUMNS}")
        splits[split] = pd.DataFrame({
            "id": df["SUBJECT_ID"] + "_" + df["HADM_ID"],
            "text": df["TEXT"].fillna("").astype(str),
            "labels": [[c for c in str(y).split(";") if c] if isinstance(y, str) else [] for y in df["LABELS"]],
        })
    return Loaded(splits=splits, covering=False, inputs=[root / n for n in FILES.values()],
                  info={"files": {s: str(root / n) for s, n in FILES.items()}})
