"""Snakemake script of rule make_multilabel_report: tables and figures of the multi-label sweep."""

import sys
from pathlib import Path

from argmaxable.config import from_snakemake
from argmaxable.multilabel.aggregate import aggregate

sm = snakemake  # type: ignore[name-defined]  # noqa: F821
sys.stderr = open(sm.log[0], "w")  # noqa: SIM115  (open until the job ends)
aggregate(sm.params.run_dirs, Path(sm.output.tables[0]).parent, Path(sm.output.figures[0]).parent,
          loss_curve_d=sm.params.loss_curve_d, config=from_snakemake(sm))
