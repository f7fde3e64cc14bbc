"""Snakemake script of rule study_model: one real head's unargmaxable tokens as ties or strictly inside."""

import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # read the files download_model fetched, never the network

from argmaxable.config import from_snakemake
from argmaxable.detect.study import study_model

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
study_model(snakemake.params.model, snakemake.params.detect, snakemake.input.table, snakemake.input.summary,
            snakemake.output.record, snakemake.output.tokens, root=snakemake.params.root, key=snakemake.wildcards.model,
            config=from_snakemake(snakemake))
