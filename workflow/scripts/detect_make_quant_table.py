"""Snakemake script of rule make_quant_table: gather the quantisation study of every studied head."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.detect.quant import make_quant_table

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_quant_table(snakemake.input.summaries, snakemake.input.changes,
                 [snakemake.output.parquet, snakemake.output.md],
                 [snakemake.output.changes_parquet, snakemake.output.changes_md], config=from_snakemake(snakemake))
