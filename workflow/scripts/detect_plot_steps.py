"""Snakemake script of rule plot_steps: unpack the job and call argmaxable.detect.figures.plot_steps."""

import json
import sys
from pathlib import Path

from argmaxable.config import from_snakemake
from argmaxable.detect.figures import plot_steps

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
widths = [json.loads(Path(p).read_text())["d"] for p in snakemake.input.summaries]
plot_steps(snakemake.input.tables, snakemake.params.names, snakemake.output.figure, figure=snakemake.wildcards.figure,
           widths=widths, summary_path=snakemake.output.summary, config=from_snakemake(snakemake))
