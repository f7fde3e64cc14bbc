"""Snakemake script of rule compare_topm_rows: calls argmaxable.topm.experiments.run_rows."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.topm.experiments import run_rows

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_rows(snakemake.params.settings, snakemake.params.models, dict(snakemake.output.items()),
         seed=snakemake.params.seed, config=from_snakemake(snakemake))
