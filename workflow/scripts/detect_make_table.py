"""Snakemake script of rule make_detect_table: gather the per-model summaries into the detection table."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.detect.check import make_detect_table

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_detect_table(snakemake.input, [snakemake.output.parquet, snakemake.output.md],
                  config=from_snakemake(snakemake))
