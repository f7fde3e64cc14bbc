#!/usr/bin/env bash
# On the device: the paper rehearsal's largest heads, checked on the GPU and on the CPU path of the same
# machine, from their replicas made there (argmaxable.rehearsal.replicas.head_arrays: the same seeded values the
# local hub serves), no network, no download. Results: $OUT/hub.json (per head: n, d, dtype, seconds to make it,
# seconds of check_categories per device, verdict counts) and $OUT/hub.log.
#
# Runs from the repository root with the device's python3 (3.12; torch, numpy, scipy, threadpoolctl present) and
# highspy on PYTHONPATH: these replicas plant no rows, yet a few of XLM-R's rows reach the LP (a first try without
# it stopped there, 2026-11-26). Unpack the wheels of mlrehearse.sh's `prepare` plus highspy (device_carry/):
#   for w in device_carry/*.whl; do python3 -m zipfile -e $w /tmp/site; done; export PYTHONPATH=/tmp/site
# hydra, snakemake and gguf are not imported. About 70 s on an H100 (2026-11-26: the four heads 44 s of checks,
# 18 s of making their values; benchmarks/device_h100.json); HUB_CPU=1 adds torch's CPU path for the heads under
# 1e8 weights (minutes), HUB_HEADS picks other models.
set -euo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
timeout "${HUB_TIMEOUT:-110}" python3 - "$OUT" <<'PY' 2>&1 | tee "$OUT/hub.log"
import json, os, sys, time
import numpy as np
import torch
import argmaxable as am
from argmaxable.rehearsal.blobs import decode
from argmaxable.rehearsal.replicas import FAMILIES, LM_SHAPES, Entry, _seed, head_arrays

out = sys.argv[1]
# the largest n x d of the 149 and of the top-m models (HUB_HEADS: another comma-separated list)
heads = os.environ.get("HUB_HEADS", "xlm_roberta_large,xlm_roberta_base,llama2_7b,gpt2_xl").split(",")
devices = ["cuda"] + (["cpu"] if os.environ.get("HUB_CPU", "0") != "0" else [])
records = []
for key in heads:
    family, n, sizes = LM_SHAPES[key]
    merged = {**FAMILIES[family]["config"], **sizes}
    d = merged.get("hidden_size") or merged.get("n_embd") or merged["d_model"]
    dtype = sizes.get("_dtype", FAMILIES[family]["dtype"])
    bias = family in ("bert", "roberta", "xlm-roberta")
    entry = Entry(key, family, key, "", "", n, d, bias, dtype, [], "config", seed=_seed(key))
    start = time.perf_counter()
    W_blob, b_blob = head_arrays(entry, (n, d), (n,) if bias else None)
    W = decode(W_blob.read(0, W_blob.size), dtype).reshape(n, d)  # the stored values, as the pipeline reads them
    b = decode(b_blob.read(0, b_blob.size), dtype) if b_blob is not None else None
    made = time.perf_counter() - start
    record = {"model": key, "n": n, "d": d, "dtype": dtype, "make_s": round(made, 2), "checks": {}}
    for device in devices:
        if device == "cuda" and not torch.cuda.is_available():
            continue
        if device == "cpu" and n * d > 1e8 and "cuda" in record["checks"]:
            record["checks"]["cpu"] = "skipped (over 1e8 weights: minutes on the device's CPU)"
            continue
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        res = am.check_categories(W, b=b, device=device)
        if device == "cuda":
            torch.cuda.synchronize()
        record["checks"][device] = {"s": round(time.perf_counter() - start, 2),
                                    "status": {str(s): int((res.status == s).sum()) for s in np.unique(res.status)},
                                    "path": res.settings.get("numeric_path") or res.settings.get("path")}
        print(key, device, record["checks"][device], flush=True)
    records.append(record)
    with open(os.path.join(out, "hub.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                   "torch": torch.__version__, "heads": records}, f, indent=1)
PY
