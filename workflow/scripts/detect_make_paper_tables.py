"""Snakemake script of rule make_paper_tables: unpack the job and call argmaxable.detect.figures.make_paper_tables."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.detect.figures import make_paper_tables

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_paper_tables(snakemake.input, snakemake.output[0], config=from_snakemake(snakemake))
