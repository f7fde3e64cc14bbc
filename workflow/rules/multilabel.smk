# multilabel family: train BSL and DFT heads over d x head x seed, verify their label assignments with the
# LP, and aggregate thesis Tables 4.2, 5.1, 5.2 and Figs 4.3, 5.6-5.8 (thesis §4.1.2, §5.1.3); Tables 4.1 and
# A.4 set the datasets and hyperparameters beside the paper's.

from argmaxable.multilabel.aggregate import FIGURES, TABLES
from argmaxable.multilabel.setup_tables import SETUP_TABLES
ML = f"{RESULTS}/multilabel"
ML_RUNS = settings(CFG.multilabel.runs) if CFG.multilabel.enabled else {}  # each a data set: multilabel CHECKS
ML_RUN_DIR = f"{ML}/{{dataset}}/{{head}}/d{{d}}/seed{{seed}}"
ML_WILDCARDS = {"dataset": "|".join(ML_RUNS) or "none", "head": "bsl|dft", "d": r"\d+", "seed": r"\d+"}
# Every run directory of the sweep: dataset x head x d x seed.
ML_RUN_DIRS = [ML_RUN_DIR.format(dataset=ds, head=h, d=d, seed=s)
               for ds, run in ML_RUNS.items() for h in run["heads"] for d in run["d"] for s in run["seeds"]]
# SLURM requests of each dataset's jobs (multilabel.resources: measured, see benchmarks/RESULTS.md); a dataset
# without an entry gets the schema's defaults. Resources are not params: editing them reruns nothing.
ML_RESOURCES = {name: pipeline.dataset_resources(CFG, name) for name in ML_RUNS}
MULTILABEL_TARGETS = ([f"{ML}/tables/{t}.csv" for t in (*TABLES, *SETUP_TABLES)]
                      + [f"{ML}/figures/{f}.png" for f in FIGURES]) if ML_RUNS else []


rule train_head:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        **ML_WILDCARDS,
    input:
        dataset=f"{RESULTS}/datasets/{{dataset}}",
    output:
        train=f"{ML_RUN_DIR}/train.json",
        curve=f"{ML_RUN_DIR}/curve.csv",
        head=f"{ML_RUN_DIR}/head.npz",
    log:
        f"{ML}/logs/train_head/{{dataset}}_{{head}}_d{{d}}_seed{{seed}}.log",
    benchmark:
        f"{ML}/benchmarks/train_head/{{dataset}}_{{head}}_d{{d}}_seed{{seed}}.tsv"  # wall time, peak RSS (max_rss)
    params:
        run=lambda wc: ML_RUNS[wc.dataset],
    threads: lambda wc: ML_RUNS[wc.dataset]["threads"]
    resources:
        mem_mb=lambda wc: ML_RESOURCES[wc.dataset]["train"]["mem_mb"],
        runtime=lambda wc: ML_RESOURCES[wc.dataset]["train"]["runtime"],
        gpu=lambda wc: ML_RESOURCES[wc.dataset]["train"]["gpu"],
    script:
        "../scripts/multilabel_train.py"


rule verify_head:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        **ML_WILDCARDS,
    input:
        dataset=f"{RESULTS}/datasets/{{dataset}}",
        head=f"{ML_RUN_DIR}/head.npz",
    output:
        f"{ML_RUN_DIR}/verify.parquet",
    log:
        f"{ML}/logs/verify_head/{{dataset}}_{{head}}_d{{d}}_seed{{seed}}.log",
    benchmark:
        f"{ML}/benchmarks/verify_head/{{dataset}}_{{head}}_d{{d}}_seed{{seed}}.tsv"
    params:
        verify=settings(CFG.multilabel.verify),
    threads: CFG.multilabel.verify.workers
    resources:
        mem_mb=lambda wc: ML_RESOURCES[wc.dataset]["verify"]["mem_mb"],
        runtime=lambda wc: ML_RESOURCES[wc.dataset]["verify"]["runtime"],
    script:
        "../scripts/multilabel_verify.py"


rule make_multilabel_report:
    conda:
        ENVIRONMENT
    input:
        train=[f"{p}/train.json" for p in ML_RUN_DIRS],
        verify=[f"{p}/verify.parquet" for p in ML_RUN_DIRS],
    output:
        tables=[f"{ML}/tables/{t}.{s}" for t in ("summary", *TABLES) for s in ("csv", "md")],
        figures=[f"{ML}/figures/{f}.{s}" for f in FIGURES for s in ("png", "pdf")],
    log:
        f"{ML}/logs/make_multilabel_report.log",
    params:
        run_dirs=ML_RUN_DIRS,
        loss_curve_d=CFG.multilabel.loss_curve_d,
    script:
        "../scripts/multilabel_aggregate.py"


rule make_setup_tables:
    conda:
        ENVIRONMENT
    input:
        datasets=[f"{RESULTS}/datasets/{name}" for name in ML_RUNS],
    output:
        table_4_1=f"{ML}/tables/table_4_1.csv",
        table_a_4=f"{ML}/tables/table_A_4.csv",
        copies=[f"{ML}/tables/{t}.md" for t in SETUP_TABLES],
    log:
        f"{ML}/logs/make_setup_tables.log",
    params:
        names=list(ML_RUNS),
        runs=ML_RUNS,
    script:
        "../scripts/multilabel_setup_tables.py"
