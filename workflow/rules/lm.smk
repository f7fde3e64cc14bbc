# lm family: a small word-level language model trained on the debtags descriptions, one per bottleneck width d
# (issue 9, part 4). Run d is the model debtags_lm_d{d}: rule download_model takes its head from train_lm's
# output directory and check_model checks it like any released model; make_lm_report names the unargmaxable
# tokens per d and tabulates the range of the head's inputs (002 Table 9 / thesis Table A.3, substitute).
import re

from omegaconf import OmegaConf

# Imported under lm_ names: every rules file shares one namespace (multilabel.smk has its own TABLES).
from argmaxable.lm.report import FIGURES as LM_FIGURES, TABLES as LM_TABLES
from argmaxable.lm.train import MODEL_KEY as LM_MODEL_KEY

LM = f"{RESULTS}/lm"
LM_SETTINGS = OmegaConf.to_container(CFG.lm, resolve=True)
LM_MODELS = {LM_MODEL_KEY.format(d=d): d for d in CFG.lm.d} if CFG.lm.enabled else {}
for _key in LM_MODELS:
    if _key not in CFG.model:
        sys.exit(f"argmaxable: lm.d asks for model '{_key}', which is not in the model list; add it to the "
                 "model defaults of config/config.yaml or set lm.enabled=false")
    if CFG.model[_key].download.path != f"{LM}/{_key}":
        sys.exit(f"argmaxable: model.{_key}.download.path must be train_lm's output {LM}/{_key}; "
                 f"got {CFG.model[_key].download.path!r}")


def lm_targets():
    if not LM_MODELS:
        return []
    return [f"{LM}/tables/{t}.csv" for t in LM_TABLES] + [f"{LM}/figures/{f}.png" for f in LM_FIGURES]


rule build_lm_vocab:
    output:
        f"{LM}/vocab.parquet",
    log:
        f"{LM}/logs/build_lm_vocab.log",
    params:
        settings=LM_SETTINGS,
    script:
        "../scripts/lm_build_vocab.py"


rule train_lm:
    wildcard_constraints:
        model="|".join(map(re.escape, LM_MODELS)) or "none",
    input:
        vocab=f"{LM}/vocab.parquet",
    output:
        model=directory(f"{LM}/{{model}}"),
        activations=f"{LM}/activations/{{model}}.parquet",
    log:
        f"{LM}/logs/train_lm/{{model}}.log",
    params:
        d=lambda wc: LM_MODELS[wc.model],
        settings=LM_SETTINGS,
    threads: CFG.lm.threads
    script:
        "../scripts/lm_train.py"


rule make_lm_report:
    input:
        vocab=f"{LM}/vocab.parquet",
        models=expand(f"{LM}/{{model}}", model=LM_MODELS),
        activations=expand(f"{LM}/activations/{{model}}.parquet", model=LM_MODELS),
        categories=expand(f"{RESULTS}/detect/{{model}}/categories.parquet", model=LM_MODELS),
    output:
        tables=[f"{LM}/tables/{t}.{s}" for t in LM_TABLES for s in ("csv", "md")],
        figures=[f"{LM}/figures/{f}.{s}" for f in LM_FIGURES for s in ("png", "pdf")],
    log:
        f"{LM}/logs/make_lm_report.log",
    params:
        models=list(LM_MODELS),
    script:
        "../scripts/lm_make_report.py"
