"""Snakemake script of rule measure_dft: unpack the job and call argmaxable.theory.dft.run_dft."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.theory.dft import run_dft

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
run_dft(snakemake.params.settings, dict(snakemake.output.items()), seed=snakemake.params.seed,
        config=from_snakemake(snakemake))
