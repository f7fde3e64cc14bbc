"""Snakemake script of rule download_model: unpack the job and call argmaxable.detect.download.download_model."""

import sys

from argmaxable.detect.download import download_model
from argmaxable.fetch import DownloadError

snakemake = globals()["snakemake"]  # injected by Snakemake
sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - the job's log for the rest of the process
try:
    download_model(snakemake.params.model, snakemake.params.root, mirrors=snakemake.params.mirrors)
except DownloadError as err:  # one line in the log and on the console, no traceback
    print(f"argmaxable: {err}", file=sys.stderr)
    print(f"argmaxable: {err}", file=sys.__stderr__)
    sys.exit(1)
