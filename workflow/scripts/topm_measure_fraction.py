"""Snakemake script of rule measure_topm: calls argmaxable.topm.experiments.run_fraction."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.topm.experiments import run_fraction

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_fraction(snakemake.params.settings, snakemake.wildcards.model, snakemake.wildcards.kind,
             snakemake.params.model, snakemake.params.root, snakemake.output[0], seed=snakemake.params.seed,
             config=from_snakemake(snakemake))
