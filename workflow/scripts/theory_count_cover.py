"""Snakemake script of rule count_cover: unpack the job and call argmaxable.theory.cover.run_cover."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.theory.cover import run_cover

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_cover(snakemake.params.settings, dict(snakemake.output.items()), seed=snakemake.params.seed,
          config=from_snakemake(snakemake))
