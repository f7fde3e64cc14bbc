"""Snakemake script of rule make_audit_index: the index of the audit cards, which the report links."""

import sys

from argmaxable.audit.models import make_audit_index
from argmaxable.config import from_snakemake

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_audit_index(snakemake.input, snakemake.params.results, snakemake.output.parquet, snakemake.output.md,
                 config=from_snakemake(snakemake))
