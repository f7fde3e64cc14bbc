"""Snakemake script of rule make_source_table: unpack the job and call argmaxable.detect.figures.make_source_table."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.detect.figures import make_source_table

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_source_table(snakemake.input, [snakemake.output.md, snakemake.output.parquet], config=from_snakemake(snakemake))
