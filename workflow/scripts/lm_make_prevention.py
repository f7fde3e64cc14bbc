"""Snakemake script of rule make_lm_prevention: unpack the job and call argmaxable.lm.prevention.make_table."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.lm.prevention import make_table

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_table(snakemake.input.plain, snakemake.input.categories, snakemake.input.runs, snakemake.input.checks,
           snakemake.output.tables, snakemake.output.figures, config=from_snakemake(snakemake))
