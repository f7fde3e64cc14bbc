"""Multi-label datasets: debtags (offline default), MIMIC-III, BioASQ Task A 2021, OpenImages v6.

``build(cfg, out_dir, data_root)`` writes a dataset as an Arrow ``DatasetDict`` (train/dev/test; columns id,
text or image_path, labels) with ``labels.json``, ``stats.json`` and a histogram of active labels;
``load_built(out_dir)`` reads it back.
"""

from argmaxable.multilabel.datasets.builder import SOURCES, SPLITS, MissingDataError, build, load_built

__all__ = ["SOURCES", "SPLITS", "MissingDataError", "build", "load_built"]
