"""Snakemake script of rule plot_unargmaxable_per_model: call argmaxable.detect.figures."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.detect.figures import plot_unargmaxable_per_model

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
plot_unargmaxable_per_model(snakemake.input.summaries, snakemake.output[0], study_paths=snakemake.input.studies,
                            config=from_snakemake(snakemake))
