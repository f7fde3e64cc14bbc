"""Snakemake script of rule make_lm_study: the LM study's table, token list and figure over the real heads."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.detect.study import make_study

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_study(snakemake.input.records, snakemake.input.tokens, snakemake.output.md, snakemake.output.parquet,
           snakemake.output.tokens, snakemake.output.png, config=from_snakemake(snakemake))
