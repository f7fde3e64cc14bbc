"""Snakemake script of rule verify_head: LP-verify one run's dev/test label assignments."""

import logging
import sys
from pathlib import Path

from argmaxable.config import from_snakemake
from argmaxable.multilabel.verify import verify_run

sm = snakemake  # type: ignore[name-defined]  # noqa: F821
sys.stderr = open(sm.log[0], "w")  # noqa: SIM115  (open until the job ends)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")  # a line per chunk
verify_run(sm.input.dataset, Path(sm.input.head).parent, sm.output[0], verify=sm.params.verify,
           head=sm.wildcards.head, config=from_snakemake(sm))
