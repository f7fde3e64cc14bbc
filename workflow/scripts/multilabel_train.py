"""Snakemake script of rule train_head: train one (dataset, head, d, seed) run."""

import logging
import sys
from pathlib import Path

from argmaxable.config import from_snakemake
from argmaxable.multilabel.train import train_run

sm = snakemake  # type: ignore[name-defined]  # noqa: F821
sys.stderr = open(sm.log[0], "w")  # noqa: SIM115  (open until the job ends)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
train_run(sm.input.dataset, Path(sm.output.train).parent, head=sm.wildcards.head, d=int(sm.wildcards.d),
          seed=int(sm.wildcards.seed), run=sm.params.run, config=from_snakemake(sm))
