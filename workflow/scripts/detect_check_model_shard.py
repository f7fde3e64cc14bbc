"""Snakemake script of rule check_model_shard: check one class range of a model's output layer."""

import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # read the files download_model fetched, never the network

from argmaxable.config import from_snakemake
from argmaxable.detect.check import check_model_shard

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
check_model_shard(snakemake.params.model, snakemake.params.detect, int(snakemake.wildcards.shard),
                  snakemake.params.shards, snakemake.output.table, snakemake.output.facts,
                  root=snakemake.params.root, config=from_snakemake(snakemake), progress=True,
                  evidence_path=snakemake.output.evidence)
