#!/usr/bin/env bash
# Snakemake runs this inside the rules' environment (environment.yml) right after building it (--sdm conda),
# from the workflow's working directory, the repository root: the project as pyproject.toml declares it
# (torch==2.13.0 is already there, conda-forge's CPU build).
set -euo pipefail
pip install -e ".[pipeline]"
