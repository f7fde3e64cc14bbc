"""Snakemake script of rule plot_topm_fraction: calls argmaxable.topm.experiments.run_fraction_summary."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.topm.experiments import run_fraction_summary

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_fraction_summary(snakemake.params.settings, list(snakemake.input), dict(snakemake.output.items()),
                     config=from_snakemake(snakemake))
