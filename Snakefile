# argmaxable pipeline. Run: snakemake --cores N [--config 'overrides=[experiment=paper, ...]']
# The Hydra config is composed and validated in workflow/rules/common.smk before any job is scheduled.

include: "workflow/rules/common.smk"
include: "workflow/rules/detect.smk"
include: "workflow/rules/datasets.smk"
include: "workflow/rules/theory.smk"
include: "workflow/rules/multilabel.smk"
include: "workflow/rules/lm.smk"
include: "workflow/rules/topm.smk"  # after lm: it reads the lm family's trained heads
include: "workflow/rules/report.smk"  # last: it reads every family's targets


rule all:
    input:
        DETECT_TARGETS,
        PAPER_FIGURE_TARGETS,
        DATASETS_TARGETS,
        THEORY_TARGETS,
        MULTILABEL_TARGETS,
        TOPM_TARGETS,
        rules.make_report.output,
        LM_TARGETS,
    default_target: True
