"""Config schema of one multi-label dataset (config/datasets/<name>.yaml).

Which fields a source reads is listed in its module; a field a source ignores keeps its default. The thesis
settings (thesis §4.1.2 and Appendix A.6) sit in config/datasets/{mimic3,bioasq,openimages}.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


@dataclass
class DatasetConfig:
    # Source reader: debtags, mimic3, bioasq or openimages (argmaxable.multilabel.datasets.SOURCES).
    name: str = MISSING
    # debtags only: "snapshot" reads the parquet shipped in the package, "apt" rebuilds from apt lists.
    source: str = "snapshot"
    # Input directory relative to the data root (data/); empty means data/<name>. debtags with source "apt":
    # the apt lists directory (default /var/lib/apt/lists).
    path: str = ""
    # Fields joined (newline-separated) into the text input; bioasq reads journal, title, abstractText.
    text_fields: list[str] = field(default_factory=list)
    # Read only the first N records of a streamed source (BioASQ: a 1m subset, thesis A.6.1); null = all.
    max_records: int | None = None
    # Keep the N most frequent labels (BioASQ: 20000, thesis §4.1.2); null = all that pass min_label_freq.
    num_labels: int | None = None
    # Drop labels on fewer examples than this (BioASQ threshold 5); also applied to debtags tags.
    min_label_freq: int = 1
    # Drop examples with more active labels than this (BioASQ: k = 50 by construction, thesis §4.1.2).
    max_active_labels: int | None = None
    # Split sizes. Sources with their own splits (mimic3) ignore them; null train = everything left over.
    train_size: int | None = None
    dev_size: int | None = None
    test_size: int | None = None
    # openimages only: keep train images whose ImageID starts with this (thesis A.6.1 used the "1" shard).
    train_id_prefix: str = ""
    # Seed of the label-covering split sampler.
    seed: int = 0
    # What rule download_dataset fetches into data/<name>/ (argmaxable.multilabel.datasets.download): files
    # ({local path: URL}), checksums (URL of a "sha256  path" list), credentials (physionet or bioasq, read
    # from the environment), images (openimages: URL template), unpack (archives to extract). Empty: nothing
    # to fetch, the files are placed by hand.
    download: dict[str, Any] = field(default_factory=dict)
