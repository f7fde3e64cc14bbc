"""Snakemake script of rule build_dataset: build one configured dataset."""

import sys
from pathlib import Path

from argmaxable.config import from_snakemake
from argmaxable.multilabel.datasets import MissingDataError, build
from argmaxable.multilabel.datasets.schema import DatasetConfig

sm = snakemake  # type: ignore[name-defined]  # noqa: F821
sys.stderr = open(sm.log[0], "w")  # noqa: SIM115  (open until the job ends)
try:
    build(DatasetConfig(**sm.params.dataset), Path(sm.output[0]), Path(sm.params.data_root),
          config=from_snakemake(sm))  # the whole composed tree (its experiment too), as every other job records
except MissingDataError as err:
    print(f"argmaxable: {err}", file=sys.__stderr__)  # on the terminal too: the user must act
    raise
