"""Snakemake script of rule plot_unargmaxable_per_model: call argmaxable.detect.figures."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.detect.figures import plot_unargmaxable_per_model

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
plot_unargmaxable_per_model(snakemake.input, snakemake.output[0], config=from_snakemake(snakemake))
