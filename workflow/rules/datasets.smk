# datasets family: build each configured multi-label dataset (config/datasets/*.yaml) into an Arrow
# DatasetDict with labels.json, stats.json and a histogram of active labels (thesis Fig. 5.1).
from argmaxable.multilabel.datasets.debtags import APT_LISTS, SNAPSHOT
from argmaxable.pipeline import dataset_download, snapshot_version

DATASETS = f"{RESULTS}/datasets"
DATASETS_TARGETS = [f"{DATASETS}/{name}" for name in CFG.datasets]


# Fetches data/<dataset>/ (label CSVs and images, PhysioNet or BioASQ files) with a manifest; credentials from
# the environment; a small CPU allocation on a cluster (workflow/profiles/slurm).
rule download_dataset:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        dataset="|".join(name for name, ds in CFG.datasets.items() if ds.download) or "none",
    output:
        f"{DATA}/{{dataset}}/manifest.json",
    log:
        f"{DATASETS}/logs/download_dataset_{{dataset}}.log",
    params:
        dataset=lambda wc: settings(CFG.datasets[wc.dataset]),
        root=lambda wc: f"{DATA}/{wc.dataset}",
    threads: 1
    script:
        "../scripts/datasets_download.py"


# Params hold only this dataset's settings: Snakemake reruns a job when its params change, and
# an unrelated config edit must not rebuild the dataset and, downstream, retrain every head.
rule build_dataset:
    conda:
        ENVIRONMENT
    wildcard_constraints:
        dataset="|".join(CFG.datasets) or "none",
    input:
        lambda wc: dataset_download(CFG, wc.dataset),
    output:
        directory(f"{DATASETS}/{{dataset}}"),
    log:
        f"{DATASETS}/logs/build_dataset_{{dataset}}.log",
    benchmark:
        f"{DATASETS}/benchmarks/build_dataset/{{dataset}}.tsv"  # wall time, peak RSS (max_rss)
    params:
        dataset=lambda wc: settings(CFG.datasets[wc.dataset]),
        snapshot=lambda wc: snapshot_version(CFG, wc.dataset),
        data_root=DATA,  # downloaded or hand-placed inputs (MIMIC-III, BioASQ, OpenImages); see data/README.md
    script:
        "../scripts/datasets_build.py"


# Maintenance, not part of `all`: rebuild the shipped debtags snapshot from this machine's apt lists.
# Run `apt-get -o Acquire::Languages=en update` (as root, on Debian) first, then
#   snakemake --cores 1 --forcerun make_debtags_snapshot -- make_debtags_snapshot
rule make_debtags_snapshot:
    conda:
        ENVIRONMENT
    output:
        parquet=str(SNAPSHOT),
        meta=str(SNAPSHOT.with_suffix(".meta.json")),
    log:
        f"{DATASETS}/logs/make_debtags_snapshot.log",
    params:
        lists_dir=str(APT_LISTS),
    script:
        "../scripts/datasets_snapshot.py"
