"""Snakemake script of rule check_model: unpack the job and call argmaxable.detect.check.check_model."""

import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # read the files download_model fetched, never the network

from argmaxable.config import from_snakemake
from argmaxable.detect.check import check_model

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
check_model(snakemake.params.model, snakemake.params.detect, snakemake.output.table, snakemake.output.summary,
            root=snakemake.params.root, config=from_snakemake(snakemake), progress=True,
            evidence_path=snakemake.output.evidence)
