"""Snakemake script of rule measure_topm_natural: calls argmaxable.topm.natural.run_natural."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.topm.natural import run_natural

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_natural(snakemake.params.settings, snakemake.wildcards.model, snakemake.params.model, snakemake.params.root,
            snakemake.input.tops, dict(snakemake.output.items()), seed=snakemake.params.seed,
            config=from_snakemake(snakemake))
