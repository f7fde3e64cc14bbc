"""Snakemake script of rule make_report: unpack the job and call argmaxable.report.make_report."""

import sys
from pathlib import Path

from argmaxable.config import from_snakemake
from argmaxable.report import DeclarationError, make_report

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
# The declarations' directory and the results directory (where report.md goes) come from the job's own files.
try:
    make_report(Path(snakemake.input.declarations[0]).parent, Path(snakemake.output.md).parent,
                snakemake.output.md, snakemake.output.html, experiment=snakemake.params.experiment,
                families=snakemake.params.families, config=from_snakemake(snakemake),
                out_summary=snakemake.output.summary)
except DeclarationError as err:  # one line in the job's log, no traceback
    sys.exit(f"argmaxable: {err}")
