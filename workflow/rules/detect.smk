# detect family: download each configured model (download_model, one job per model, writing
# data/models/<key>/ with a manifest), check every category of its softmax layer from those local files (ACL 2022
# §4, Fig. 4's combined algorithm; with detect.shards > 1, one job per class range merged after) and gather the
# papers' table of potentially unargmaxable / unargmaxable tokens (ACL 2022 appendix E). Beyond the papers, the LM
# study (study_model per real model, make_lm_study) splits each real head's unargmaxable tokens into ties and
# rows strictly inside (argmaxable.detect.study), and the token audit (audit_model per study model, from its check's
# evidence; make_audit_index) writes a card per real head (argmaxable.audit).
import os
import re


from argmaxable.pipeline import download_params, steps_models, trained_input

DETECT = f"{RESULTS}/detect"
DETECT_MODELS = list(CFG.model)
SHARDS = CFG.detect.shards
# The LM study's models: detect.study_models that ran, or every checked model that is not a synthetic layer.
STUDY_MODELS = [m for m in (CFG.detect.study_models or DETECT_MODELS)
                if m in DETECT_MODELS and CFG.model[m].source != "random"]
STUDY = f"{DETECT}/study"
STUDY_OUT = {"md": f"{DETECT}/tables/lm_study.md", "parquet": f"{DETECT}/tables/lm_study.parquet",
             "tokens": f"{DETECT}/tables/lm_study_tokens.parquet", "png": f"{DETECT}/figures/lm_study_share.png"}
AUDIT = f"{DETECT}/audit"  # a card per study model: <key>.md, .html, .json, .tokens.parquet, evidence
AUDIT_OUT = {"parquet": f"{DETECT}/tables/audit_cards.parquet", "md": f"{DETECT}/tables/audit_cards.md"}
# The check's settings without the audit's: editing detect.audit reruns the audits only.
CHECK_SETTINGS = {k: v for k, v in settings(CFG.detect).items() if k != "audit"}


QUANT_MODELS = [m for m in DETECT_MODELS if CFG.model[m].quant]  # heads of the quantisation study
QUANT_TARGETS = [f"{DETECT}/tables/quant.parquet", f"{DETECT}/tables/quant.md"] if QUANT_MODELS else []
DETECT_TARGETS = [f"{DETECT}/tables/detect.parquet", f"{DETECT}/tables/detect.md", *QUANT_TARGETS,
                  *([*STUDY_OUT.values(), *AUDIT_OUT.values()] if STUDY_MODELS else [])] if DETECT_MODELS else []

MODEL_KEYS = "|".join(map(re.escape, DETECT_MODELS)) or "none"  # the {model} wildcard: a configured key


# The only job that touches the network; a small CPU allocation on a cluster (workflow/profiles/slurm).
rule download_model:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        model=MODEL_KEYS,
    input:
        lambda wc: trained_input(CFG, wc.model),
    output:
        model_input("{model}"),
    log:
        f"{DETECT}/logs/download_model/{{model}}.log",
    benchmark:
        f"{DETECT}/benchmarks/download_model/{{model}}.tsv"
    params:
        model=lambda wc: download_params(CFG, wc.model),
        root=lambda wc: model_dir(wc.model),
        mirrors=settings(CFG.mirrors),  # URL prefix rewrites (a new mirror refetches: --rerun-triggers mtime keeps)
    threads: 1
    script:
        "../scripts/detect_download_model.py"


if SHARDS == 1:

    rule check_model:
        conda:
            ENVIRONMENT
        wildcard_constraints:
            model=MODEL_KEYS,
        input:
            model_input("{model}"),
        output:
            table=f"{DETECT}/{{model}}/categories.parquet",
            summary=f"{DETECT}/{{model}}/summary.json",
            evidence=f"{DETECT}/{{model}}/evidence.npz",  # the paper box's, compact (start points from the model)
        log:
            f"{DETECT}/logs/check_model/{{model}}.log",
        benchmark:  # wall time and peak memory (max_rss) of the job
            f"{DETECT}/benchmarks/check_model/{{model}}.tsv"
        params:
            model=lambda wc: settings(CFG.model[wc.model]),
            root=lambda wc: model_dir(wc.model),
            detect=CHECK_SETTINGS,
        threads: CFG.detect.workers
        script:
            "../scripts/detect_check_model.py"

else:

    rule check_model_shard:
        conda:
            ENVIRONMENT
        input:
            model_input("{model}"),
        output:
            table=f"{DETECT}/{{model}}/shards/{{shard}}.parquet",
            facts=f"{DETECT}/{{model}}/shards/{{shard}}.json",
            evidence=f"{DETECT}/{{model}}/shards/{{shard}}.evidence.npz",
        wildcard_constraints:
            model=MODEL_KEYS,
            shard=r"\d+",
        log:
            f"{DETECT}/logs/check_model_shard/{{model}}/{{shard}}.log",
        params:
            model=lambda wc: settings(CFG.model[wc.model]),
            root=lambda wc: model_dir(wc.model),
            detect=CHECK_SETTINGS,
            shards=SHARDS,
        threads: CFG.detect.workers
        script:
            "../scripts/detect_check_model_shard.py"

    rule merge_model_shards:
        conda:
            ENVIRONMENT
        wildcard_constraints:
            model=MODEL_KEYS,
        input:
            tables=expand(f"{DETECT}/{{{{model}}}}/shards/{{shard}}.parquet", shard=range(SHARDS)),
            facts=expand(f"{DETECT}/{{{{model}}}}/shards/{{shard}}.json", shard=range(SHARDS)),
            evidence=expand(f"{DETECT}/{{{{model}}}}/shards/{{shard}}.evidence.npz", shard=range(SHARDS)),
        output:
            table=f"{DETECT}/{{model}}/categories.parquet",
            summary=f"{DETECT}/{{model}}/summary.json",
            evidence=f"{DETECT}/{{model}}/evidence.npz",
        log:
            f"{DETECT}/logs/merge_model_shards/{{model}}.log",
        params:
            model=lambda wc: settings(CFG.model[wc.model]),
        script:
            "../scripts/detect_merge_model_shards.py"


rule make_detect_table:
    conda:
        ENVIRONMENT
    input:
        expand(f"{DETECT}/{{model}}/summary.json", model=DETECT_MODELS),
    output:
        parquet=f"{DETECT}/tables/detect.parquet",
        md=f"{DETECT}/tables/detect.md",
    log:
        f"{DETECT}/logs/make_detect_table.log",
    script:
        "../scripts/detect_make_table.py"


# The papers' model tables and figures over whatever models ran (offline: the OCR heads and the small LM;
# experiment=paper: the 149 models). argmaxable.detect.figures draws them.
DETECT_TABLES = f"{DETECT}/tables"
DETECT_FIGURES = f"{DETECT}/figures"
STEPS_FIGURES = ("fig11", "fig12")
PAPER_FIGURE_TARGETS = [
    f"{DETECT_TABLES}/table1_sources.md",
    f"{DETECT_TABLES}/paper_tables.md",
    f"{DETECT_FIGURES}/fig6_unargmaxable_per_model.png",
    *(f"{DETECT_FIGURES}/{fig}_steps_per_token.png" for fig in STEPS_FIGURES),
    *(f"{DETECT_TABLES}/{fig}_steps_summary.csv" for fig in STEPS_FIGURES),
] if DETECT_MODELS else []


rule make_source_table:
    conda:
        ENVIRONMENT
    input:
        expand(f"{DETECT}/{{model}}/summary.json", model=DETECT_MODELS),
    output:
        md=f"{DETECT_TABLES}/table1_sources.md",
        parquet=f"{DETECT_TABLES}/table1_sources.parquet",
    log:
        f"{DETECT}/logs/make_source_table.log",
    script:
        "../scripts/detect_make_source_table.py"


rule make_paper_tables:
    conda:
        ENVIRONMENT
    input:
        expand(f"{DETECT}/{{model}}/summary.json", model=DETECT_MODELS),
    output:
        f"{DETECT_TABLES}/paper_tables.md",
    log:
        f"{DETECT}/logs/make_paper_tables.log",
    script:
        "../scripts/detect_make_paper_tables.py"


rule plot_unargmaxable_per_model:
    conda:
        ENVIRONMENT
    input:
        summaries=expand(f"{DETECT}/{{model}}/summary.json", model=DETECT_MODELS),
        studies=expand(f"{STUDY}/{{model}}.json", model=STUDY_MODELS),  # ties / near-ties / strictly inside
    output:
        f"{DETECT_FIGURES}/fig6_unargmaxable_per_model.png",
    log:
        f"{DETECT}/logs/plot_unargmaxable_per_model.log",
    script:
        "../scripts/detect_plot_unargmaxable.py"


rule plot_steps:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        figure="|".join(STEPS_FIGURES),
    input:
        tables=lambda wc: expand(f"{DETECT}/{{model}}/categories.parquet", model=steps_models(CFG, wc.figure)),
        summaries=lambda wc: expand(f"{DETECT}/{{model}}/summary.json", model=steps_models(CFG, wc.figure)),
    output:
        figure=f"{DETECT_FIGURES}/{{figure}}_steps_per_token.png",
        summary=f"{DETECT_TABLES}/{{figure}}_steps_summary.csv",
    log:
        f"{DETECT}/logs/plot_steps/{{figure}}.log",
    params:
        names=lambda wc: [CFG.model[m].name for m in steps_models(CFG, wc.figure)],
    script:
        "../scripts/detect_plot_steps.py"


# Quantisation study (beyond the papers, argmaxable.detect.quant): each head whose config lists `quant` types is
# requantised to each, checked, and compared token by token with the check of the file's own head.
rule quantise_model:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        model="|".join(map(re.escape, QUANT_MODELS)) or "none",
    input:
        manifest=model_input("{model}"),
        source=f"{DETECT}/{{model}}/categories.parquet",
    output:
        changes=f"{DETECT}/{{model}}/quant_changes.parquet",
        summary=f"{DETECT}/{{model}}/quant.json",
    log:
        f"{DETECT}/logs/quantise_model/{{model}}.log",
    params:
        model=lambda wc: settings(CFG.model[wc.model]),
        root=lambda wc: model_dir(wc.model),
        detect=CHECK_SETTINGS,
        types=lambda wc: list(CFG.model[wc.model].quant),
    threads: CFG.detect.workers
    script:
        "../scripts/detect_quantise_model.py"


rule make_quant_table:
    conda:
        ENVIRONMENT
    input:
        summaries=expand(f"{DETECT}/{{model}}/quant.json", model=QUANT_MODELS),
        changes=expand(f"{DETECT}/{{model}}/quant_changes.parquet", model=QUANT_MODELS),
    output:
        parquet=f"{DETECT}/tables/quant.parquet",
        md=f"{DETECT}/tables/quant.md",
        changes_parquet=f"{DETECT}/tables/quant_changes.parquet",
        changes_md=f"{DETECT}/tables/quant_changes.md",
    log:
        f"{DETECT}/logs/make_quant_table.log",
    script:
        "../scripts/detect_make_quant_table.py"


# Beyond the papers, beside ACL Table 4 / thesis Fig. A.2: the LM study over the real heads (argmaxable.detect.study).
rule study_model:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        model=MODEL_KEYS,
    input:
        model=model_input("{model}"),
        table=f"{DETECT}/{{model}}/categories.parquet",
        summary=f"{DETECT}/{{model}}/summary.json",
    output:
        record=f"{STUDY}/{{model}}.json",
        tokens=f"{STUDY}/{{model}}_tokens.parquet",
    log:
        f"{DETECT}/logs/study_model/{{model}}.log",
    benchmark:
        f"{DETECT}/benchmarks/study_model/{{model}}.tsv"
    params:
        model=lambda wc: settings(CFG.model[wc.model]),
        root=lambda wc: model_dir(wc.model),
        detect=CHECK_SETTINGS,
    threads: CFG.detect.workers
    script:
        "../scripts/detect_study_model.py"


rule make_lm_study:
    conda:
        ENVIRONMENT
    input:
        records=expand(f"{STUDY}/{{model}}.json", model=STUDY_MODELS),
        tokens=expand(f"{STUDY}/{{model}}_tokens.parquet", model=STUDY_MODELS),
    output:
        **STUDY_OUT,
    log:
        f"{DETECT}/logs/make_lm_study.log",
    script:
        "../scripts/detect_make_lm_study.py"


# The token audit (argmaxable.audit): a card per study model from its check's evidence (no second check), and their
# index, which the report's LM study links.
rule audit_model:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        model=MODEL_KEYS,
    input:
        model=model_input("{model}"),
        evidence=f"{DETECT}/{{model}}/evidence.npz",
    output:
        **{key: f"{AUDIT}/{{model}}{suffix}" for key, suffix in (
            ("md", ".md"), ("html", ".html"), ("json", ".json"), ("tokens", ".tokens.parquet"),
            ("evidence", ".evidence.npz"), ("hardest", ".hardest.evidence.npz"))},
    log:
        f"{DETECT}/logs/audit_model/{{model}}.log",
    params:
        model=lambda wc: settings(CFG.model[wc.model]),
        root=lambda wc: model_dir(wc.model),
        detect=settings(CFG.detect),
        prefix=lambda wc: f"{AUDIT}/{wc.model}",
        # the model itself runs (round trip, prompting test) for detect.audit.prompt_models
        prompt=lambda wc: wc.model in CFG.detect.audit.prompt_models,
    threads: CFG.detect.workers
    script:
        "../scripts/detect_audit_model.py"


rule make_audit_index:
    conda:
        ENVIRONMENT
    input:
        expand(f"{AUDIT}/{{model}}.json", model=STUDY_MODELS),
    output:
        **AUDIT_OUT,
    log:
        f"{DETECT}/logs/make_audit_index.log",
    params:
        results=lambda wc, output: os.path.dirname(os.path.dirname(os.path.dirname(output.parquet))),  # report's dir
    script:
        "../scripts/detect_make_audit_index.py"
