"""Snakemake script of rule count_regions: unpack the job and call argmaxable.theory.regions.run_regions."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.theory.regions import run_regions

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_regions(snakemake.params.settings, dict(snakemake.output.items()), seed=snakemake.params.seed,
            config=from_snakemake(snakemake))
