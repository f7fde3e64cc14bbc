# lm family: a small word-level language model trained on the debtags descriptions, one per bottleneck width d.
# Run d is the model debtags_lm_d{d}: rule download_model takes its head from train_lm's
# output directory and check_model checks it like any released model; make_lm_report names the unargmaxable
# tokens per d and tabulates the range of the head's inputs (ACL 2022 Table 9 / thesis Table A.3, substitute).
# Prevention: train_lm_head trains the same LM with a head of argmaxable.layers, check_lm_head checks
# it, make_lm_prevention sets each beside the plain run of the same d (thesis §5.2, beyond the papers).
import re


# Imported under lm_ names: every rules file shares one namespace (multilabel.smk has its own TABLES).
from argmaxable.lm.report import FIGURES as LM_FIGURES, TABLES as LM_TABLES
from argmaxable.lm.prevention import FIGURE as LM_PREVENTION_FIGURE, TABLE as LM_PREVENTION_TABLE
from argmaxable.lm.schema import HEAD_KEY as LM_HEAD_KEY, MODEL_KEY as LM_MODEL_KEY

LM = f"{RESULTS}/lm"
# The runs' settings: prevention's choice of runs is left out, so that changing it retrains nothing.
LM_SETTINGS = {k: v for k, v in settings(CFG.lm).items() if k != "prevention"}
# Each width's model is in the list and each prevention width has its plain run: argmaxable.lm.schema.CHECKS,
# run when the config is composed.
LM_MODELS = {LM_MODEL_KEY.format(d=d): d for d in CFG.lm.d} if CFG.lm.enabled else {}
LM_RUNS = {LM_HEAD_KEY.format(head=h, d=d): (h, d) for h in CFG.lm.prevention.heads for d in CFG.lm.prevention.d}
LM_BASELINES = [LM_MODEL_KEY.format(d=d) for d in CFG.lm.prevention.d]
if not CFG.lm.enabled:
    LM_RUNS = {}

LM_TARGETS = []
if LM_MODELS:
    LM_TARGETS = [f"{LM}/tables/{t}.csv" for t in LM_TABLES] + [f"{LM}/figures/{f}.png" for f in LM_FIGURES]
    if LM_RUNS:
        LM_TARGETS += [f"{LM}/tables/{LM_PREVENTION_TABLE}.parquet", f"{LM}/figures/{LM_PREVENTION_FIGURE}.png"]


rule build_lm_vocab:
    conda:
        ENVIRONMENT
    output:
        f"{LM}/vocab.parquet",
    log:
        f"{LM}/logs/build_lm_vocab.log",
    params:
        settings=LM_SETTINGS,
    script:
        "../scripts/lm_build_vocab.py"


rule train_lm:
    conda:
        ENVIRONMENT
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
        head="linear",
        d=lambda wc: LM_MODELS[wc.model],
        settings=LM_SETTINGS,
    threads: CFG.lm.threads
    script:
        "../scripts/lm_train.py"


rule make_lm_report:
    conda:
        ENVIRONMENT
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


rule train_lm_head:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        run="|".join(map(re.escape, LM_RUNS)) or "none",
    input:
        vocab=f"{LM}/vocab.parquet",
    output:
        model=directory(f"{LM}/prevention/{{run}}"),
        activations=f"{LM}/prevention/activations/{{run}}.parquet",
    log:
        f"{LM}/logs/train_lm_head/{{run}}.log",
    params:
        head=lambda wc: LM_RUNS[wc.run][0],
        d=lambda wc: LM_RUNS[wc.run][1],
        settings=LM_SETTINGS,
    threads: CFG.lm.threads
    script:
        "../scripts/lm_train.py"


rule check_lm_head:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        run="|".join(map(re.escape, LM_RUNS)) or "none",
    input:
        model=f"{LM}/prevention/{{run}}",
    output:
        f"{LM}/prevention/checks/{{run}}.parquet",
    log:
        f"{LM}/logs/check_lm_head/{{run}}.log",
    params:
        rankings=CFG.lm.prevention.rankings,
        seed=CFG.lm.seed,
        check={k: CFG.detect[k] for k in ("bound", "patience", "eps", "solver")} | {"workers": CFG.lm.threads},
    threads: CFG.lm.threads
    script:
        "../scripts/lm_check_head.py"


rule make_lm_prevention:
    conda:
        ENVIRONMENT
    input:
        plain=expand(f"{LM}/{{model}}", model=LM_BASELINES),
        categories=expand(f"{RESULTS}/detect/{{model}}/categories.parquet", model=LM_BASELINES),
        runs=expand(f"{LM}/prevention/{{run}}", run=LM_RUNS),
        checks=expand(f"{LM}/prevention/checks/{{run}}.parquet", run=LM_RUNS),
    output:
        tables=[f"{LM}/tables/{LM_PREVENTION_TABLE}.{s}" for s in ("parquet", "csv", "md")],
        figures=[f"{LM}/figures/{LM_PREVENTION_FIGURE}.{s}" for s in ("png", "pdf")],
    log:
        f"{LM}/logs/make_lm_prevention.log",
    script:
        "../scripts/lm_make_prevention.py"
