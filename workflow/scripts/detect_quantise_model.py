"""Snakemake script of rule quantise_model: unpack the job and call argmaxable.detect.quant.run_quant_study."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.detect.quant import run_quant_study

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_quant_study(snakemake.params.model, snakemake.params.detect, snakemake.input.source, snakemake.params.types,
                snakemake.output.changes, snakemake.output.summary, root=snakemake.params.root,
                config=from_snakemake(snakemake))
