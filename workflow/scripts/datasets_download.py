"""Snakemake script of rule download_dataset: fetch one dataset's files into data/<name>/."""

import sys

from argmaxable.fetch import DownloadError
from argmaxable.multilabel.datasets.download import download_dataset
from argmaxable.multilabel.datasets.schema import DatasetConfig

sm = snakemake  # type: ignore[name-defined]  # noqa: F821
sys.stderr = open(sm.log[0], "w")  # noqa: SIM115  (open until the job ends)
try:
    download_dataset(DatasetConfig(**sm.params.dataset), sm.params.root)
except DownloadError as err:  # one line in the log and on the console, no traceback
    print(f"argmaxable: {err}", file=sys.stderr)
    print(f"argmaxable: {err}", file=sys.__stderr__)
    sys.exit(1)
