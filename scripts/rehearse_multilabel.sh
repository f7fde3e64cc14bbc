#!/usr/bin/env bash
# The rehearsal of the paper's multi-label half (every stage on stand-ins of the real inputs), one command from a
# fresh clone:
#
#   scripts/rehearse_multilabel.sh
#
# 1. environments: .venv (make .venv/.installed) and, for OpenImages' TResNet, .venv-images with the `images`
#    extra and the torch/torchvision pair timm needs (6.3 GB), so that neither the default install nor CI needs it;
# 2. stand-ins at their true sizes into data/rehearsal (argmaxable.multilabel.standins: no real record);
# 3. proves each line data/README.md promises: every input removed in turn, build_dataset must stop with one
#    line naming it (in a scratch results directory, so the real outputs are never touched);
# 4. snakemake with experiment=rehearsal: build_dataset for the three datasets, then per dataset one BSL and one
#    DFT run (config/multilabel/rehearsal.yaml), evaluation and test-set verification, the multi-label tables
#    and the report (results/rehearsal/report.md); OpenImages' jobs run in .venv-images;
# 5. results/rehearsal/jobs.md: wall time and peak RSS of every job (Snakemake's benchmark files) and of the
#    stand-ins' generation.
#
# A rerun does only what is missing. Disk: the stand-ins about 4.3 GB (20 x a 5 % run's, benchmarks/RESULTS.md;
# the true-size total is not measured), plus the shrunk encoders' replicas and the built datasets.
# EXTRA='key=value,...' adds Hydra overrides (plain values, no lists) to experiment=rehearsal, e.g.
# EXTRA='multilabel.runs.mimic3.max_steps=300'.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
IMAGES=${IMAGES_VENV:-.venv-images}
EXTRA=${EXTRA:-}
OVERRIDES="overrides=[experiment=rehearsal${EXTRA:+,$EXTRA}]"
timed() {  # timed NAME COMMAND...: run it, append its wall time and peak RSS to $RESULTS/generate.tsv
    local name=$1 out
    shift
    out=$(mktemp)
    /usr/bin/time -f "%e\t%M" -o "$out" "$@"
    printf '%s\t%s\n' "$name" "$(cat "$out")" >>"$RESULTS/generate.tsv"
    rm -f "$out"
}

# 1. Environments.
make "$VENV/.installed"
if [ ! -f "$IMAGES/.installed" ]; then
    python3 -m venv "$IMAGES"
    "$IMAGES/bin/pip" install -q --upgrade pip
    "$IMAGES/bin/pip" install -q -e '.[images]'
    # and the pipeline extra but its torch pin (Snakemake runs OpenImages' jobs from this environment)
    # shellcheck disable=SC2046
    "$IMAGES/bin/pip" install -q $("$IMAGES/bin/python" -c "import tomllib
print(' '.join(r for r in tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['pipeline']
               if not r.startswith('torch')))")
    # With the project's torch==2.13.0 pin pip picks torchvision 0.28.0, whose compiled operators do not load with
    # the CPU torch ("operator torchvision::nms does not exist"); timm needs a matching pair (a CUDA build).
    "$IMAGES/bin/pip" install -q torch==2.14.1 torchvision==0.29.1
    touch "$IMAGES/.installed"
fi

composed() {  # composed PYTHON-EXPRESSION: a value of the composed config (cfg), printed
    "$VENV/bin/python" -c "from argmaxable.config import load_config, to_plain; import sys
cfg = load_config(['experiment=rehearsal', *[o for o in sys.argv[1].split(',') if o]]); print($1)" "$EXTRA"
}
DATA=$(composed cfg.data_dir)
RESULTS=$(composed cfg.results_dir)
mkdir -p "$RESULTS"

# 2. Stand-ins (each dataset is skipped once its manifest.json is there).
ENCODERS=$(composed "__import__('json').dumps([r['encoder'] for r in to_plain(cfg.multilabel.runs).values()])")
timed standins "$VENV/bin/python" -m argmaxable.multilabel.standins "$DATA" --encoders "$ENCODERS"
timed tresnet_replica "$IMAGES/bin/python" -m argmaxable.multilabel.standins "$DATA" --tresnet --encoders "$ENCODERS"
CHECKPOINT=$(composed cfg.multilabel.runs.openimages.encoder.checkpoint)

# 3. Every input, removed in turn, stops build_dataset with one line naming it.
prove() {  # prove DATASET FILE: build DATASET without FILE; the job must fail with one line naming FILE
    local dataset=$1 file=$2 log
    log=$(mktemp)
    mv "$file" "$file.away"
    if "$VENV/bin/snakemake" --cores 1 --config "${OVERRIDES%]},results_dir=$RESULTS/proofs]" \
        -- "$RESULTS/proofs/datasets/$dataset" >"$log" 2>&1; then
        mv "$file.away" "$file"
        echo "rehearsal: building $dataset without $file succeeded; expected one line naming it" >&2
        exit 1
    fi
    mv "$file.away" "$file"
    if ! grep "^argmaxable: " "$log" | grep -qF "$(basename "$file")"; then
        echo "rehearsal: building $dataset without $file failed without a line naming it; see $log" >&2
        exit 1
    fi
    grep "^argmaxable: " "$log" | head -1 | sed "s|^|  $dataset without $(basename "$file"): |"
    rm -f "$log"
}
if [ ! -f "$RESULTS/proofs.done" ]; then
    echo "Each missing input stops build_dataset with one line:"
    for f in train_full.csv dev_full.csv test_full.csv; do prove mimic3 "$DATA/mimic3/$f"; done
    prove bioasq "$DATA/bioasq/allMeSH_2021.json"
    for f in oidv6-train-annotations-human-imagelabels.csv validation-annotations-human-imagelabels.csv \
        test-annotations-human-imagelabels.csv oidv6-classes-trainable.txt; do
        prove openimages "$DATA/openimages/$f"
    done
    prove openimages "$CHECKPOINT"
    prove openimages "$(find "$DATA/openimages/images" -name '1*.jpg' | sort | head -1)"
    rm -rf "$RESULTS/proofs"
    touch "$RESULTS/proofs.done"
fi

# 4. The runs: MIMIC-III and BioASQ in .venv, OpenImages in .venv-images, then the tables and the report.
runs() {  # the verify.parquet of every run of one dataset, from the composed config
    composed "' '.join(f'{cfg.results_dir}/multilabel/$1/{h}/d{d}/seed{s}/verify.parquet'
                   for r in [cfg.multilabel.runs['$1']] for h in r.heads for d in r.d for s in r.seeds)"
}
# shellcheck disable=SC2046
"$VENV/bin/snakemake" --cores 2 --config "$OVERRIDES" -- "$RESULTS/datasets/mimic3" "$RESULTS/datasets/bioasq" \
    "$RESULTS/datasets/openimages" $(runs mimic3) $(runs bioasq)
# shellcheck disable=SC2046
"$IMAGES/bin/snakemake" --cores 2 --config "$OVERRIDES" -- $(runs openimages)
"$VENV/bin/snakemake" --cores 2 --config "$OVERRIDES"

# 5. What each job cost.
"$VENV/bin/python" scripts/job_costs.py "$RESULTS" >"$RESULTS/jobs.md"
cat "$RESULTS/jobs.md"
