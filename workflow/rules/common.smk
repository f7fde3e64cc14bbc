# Shared by every rules file: the composed Hydra config (CFG), the results root and the path helpers. What the
# rules compute from the config lives in argmaxable.pipeline; the rules files hold rules.
import os
import sys
from functools import partial
from pathlib import Path

from argmaxable import pipeline
from argmaxable.config import share_composed
from argmaxable.pipeline import compose, family_outputs, settings

for name, value in pipeline.JOB_ENVIRONMENT.items():  # jobs inherit it (argmaxable.pipeline says why)
    os.environ.setdefault(name, value)
CFG = compose(config.get("overrides", []), Path(workflow.basedir) / "config")
# The composed tree for the jobs' provenance records, written once (argmaxable.config.from_snakemake reads it).
share_composed(CFG, config.get("overrides", []), Path(workflow.basedir) / "config", Path(".snakemake") / "argmaxable")
RESULTS = CFG.results_dir
DATA = CFG.data_dir
# Every rule runs in the project's environment when Snakemake deploys software (--sdm conda; see docs/development.md).
# A conda: path is relative to the rules file: workflow/rules/../../environment.yml.
ENVIRONMENT = "../../environment.yml"

model_dir = partial(pipeline.model_dir, DATA)  # a model's downloaded files: data/models/<key>
model_input = partial(pipeline.model_input, DATA)  # the manifest.json download_model writes last

# Rules pass only the settings a job uses as params (a change elsewhere must not rerun it); scripts record the
# full tree for provenance with argmaxable.config.from_snakemake(snakemake).
