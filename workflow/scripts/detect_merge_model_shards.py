"""Snakemake script of rule merge_model_shards: join a sharded check into the model's table and summary."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.detect.check import merge_model_shards

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
merge_model_shards(snakemake.params.model, snakemake.input.tables, snakemake.input.facts, snakemake.output.table,
                   snakemake.output.summary, config=from_snakemake(snakemake), evidence_paths=snakemake.input.evidence,
                   evidence_path=snakemake.output.evidence)
