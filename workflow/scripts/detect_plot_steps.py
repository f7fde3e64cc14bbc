"""Snakemake script of rule plot_steps: unpack the job and call argmaxable.models.figures.plot_steps."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.models.figures import plot_steps

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
plot_steps(snakemake.input, snakemake.params.names, snakemake.output[0], figure=snakemake.wildcards.figure,
           config=from_snakemake(snakemake))
