"""Snakemake script of rule audit_model: one real head's token audit card, from its check's evidence (with the
model's round trip and prompting test where detect.audit.prompt_models names it)."""

import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # read the files download_model fetched, never the network

from argmaxable.audit.models import audit_model
from argmaxable.config import from_snakemake

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
audit_model(snakemake.params.model, snakemake.params.detect, snakemake.input.evidence, snakemake.params.prefix,
            root=snakemake.params.root, config=from_snakemake(snakemake), prompt=snakemake.params.prompt)
