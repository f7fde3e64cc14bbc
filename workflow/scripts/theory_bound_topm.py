"""Snakemake script of rule bound_topm: calls argmaxable.theory.basri_jacobs.run_basri_jacobs."""

import json
import sys

from argmaxable.theory.basri_jacobs import run_basri_jacobs

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_basri_jacobs(snakemake.params.settings, dict(snakemake.output.items()), seed=snakemake.params.seed,
                 config=json.loads(snakemake.params.config))
