"""Snakemake script of rules train_lm and train_lm_head: unpack the job and call argmaxable.lm.train.train_lm."""

import logging
import sys

from argmaxable.config import from_snakemake
from argmaxable.lm.train import train_lm

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
train_lm(snakemake.input.vocab, snakemake.output.model, snakemake.output.activations, d=snakemake.params.d,
         cfg=snakemake.params.settings, head=snakemake.params.head, config=from_snakemake(snakemake))
