#!/usr/bin/env bash
# GPU seconds per training step of the paper's multi-label sweep (issue 31): each dataset's encoder and head at
# each d in {25, 50, 100, 200, 400}, BSL and DFT, at the paper's batch and input shapes (CAML CNN 16 x 2500 tokens,
# PubMedBERT 32 x 512 subwords, TResNet-L 64 x 448 x 448), synthetic inputs, plus seconds per scored example.
# About 2-3 minutes on one H100 or H200 (stops itself at 200 s, keeping what it measured); writes
# $OUT/mlrehearse.json (benchmarks/RESULTS.md projects the sweep from it). Give it timeout_s=300.
#
#   bash scripts/device/mlrehearse.sh prepare   # here, once: the three wheels the device lacks, into device_carry/
#   bash scripts/device/mlrehearse.sh           # on the device, from the repository root (carry: device_carry)
#
# The device's python3 (3.12) brings torch (CUDA), numpy, transformers, safetensors and timm. It lacks omegaconf
# (and its antlr4-python3-runtime) and threadpoolctl, which argmaxable's modules import: they travel as pure-Python
# wheels in device_carry/ (git-ignored, 0.3 MB) and are imported from the wheel files through PYTHONPATH, so
# nothing is installed there. The PubMedBERT and TResNet-L replicas (random weights, true shapes) are written
# into a temporary directory on the device; no data file travels.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARRY=device_carry
WHEELS=("omegaconf==2.3.1" "antlr4-python3-runtime==4.9.3" "threadpoolctl==3.8.0")
if [ "${1:-}" = prepare ]; then
    mkdir -p "$CARRY"
    .venv/bin/pip wheel -q --no-deps -w "$CARRY" "${WHEELS[@]}"
    sha256sum "$CARRY"/*.whl
    exit 0
fi
OUT=${OUT:-results/device}
mkdir -p "$OUT"
if [ "$(ls "$CARRY"/*.whl 2>/dev/null | wc -l)" -lt ${#WHEELS[@]} ]; then
    echo "mlrehearse: $CARRY/ lacks the wheels ${WHEELS[*]}; run 'bash scripts/device/mlrehearse.sh prepare' here" >&2
    exit 1
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >"$OUT/mlrehearse_gpu.txt" || true
export PYTHONPATH="src:.:$(printf '%s:' "$CARRY"/*.whl)"
timeout 200 python3 -m benchmarks.multilabel_sweep --device cuda --full --repeats 3 --eval-batch 64 --threads 8 \
    --out "$OUT/mlrehearse.json"
