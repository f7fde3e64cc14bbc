#!/usr/bin/env bash
# Time the token audit (argmaxable.audit.audit_layer) of the default run's largest head shape on a GPU machine, against
# today's check of the same head in the same process. The real largest head, Gemma-3-270M's 262144 x 640,
# ships in a 253 MB GGUF that cannot travel (the tree carries at most 64 MiB), so the head is synthetic at its shape:
# unit rows, 16 clusters of 256 near-duplicates at 1e-4..1e-2 (benchmarks.clustered_sphere: the pattern of an LLM
# head's unused tokens), no bias. The check's Gram pass and reflection run on the GPU (device "auto"); the audit's
# tightened bounds, signals and the 10 LPs run on the CPU.
#
# Needs: python3 3.12 with numpy, scipy, pandas, pyarrow, torch (the image's); highspy as a wheel in .whl/ (carry
# .whl), fetched where pip works with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 -d .whl highspy==1.16.0
#   (highspy-1.16.0-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl, 3.2 MB,
#    sha256 3e52f3bf63d818d3a8cb9f437beb35cb5d77fbadd462317c6cdaa1933e476ec7).
# No data files. AUDIT_N / AUDIT_D shrink the head for a smoke test. Writes $OUT/audit.json (times in seconds, the device, the counts). About a minute on one H100.
set -euo pipefail
OUT=${OUT:-/tmp/audit-out}
mkdir -p "$OUT" /tmp/site
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/highspy-*.whl
export PYTHONPATH=/tmp/site:src:. PYTHONUNBUFFERED=1
python3 - "$OUT/audit.json" <<'PY'
import json, os, sys, time

import numpy as np
import torch

import argmaxable as am
from argmaxable.audit import audit_layer
from argmaxable.detect.loaders import Layer
from benchmarks.__main__ import clustered_sphere

n, d = int(os.environ.get("AUDIT_N", 262144)), int(os.environ.get("AUDIT_D", 640))  # Gemma-3-270M's head
W = clustered_sphere(n, d, 16, 256)
gpu = torch.cuda.is_available()
times = {}
t0 = time.perf_counter()
res = am.check_categories(W)  # device "auto": the GPU
if gpu:
    torch.cuda.synchronize()
times["check"] = time.perf_counter() - t0
t0 = time.perf_counter()
audit = audit_layer(Layer(W, None, "synthetic 262144 x 640, clustered"), name="synthetic Gemma-3 shape")
times["audit"] = time.perf_counter() - t0
t0 = time.perf_counter()
valid = am.verify_certificate(audit.hardest, W)
times["verify_hardest"] = time.perf_counter() - t0
out = {"device": torch.cuda.get_device_name(0) if gpu else "cpu", "shape": [n, d], "cpus": os.cpu_count(), "seconds": times,
       "ratio_audit_over_check": times["audit"] / times["check"], "audit_parts": audit.card["seconds"],
       "counts": res.counts(), "hardest_verified": int(valid.sum()), "hardest": len(audit.hardest.items)}
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out, indent=1))
PY
