"""Snakemake script of rule plot_illustrations: call argmaxable.theory.illustrations.run_illustrations."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.theory.illustrations import run_illustrations

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_illustrations(snakemake.params.settings, dict(snakemake.output.items()), seed=snakemake.params.seed,
                  config=from_snakemake(snakemake))
