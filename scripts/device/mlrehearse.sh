#!/usr/bin/env bash
# GPU seconds per training step of the paper's multi-label sweep: each dataset's encoder and head at
# each d in {25, 50, 100, 200, 400}, BSL and DFT, at the paper's batch and input shapes (CAML CNN 16 x 2500 tokens,
# PubMedBERT 32 x 512 subwords, TResNet-L 64 x 448 x 448), synthetic inputs, plus seconds per scored example and
# peak GPU memory. Stops itself at 200 s (keeping what it measured; about 4 minutes with the replicas' writing);
# writes $OUT/mlrehearse.json (benchmarks/RESULTS.md projects the sweep from it). Give it timeout_s=300.
#
#   bash scripts/device/mlrehearse.sh prepare   # here, once: the wheels the device lacks, into device_carry/
#   bash scripts/device/mlrehearse.sh           # on the device, from the repository root (carry: device_carry)
#
# The device's python3 (3.12, torch 2.11 with CUDA 13.0, numpy, transformers, safetensors) lacks omegaconf (and
# its antlr4-python3-runtime) and threadpoolctl, which argmaxable's modules import, and, for OpenImages'
# TResNet-L, timm with the torchvision of torch 2.11 (0.26.0, built for CUDA 13.0) and pillow. All travel as
# wheels in device_carry/ (git-ignored, 18 MB), unpacked on the device into a temporary directory put on
# PYTHONPATH: nothing is installed there and nothing is fetched. Should timm still not import, OpenImages is
# recorded as skipped with the reason and the other two are measured. The PubMedBERT and TResNet-L replicas
# (random weights, true shapes) are written on the device; no data file travels.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARRY=device_carry
PURE=("omegaconf==2.3.1" "antlr4-python3-runtime==4.9.3" "threadpoolctl==3.8.0" "timm==1.0.31")
BINARY=("torchvision==0.26.0" "pillow==12.0.0")  # for the device's Python 3.12 and x86-64 Linux
if [ "${1:-}" = prepare ]; then
    mkdir -p "$CARRY"
    .venv/bin/pip wheel -q --no-deps -w "$CARRY" "${PURE[@]}"
    .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 -d "$CARRY" "${BINARY[@]}"
    sha256sum "$CARRY"/*.whl
    exit 0
fi
OUT=${OUT:-results/device}
mkdir -p "$OUT"
WANT=$(( ${#PURE[@]} + ${#BINARY[@]} ))
if [ "$(find "$CARRY" -name '*.whl' 2>/dev/null | wc -l)" -lt "$WANT" ]; then
    echo "mlrehearse: $CARRY/ lacks some of the wheels ${PURE[*]} ${BINARY[*]}; run" \
        "'bash scripts/device/mlrehearse.sh prepare' here and carry $CARRY" >&2
    exit 1
fi
SITE=$(mktemp -d)
trap 'rm -rf "$SITE"' EXIT
for wheel in "$CARRY"/*.whl; do python3 -m zipfile -e "$wheel" "$SITE"; done
export PYTHONPATH="src:.:$SITE"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >"$OUT/mlrehearse_gpu.txt" || true
python3 -c "import torch, torchvision, timm; print('torch', torch.__version__, 'torchvision', torchvision.__version__,
'timm', timm.__version__)" >"$OUT/mlrehearse_versions.txt" 2>&1 || true
timeout 200 python3 -m benchmarks.multilabel_sweep --device cuda --full --repeats 3 --eval-batch 64 --threads 8 \
    --out "$OUT/mlrehearse.json"
