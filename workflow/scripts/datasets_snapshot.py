"""Snakemake script of rule make_debtags_snapshot: rebuild the shipped debtags snapshot from apt lists."""

import sys
from pathlib import Path

from argmaxable.multilabel.datasets.debtags import make_snapshot

sm = snakemake  # type: ignore[name-defined]  # noqa: F821
sys.stderr = open(sm.log[0], "w")  # noqa: SIM115  (open until the job ends)
make_snapshot(Path(sm.output.parquet), Path(sm.params.lists_dir))
