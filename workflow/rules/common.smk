# Shared by every rules file: the composed Hydra config (CFG), the results root and helpers.
import sys

from argmaxable.config import ConfigError, load_config


def _compose():
    overrides = config.get("overrides", [])
    if isinstance(overrides, str):
        overrides = [overrides]
    try:
        return load_config(list(overrides), config_dir=workflow.basedir + "/config")
    except ConfigError as err:
        # One line, no traceback: a bad config must stop the run before any job is scheduled.
        print(f"argmaxable: {err}", file=sys.stderr)
        sys.exit(1)


CFG = _compose()
RESULTS = CFG.results_dir
DATA = CFG.data_dir


def model_dir(key):
    """A model's downloaded files (rule download_model): data/models/<key>/."""
    return f"{DATA}/models/{key}"


def model_input(key):
    """What a job reading a model's files depends on: the manifest download_model writes last."""
    return f"{model_dir(key)}/manifest.json"

# Rules pass only the settings a job uses as params (a change elsewhere must not rerun it); scripts record the
# full tree for provenance with argmaxable.config.from_snakemake(snakemake).


def family_outputs(root, tables=None, figures=None):
    """Named outputs {key: path} of a rule writing tables ({key: stem} -> <root>/tables/<stem>.parquet) and
    figures (-> <root>/figures/<stem>.png), plus ``copies``: the .md beside each table and the .pdf beside each
    figure (the package writes both; Snakemake must know them to clean and rerun)."""
    named = {key: f"{root}/tables/{stem}.parquet" for key, stem in (tables or {}).items()}
    named |= {key: f"{root}/figures/{stem}.png" for key, stem in (figures or {}).items()}
    copies = [p.removesuffix(".parquet") + ".md" if p.endswith(".parquet")
              else p.removesuffix(".png") + ".pdf" for p in named.values()]
    return {**named, "copies": copies}
