"""Snakemake script of rule plot_toy: unpack the job and call argmaxable.theory.toy.run_toy."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.theory.toy import run_toy

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_toy(dict(snakemake.output.items()), config=from_snakemake(snakemake))
