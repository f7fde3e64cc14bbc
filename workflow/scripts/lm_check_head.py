"""Snakemake script of rule check_lm_head: unpack the job and call argmaxable.lm.prevention.check_head."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.lm.prevention import check_head

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
check_head(snakemake.input.model, snakemake.output[0], rankings=snakemake.params.rankings, seed=snakemake.params.seed,
           check=snakemake.params.check, config=from_snakemake(snakemake))
