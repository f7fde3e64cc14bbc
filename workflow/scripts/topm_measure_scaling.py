"""Snakemake script of rule measure_topm_scaling: calls argmaxable.topm.experiments.run_scaling_point."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.topm.experiments import run_scaling_point

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_scaling_point(snakemake.params.settings, int(snakemake.wildcards.N), int(snakemake.wildcards.d),
                  snakemake.output[0], seed=snakemake.params.seed, config=from_snakemake(snakemake))
