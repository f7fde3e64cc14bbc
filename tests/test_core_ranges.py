"""Values beyond float32's and bfloat16's range: the check's fast path and the verifier's low-precision passes cast
float64 values to those types; each either holds its bounds or falls back to float64. Oracles: scipy's LP (HiGHS
through scipy, never the project's solver code) and float64 arithmetic on margins far from any rounding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

import argmaxable as am
from argmaxable import verify as verify_module
from argmaxable.core import fastpath

EPS = 1e-8


def chebyshev_radius(W, b, t, bound=100.0):
    """Category t's Chebyshev radius in |x_j| <= bound by scipy's linprog (capped at 1), on rows of moderate size."""
    d = W.shape[1]
    A = np.delete(W, t, axis=0) - W[t]
    c = np.delete(b, t) - b[t]
    norms = np.linalg.norm(A, axis=1)
    res = linprog(np.r_[np.zeros(d), -1.0], A_ub=np.column_stack([A, norms]), b_ub=-c,
                  bounds=[(-bound, bound)] * d + [(None, 1.0)], method="highs")
    assert res.status == 0
    return -res.fun


def forged(result, status, witness):
    """``result`` with every item claiming ``status`` and the witnesses given, nothing else."""
    k = len(result.status)
    return dataclasses.replace(
        result, status=np.array([status] * k), witness=np.asarray(witness, dtype=np.float64),
        radius=np.full(k, np.nan), radius_upper=np.full(k, np.nan), exact={},
        certificates=[(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in range(k)],
        answers={"eps": np.array(["yes" if status == "argmaxable" else "no"] * k)})


@pytest.fixture(scope="module")
def issue_layer():
    """A float32 layer above the float32-products threshold, its first tenth of rows shrunk (some fall inside),
    with its check and the check of the same layer beside a constant bias of -3e40."""
    rng = np.random.default_rng(2)
    W = rng.standard_normal((3200, 64)).astype(np.float32)
    W[:320] *= 0.3
    b = np.full(len(W), -3e40)
    return W, b, am.check_categories(W), am.check_categories(W, b=b)


def test_float32_layer_with_a_bias_beyond_float32_gets_the_bias_free_verdicts(issue_layer):
    # A constant bias changes no argmax. -3e40 is finite in float64 and beyond float32's range: cast there it was
    # -inf, every other row ruled out, every category "argmaxable" at its start point (and verified).
    W, b, plain, res = issue_layer
    np.testing.assert_array_equal(res.status, plain.status)
    unarg = np.flatnonzero(res.status == "unargmaxable")
    assert len(unarg) > 100
    assert am.verify_certificate(res, W, b).all()
    W64 = W.astype(np.float64)
    for t in unarg[:3]:  # the independent LP: no ball in the region
        assert chebyshev_radius(W64, np.zeros(len(W)), int(t)) < 1e-10
    for t in np.flatnonzero(res.status == "argmaxable")[:3]:
        assert chebyshev_radius(W64, np.zeros(len(W)), int(t)) > EPS


def test_verifier_refuses_start_points_that_lose_under_a_bias_beyond_float32(issue_layer):
    # The verdicts the cast produced, as a result: every category "argmaxable" at its own row. The verifier's
    # low-precision pass cast the scaled biases to bfloat16 (-inf) and accepted all of them.
    W, b, plain, _ = issue_layer
    ok = am.verify_certificate(forged(plain, "argmaxable", W.astype(np.float64)), W, b)
    z = W.astype(np.float64) @ W.T.astype(np.float64)  # each start point's logits (b adds one constant)
    own = np.diag(z).copy()
    z[np.arange(len(W)), np.arange(len(W))] = -np.inf
    loses = z.max(axis=1) >= own  # another row at least as high: not a witness
    assert loses.sum() > 100
    assert not ok[loses].any()


@pytest.mark.parametrize("float32", [False, True])  # as the CPU has them, and as on a CPU without bfloat16
@pytest.mark.parametrize(("n", "k"), [(300, 300), (5000, 40)])  # the fast pass; the near path (n > 4096, < 256)
def test_verifier_refuses_tiny_forged_witnesses_beside_negative_biases(n, k, float32, monkeypatch):
    # Witnesses of size 1e-40 make the scaled biases b / (kw kx) about 1e40: beyond bfloat16 and float32, cast to
    # -inf, they ruled every other row out. At x ~ 0 only the category of the largest bias wins (by far).
    if float32:
        import torch

        monkeypatch.setattr(verify_module, "_lowp", lambda: (torch.float32, 2.0**-24, 2.0**-24, 2.0**-150))
    rng = np.random.default_rng(7)
    W = rng.standard_normal((n, 16))
    b = -rng.uniform(3, 10, n)  # every scaled bias beyond both types: -3 / (8 x 2^-130)
    items = np.arange(k)
    res = forged(am.check_categories(W, items, b, patience=1), "argmaxable", 1e-40 * rng.standard_normal((k, 16)))
    ok = am.verify_certificate(res, W, b)
    # float64 oracle: the logits are b up to 1e-38; the bias gaps are far above that
    gaps = b.max() - b[items]
    wins = gaps == 0
    assert (gaps[~wins] > 1e-12).all()
    np.testing.assert_array_equal(ok, wins)


def test_float32_head_with_a_bias_near_float64s_top_is_not_scaled_to_duplicates():
    # A bias of 1e195 (> 2^647) made the check scale the layer by 2^-148 in float32: every row underflowed and every
    # category came back "duplicate, unargmaxable". The constant bias changes nothing: the verdicts are W's.
    rng = np.random.default_rng(5)
    W = rng.standard_normal((60, 3)).astype(np.float32)
    b = np.full(60, 1e195)
    res = am.check_categories(W, b=b)
    plain = am.check_categories(W)
    np.testing.assert_array_equal(res.status, plain.status)
    assert (res.status == "argmaxable").sum() >= 3
    W64 = W.astype(np.float64)
    for t in range(60):
        r = chebyshev_radius(W64, np.zeros(60), t)
        if r > 1e-6 or r < 1e-10:
            assert res.status[t] == ("argmaxable" if r > 1e-6 else "unargmaxable")
    assert am.verify_certificate(res, W, b).all()


def test_float32_layer_scaled_in_float64_when_its_bias_is_beyond_the_range():
    # Biases spanning -2e195..2e195 (not an exact shift): the layer is scaled by 2^-148, which float32 rows cannot
    # take; only the largest bias can win (the others lose by ~1e179, far beyond any logit of the box).
    rng = np.random.default_rng(6)
    W = rng.standard_normal((80, 4)).astype(np.float32)
    b = rng.uniform(-2, 2, 80) * 1e195
    res = am.check_categories(W, b=b)
    want = np.where(np.arange(80) == np.argmax(b), "argmaxable", "unargmaxable")
    np.testing.assert_array_equal(res.status, want)
    assert am.verify_certificate(res, W, b).all()


def test_layer_beyond_the_narrow_range_runs_its_fast_path_in_float64():
    # Rows near 1e-30 (norms below 2^-60): float32 and bfloat16 products would lose bits to subnormals that their
    # relative bounds do not count, so the fast path stays in float64; the verdicts are those of the layer x 1e30.
    rng = np.random.default_rng(8)
    W = rng.standard_normal((4000, 60))
    classes = np.arange(0, 4000, 50)
    small = am.check_categories(W * 2.0**-100, classes)
    assert small.settings["numeric_path"] == "float64"
    plain = am.check_categories(W, classes)
    assert plain.settings["numeric_path"] != "float64"
    np.testing.assert_array_equal(small.status, plain.status)
    assert am.verify_certificate(small, W * 2.0**-100).all()


def _joint_layer(data):
    """A moderate layer (float32 values) and the same layer jointly scaled by 2^k, optionally with a constant bias
    of magnitude 2^m (both change no region and no radius), as float32 where its values fit, else float64."""
    n = data.draw(st.integers(6, 24), label="n")
    d = data.draw(st.integers(2, 5), label="d")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    rng = np.random.default_rng(seed)
    W0 = rng.standard_normal((n, d)).astype(np.float32).astype(np.float64)
    b0 = rng.standard_normal(n).astype(np.float32).astype(np.float64) if data.draw(st.booleans(), label="b") \
        else np.zeros(n)
    k = data.draw(st.sampled_from([0, -100, -126, -140, -149, -200, 100, 120, 126, 127, 140, 600, -600]), label="k")
    W, b = W0 * 2.0**k, b0 * 2.0**k
    if not b0.any() and data.draw(st.booleans(), label="constant"):
        m = data.draw(st.sampled_from([60, 100, 128, 129, 200, 700, 1000]), label="m")
        b = np.full(n, data.draw(st.sampled_from([-1.0, 1.0]), label="sign") * 2.0**m)
    with np.errstate(over="ignore"):
        as32 = W.astype(np.float32)
    if np.array_equal(as32.astype(np.float64), W) and data.draw(st.booleans(), label="float32"):
        W = as32
    return W0, b0, W, b


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_layers_straddling_float32s_range_hold_to_the_lp(data):
    # Every layer takes the float32 fast path (and bfloat16 where the CPU has it): a value beyond their range must
    # send it to float64, never into a verdict. Each verdict is held to scipy's LP on the moderate layer and to
    # the verifier on the layer as given.
    W0, b0, W, b = _joint_layer(data)
    with pytest.MonkeyPatch.context() as mp:  # float32 and bfloat16 products for a layer of any size
        mp.setattr(fastpath, "FLOAT32_ABOVE", 0)
        mp.setattr(fastpath, "BF16_ABOVE", 0)
        res = am.check_categories(W, b=b)
    assert am.verify_certificate(res, W, b).all()
    for t in range(len(W0)):
        r = chebyshev_radius(W0, b0, t)
        if res.status[t] == "argmaxable":
            assert r > EPS * (1 - 1e-6) - 1e-12
        elif res.status[t] == "unargmaxable":
            assert r <= EPS * (1 + 1e-6) + 1e-12
        if r > 1e-6:
            assert res.status[t] == "argmaxable"
