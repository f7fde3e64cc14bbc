"""Snakemake script of rule predict_next_tokens: calls argmaxable.topm.natural.run_predict."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.topm.natural import run_predict

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_predict(snakemake.params.settings, snakemake.params.model, snakemake.params.root, snakemake.output[0],
            config=from_snakemake(snakemake))
