"""Snakemake script of rule check_random_layer: calls argmaxable.theory.random_layers.run_random_layer."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.theory.random_layers import run_random_layer

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_random_layer(snakemake.params.settings, int(snakemake.wildcards.d), snakemake.output[0],
                 seed=snakemake.params.seed, config=from_snakemake(snakemake))
