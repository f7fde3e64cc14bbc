"""Snakemake script of rule build_lm_vocab: unpack the job and call argmaxable.lm.train.make_vocab."""

import sys

from argmaxable.config import from_snakemake
from argmaxable.lm.train import make_vocab

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
make_vocab(snakemake.output[0], snakemake.params.settings, config=from_snakemake(snakemake))
