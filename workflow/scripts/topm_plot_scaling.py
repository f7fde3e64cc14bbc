"""Snakemake script of rule plot_topm_scaling: calls argmaxable.topm.experiments.run_scaling_summary."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.topm.experiments import run_scaling_summary

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_scaling_summary(snakemake.params.settings, list(snakemake.input.by_d), list(snakemake.input.by_n),
                    dict(snakemake.output.items()), config=from_snakemake(snakemake))
