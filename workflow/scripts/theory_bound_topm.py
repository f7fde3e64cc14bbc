"""Snakemake script of rule bound_topm: calls argmaxable.theory.basri_jacobs.run_basri_jacobs."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.theory.basri_jacobs import run_basri_jacobs

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_basri_jacobs(snakemake.params.settings, dict(snakemake.output.items()), seed=snakemake.params.seed,
                 config=from_snakemake(snakemake))
