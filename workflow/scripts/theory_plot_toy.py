"""Snakemake script of rule plot_toy: unpack the job and call argmaxable.theory.toy.run_toy."""

import json
import sys

from argmaxable.theory.toy import run_toy

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_toy(dict(snakemake.output.items()), config=json.loads(snakemake.params.config))
