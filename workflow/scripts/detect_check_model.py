"""Snakemake script of rule check_model: unpack the job and call argmaxable.models.detect.check_model."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.models.detect import check_model

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
check_model(snakemake.params.model, snakemake.params.detect, snakemake.output.table, snakemake.output.summary,
            config=from_snakemake(snakemake), progress=True)
