"""Snakemake script of rule check_dft_rankings: calls argmaxable.topm.ranking.run_rankings."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.topm.ranking import run_rankings

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_rankings(snakemake.params.settings, dict(snakemake.output.items()), seed=snakemake.params.seed,
             config=from_snakemake(snakemake))
