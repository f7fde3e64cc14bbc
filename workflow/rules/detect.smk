# detect family: check every category of each configured model's softmax layer (002 §4, Fig. 4's combined
# algorithm) and gather the papers' table of potentially unargmaxable / unargmaxable tokens (002 appendix E).
import re

from omegaconf import OmegaConf

DETECT = f"{RESULTS}/detect"
DETECT_MODELS = list(CFG.model)


def detect_targets():
    if not DETECT_MODELS:
        return []
    return [f"{DETECT}/tables/detect.parquet", f"{DETECT}/tables/detect.md"]


rule check_model:
    wildcard_constraints:
        model="|".join(map(re.escape, DETECT_MODELS)) or "none",
    output:
        table=f"{DETECT}/{{model}}/categories.parquet",
        summary=f"{DETECT}/{{model}}/summary.json",
    log:
        f"{DETECT}/logs/check_model/{{model}}.log",
    params:
        model=lambda wc: OmegaConf.to_container(CFG.model[wc.model], resolve=True),
        detect=OmegaConf.to_container(CFG.detect, resolve=True),
    threads: CFG.detect.workers
    script:
        "../scripts/detect_check_model.py"


rule make_detect_table:
    input:
        expand(f"{DETECT}/{{model}}/summary.json", model=DETECT_MODELS),
    output:
        parquet=f"{DETECT}/tables/detect.parquet",
        md=f"{DETECT}/tables/detect.md",
    log:
        f"{DETECT}/logs/make_detect_table.log",
    script:
        "../scripts/detect_make_table.py"
