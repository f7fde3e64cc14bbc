"""Snakemake script of rule count_cover: unpack the job and call argmaxable.theory.cover.run_cover."""

import json
import sys

from argmaxable.theory.cover import run_cover

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_cover(snakemake.params.settings, dict(snakemake.output.items()), seed=snakemake.params.seed,
          config=json.loads(snakemake.params.config))
