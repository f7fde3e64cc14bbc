"""Snakemake script of rule make_setup_tables: call argmaxable.multilabel.setup_tables.make_setup_tables."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.multilabel.setup_tables import make_setup_tables

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_setup_tables(dict(zip(snakemake.params.names, snakemake.input.datasets, strict=True)), snakemake.params.runs,
                  {"table_4_1": snakemake.output.table_4_1, "table_a_4": snakemake.output.table_a_4},
                  config=from_snakemake(snakemake))
