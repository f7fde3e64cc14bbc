"""Snakemake script of rule summarize_random_layers: calls theory.random_layers.run_random_summary."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.theory.random_layers import run_random_summary

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_random_summary(snakemake.params.settings, list(snakemake.input), dict(snakemake.output.items()),
                   seed=snakemake.params.seed, config=from_snakemake(snakemake))
