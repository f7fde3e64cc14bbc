"""Snakemake script of rule make_lm_report: unpack the job and call argmaxable.lm.report.make_report."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.lm.report import make_report

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_report(snakemake.params.models, snakemake.input.vocab, snakemake.input.models, snakemake.input.activations,
            snakemake.input.categories, snakemake.output.tables, snakemake.output.figures,
            config=from_snakemake(snakemake))
