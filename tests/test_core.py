"""The detection core against oracles that are not our code: Qhull, Cover's count, the DFT alternation
theorem, closed-form bias cases and the 2-D toy of 002 Fig. 1."""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.spatial import ConvexHull, QhullError

import argmaxable as am
from argmaxable.core import chebyshev, fastpath
from argmaxable.core.backend import GPU_DRIVER_FILES, bf16_gemm

TOY = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # 002 Fig. 1: c4 inside the triangle


def all_assignments(n: int) -> np.ndarray:
    return np.array(list(itertools.product([False, True], repeat=n)))


@pytest.mark.parametrize(("n", "d", "seed"), [(60, 2, 0), (80, 3, 1), (120, 4, 2), (150, 5, 3), (120, 6, 4)])
def test_categories_match_qhull_vertices(n, d, seed):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(n, d))
    # Points built strictly inside the hull: convex combinations of rows shrunk towards the centroid.
    inner = 0.5 * rng.dirichlet(np.ones(n), size=10) @ W + 0.5 * W.mean(axis=0)
    W = np.vstack([W, inner])
    vertices = np.zeros(len(W), dtype=bool)
    vertices[ConvexHull(W).vertices] = True
    res = am.check_categories(W, workers=1)
    assert (res.status == "undecided").sum() == 0
    np.testing.assert_array_equal(res.status == "argmaxable", vertices)
    assert not (res.status[n:] == "argmaxable").any()
    assert am.verify_certificate(res, W).all()


def test_toy_figure_1():
    res = am.check_categories(TOY)
    assert res.status.tolist() == ["argmaxable"] * 3 + ["unargmaxable"]
    assert res.unargmaxable.tolist() == [3]
    assert np.isnan(res.witness[3]).all() and np.isfinite(res.witness[:3]).all()


def test_bias_half_squared_norm_makes_every_class_argmaxable():
    # b_i = -||w_i||^2 / 2 turns the logits into -||x - w_i||^2/2 + const: x = w_t wins (000/002 appendix).
    rng = np.random.default_rng(5)
    W = rng.normal(size=(300, 3))
    W[:50] *= 0.1  # many rows deep inside the hull: unargmaxable without the bias
    b = -0.5 * (W**2).sum(axis=1)
    assert (am.check_categories(W).status == "unargmaxable").sum() > 0
    res = am.check_categories(W, b=b)
    assert (res.status == "argmaxable").all()
    # Pushing one class's bias far down makes it unargmaxable (its region leaves the box).
    b2 = b.copy()
    b2[7] -= 1e4
    res2 = am.check_categories(W, [7, 8], b2)
    assert res2.status.tolist() == ["unargmaxable", "argmaxable"]
    assert am.verify_certificate(res2, W, b2).all()


def test_duplicate_rows_are_unargmaxable_with_reason():
    """Without a bias, equal rows are a tie: the message names the other row and no bias (never "a bias
    at least as high" on a head that has none)."""
    W = np.vstack([TOY[:3], TOY[0]])
    res = am.check_categories(W)
    assert res.status.tolist() == ["unargmaxable", "argmaxable", "argmaxable", "unargmaxable"]
    assert res.message[0].startswith("tie: its row equals category 3's") and "bias" not in res.message[0]
    assert res.message[3].startswith("tie: its row equals category 0's")
    assert am.verify_certificate(res, W).all()


def test_collinear_rows_middle_one_is_unargmaxable():
    W = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [0.0, -1.0]])
    b = np.zeros(4)
    res = am.check_categories(W, b=b)
    # w_2 lies on the segment between w_1 and w_3: it can tie but never win strictly.
    assert res.status.tolist() == ["argmaxable", "unargmaxable", "argmaxable", "argmaxable"]


def test_cover_count_gaussian():
    # Thesis Thm 5.1: W in general position (n=12, d=4): 2 * sum_{i<4} C(11, i) = 464 argmaxable of 2^12.
    rng = np.random.default_rng(0)
    W = rng.normal(size=(12, 4))
    Y = all_assignments(12)
    res = am.check_assignments(W, Y, workers=2)
    assert (res.status == "argmaxable").sum() == 2 * sum(math.comb(11, i) for i in range(4))  # = 464
    assert (res.status == "undecided").sum() == 0
    arg = res.status == "argmaxable"
    assert np.isfinite(res.radius[arg]).all() and (res.radius[arg] > 1e-8).all()  # certified lower bounds
    assert (res.radius_upper[~arg] <= 1e-8).all()  # certified upper bounds of the unargmaxable ones
    assert (res.answers["eps"] == np.where(arg, "yes", "no")).all()


def sign_changes(y: np.ndarray) -> np.ndarray:
    return (y[:, 1:] != y[:, :-1]).sum(axis=1)


def truncated_dft(n: int, k: int) -> np.ndarray:
    """Thesis eq. 5.10, written out independently of the package's DFT head."""
    t = 2 * np.pi * np.arange(n) / n
    cols = [np.full(n, 1 / np.sqrt(n))]
    for f in range(1, k + 1):
        cols += [np.sqrt(2 / n) * np.cos(f * t), np.sqrt(2 / n) * np.sin(f * t)]
    return np.stack(cols, axis=1)


def test_dft_alternation_theorem():
    # Thesis Thm 5.3 + Prop 5.1: for the truncated DFT (n=10, 2k+1=5) the argmaxable assignments are
    # exactly those with <= 4 sign changes.
    W = truncated_dft(10, 2)
    Y = all_assignments(10)
    res = am.check_assignments(W, Y)
    np.testing.assert_array_equal(res.status == "argmaxable", sign_changes(Y) <= 4)
    k_active = Y.sum(axis=1) <= 2
    assert (res.status[k_active] == "argmaxable").all()
    assert am.verify_certificate(res, W, items=Y).all()


def test_assignment_radius_thresholds_one_argmaxable():
    W = 1e-5 * truncated_dft(10, 2)  # tiny weights: every region is far larger than 1 within the box
    res = am.check_assignments(W, [[0], [0, 5]])
    assert res.one_argmaxable().all()
    res_small = am.check_assignments(W, [[0], [0, 5]], bound=1e-3)
    assert (res_small.status == "argmaxable").all() and not res_small.one_argmaxable().any()


def test_assignment_index_lists_equal_boolean_matrix():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(9, 3))
    lists = [[0, 1], [], [8], [2, 4, 6]]
    Y = np.zeros((4, 9), dtype=bool)
    for r, idx in enumerate(lists):
        Y[r, idx] = True
    a, b = am.check_assignments(W, lists), am.check_assignments(W, Y)
    np.testing.assert_array_equal(a.status, b.status)
    np.testing.assert_allclose(a.radius, b.radius)


def test_results_do_not_depend_on_worker_count():
    rng = np.random.default_rng(2)
    W = rng.uniform(-1, 1, size=(400, 5))
    b = rng.uniform(-1, 1, size=400)
    one = am.check_categories(W, b=b, workers=1)
    two = am.check_categories(W, b=b, workers=2)
    np.testing.assert_array_equal(one.status, two.status)
    np.testing.assert_array_equal(one.radius, two.radius)
    np.testing.assert_array_equal(one.witness, two.witness)


def test_float32_stage_agrees_with_float64_stage(monkeypatch):
    # Above FLOAT32_ABOVE weights the approximate stage runs in float32 with a rounding bound: the same layer checked in
    # float64 (threshold raised) must give the same verdicts, and both must verify.

    rng = np.random.default_rng(3)
    W = rng.normal(size=(20000, 60))
    b = rng.normal(size=20000)
    classes = np.arange(0, 20000, 97)
    res = am.check_categories(W, classes, b)
    assert res.settings["numeric_path"].startswith(("float32", "bfloat16"))
    assert am.verify_certificate(res, W, b).all()
    monkeypatch.setattr(fastpath, "FLOAT32_ABOVE", 10**12)
    res64 = am.check_categories(W, classes, b)
    assert res64.settings["numeric_path"] == "float64"
    np.testing.assert_array_equal(res.status, res64.status)


def test_chebyshev_radius_of_a_square():
    # |x|<=1, |y|<=1 written as four rows inside a box of 100: the largest ball has radius 1 at the origin.
    A = np.array([[1.0, 0], [-1, 0], [0, 1], [0, -1]])
    out = chebyshev(A, -np.ones(4), 100.0)
    assert out.status == "feasible" and out.converged
    assert out.radius == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(out.x, 0.0, atol=1e-9)
    # The box binds: a far-away region is cut off.
    assert chebyshev(np.array([[-1.0, 0.0]]), np.array([200.0]), 100.0).status == "infeasible"


def test_thin_region_is_not_argmaxable_at_eps():
    # A slab of width 1e-10 holds no ball of radius 1e-8.
    A = np.array([[1.0, 0.0], [-1.0, 0.0]])
    out = chebyshev(A, np.array([-1e-10, 0.0]), 10.0)
    assert out.status == "infeasible" and out.upper <= 1e-8


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: am.check_categories(np.array([[1.0, np.nan]])), "must be finite"),
        (lambda: am.check_categories(np.ones(3)), "2-D array"),
        (lambda: am.check_categories(TOY, b=np.ones(3)), "shape \\(4,\\)"),
        (lambda: am.check_categories(TOY, [4]), "indices in \\[0, 4\\)"),
        (lambda: am.check_categories(TOY, solver="cplex"), "'solver' parameter"),
        (lambda: am.check_categories(TOY, bound=-1), "'bound' parameter"),
        (lambda: am.check_assignments(TOY, [[0, 7]]), "outside \\[0, 4\\)"),
        (lambda: am.check_assignments(TOY, np.ones((2, 3), dtype=bool)), "4 columns"),
    ],
)
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_torch_input_any_dtype():
    torch = pytest.importorskip("torch")
    res = am.check_categories(torch.tensor(TOY, dtype=torch.float16))
    assert res.unargmaxable.tolist() == [3]


def test_frame_has_one_row_per_item():
    df = am.check_categories(TOY).to_frame()
    assert list(df["status"]) == ["argmaxable"] * 3 + ["unargmaxable"]
    assert {"item", "radius", "steps", "lp_rounds", "witness_norm", "message"} <= set(df.columns)


@pytest.mark.gurobi
def test_highs_and_gurobi_agree():
    pytest.importorskip("gurobipy")
    rng = np.random.default_rng(7)
    W = rng.uniform(-1, 1, size=(1500, 8))
    b = rng.uniform(-1, 1, size=1500)
    classes = np.arange(60)
    h = am.check_categories(W, classes, b, patience=0)
    try:
        g = am.check_categories(W, classes, b, patience=0, solver="gurobi")
    except am.SolverError as err:  # no licence at all on this machine
        pytest.skip(str(err))
    np.testing.assert_array_equal(h.status, g.status)
    Y = all_assignments(10)
    W10 = rng.normal(size=(10, 4))
    np.testing.assert_array_equal(am.check_assignments(W10, Y).status,
                                  am.check_assignments(W10, Y, solver="gurobi").status)


def test_top_m_sets_reduce_to_categories():
    # Top-1 sets are the argmaxable categories; top-(n-1) sets are those whose missing token can be the
    # argmin, i.e. an argmaxable category of -W.
    rng = np.random.default_rng(8)
    W = rng.normal(size=(40, 3))
    n = len(W)
    top1 = am.check_top_m(W, [[t] for t in range(n)])
    np.testing.assert_array_equal(top1.status, am.check_categories(W).status)
    all_but_one = am.check_top_m(W, [[i for i in range(n) if i != j] for j in range(n)])
    np.testing.assert_array_equal(all_but_one.status, am.check_categories(-W).status)


def test_solver_breakdown_is_undecided_never_a_verdict(monkeypatch):
    """HiGHS can fail (kError) on nearly degenerate regions; that is numerical trouble, not a verdict: the float LP
    says undecided. The exact stage then settles the item in rational arithmetic without HiGHS (pivots from a
    dual-feasible basis), with evidence the verifier accepts."""
    import highspy

    monkeypatch.setattr(highspy.Highs, "run", lambda self: highspy.HighsStatus.kError)
    out = chebyshev(np.delete(TOY, 3, axis=0) - TOY[3], np.zeros(3), 100.0)
    assert out.status == "undecided" and "HiGHS" in out.message
    res = am.check_categories(TOY, patience=0, workers=1)
    # The three vertices are proved by their own rows as witnesses; c4 needs the LP, which fails.
    assert res.status.tolist() == ["argmaxable"] * 3 + ["unargmaxable"]
    assert res.exact[3].decided == "radius" and res.exact[3].region == "no"
    assert am.verify_certificate(res, TOY).all()



@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5)), min_size=3, max_size=12))
def test_integer_points_in_the_plane_match_qhull(points):
    """Any small integer point set, duplicates and collinear points included: a category is argmaxable
    exactly when its point is a vertex of the convex hull (Qhull) and has no duplicate."""
    W = np.array(points, dtype=np.float64)
    try:
        hull = ConvexHull(W)
    except QhullError:  # all points collinear: Qhull has no 2-D hull to compare with
        assume(False)
    unique = np.array([(w == W).all(axis=1).sum() == 1 for w in W])
    expected = np.zeros(len(W), dtype=bool)
    expected[hull.vertices] = True
    res = am.check_categories(W, workers=1)
    np.testing.assert_array_equal(res.status == "argmaxable", expected & unique)
    assert am.verify_certificate(res, W).all()


@pytest.mark.parametrize(("n", "d", "bias"), [(300, 4, True), (300, 4, False), (2000, 600, True)])
def test_gram_first_step_matches_the_batched_step(n, d, bias, monkeypatch):
    """The whole-vocabulary first step (Gram matrix, upper triangle, several blocks) certifies the same margins
    as evaluating every start point directly (float64 below 1e6 weights, float32 above)."""
    from argmaxable.core.systems import CategorySystem

    monkeypatch.setattr(fastpath, "bf16_gemm", lambda: False)  # the bfloat16 products have their own test

    rng = np.random.default_rng(5)
    W = rng.normal(size=(n, d)) * rng.uniform(0.2, 1.0, size=(n, 1))  # varied norms: some lose at the start
    system = CategorySystem(W, rng.normal(size=n) * 3 if bias else None)
    items = np.arange(n)
    _, direct = system.evaluate(items, system.start(items).astype(system.dtype), 1e-8)
    gram = system.start_margins(1e-8, block=64).margin
    assert 0 < (gram > 1e-8).sum() < n
    np.testing.assert_array_equal(gram > 1e-8, direct > 1e-8)
    # The same margins up to the rounding bounds each subtracts (float32: the Gram blocks' is twice the step's).
    np.testing.assert_allclose(gram, direct, rtol=1e-2 if system.dtype == np.float32 else 1e-9, atol=1e-9)


def test_affine_cell_count_with_bias():
    # n hyperplanes w_i.x + b_i = 0 in general position cut R^d into sum_{i<=d} C(n, i) cells (Buck 1943):
    # n=12, d=3 -> 299 argmaxable assignments of 2^12 (the box of 1e4 holds every cell of Gaussian data).
    rng = np.random.default_rng(11)
    W, b = rng.normal(size=(12, 3)), rng.normal(size=12)
    res = am.check_assignments(W, all_assignments(12), b)
    assert (res.status == "argmaxable").sum() == sum(math.comb(12, i) for i in range(4)) == 299
    assert (res.status == "undecided").sum() == 0
    assert am.verify_certificate(res, W, b, items=all_assignments(12)).all()


def test_dual_stage_proves_only_unargmaxable_assignments():
    """Gordan certificates by projection are one-sided: on the DFT layer (alternation theorem) they may prove
    only assignments with more than 2k sign changes, and each certificate has weights >= 0 summing to 1."""
    from argmaxable.core.gordan import gordan_certificates

    W = truncated_dft(10, 2)
    Y = all_assignments(10)
    out = gordan_certificates(W, None, np.where(Y, -1, 1), box=(np.full(W.shape[1], -1e4), np.full(W.shape[1], 1e4)),
                              eps=1e-8)
    assert out.proven.sum() > 100
    assert (sign_changes(Y)[out.proven] > 4).all()
    for w in out.weights.values():
        assert (w >= 0).all() and w.sum() == pytest.approx(1.0)


def test_dual_stage_rounding_bound_reaches_the_far_end_of_the_box(monkeypatch):
    """The check sum's rounding bound takes |x_j| <= max(|lo_j|, |hi_j|) in every batch: a box reaching
    further below zero than above (lo = -5, hi = 1) must give 5, not |hi| = 1."""
    from argmaxable.core import gordan

    seen = []
    monkeypatch.setattr(gordan, "_prove_batch", lambda out, pos, S, rows, box, eps: seen.append(rows.reach))
    W = truncated_dft(10, 2)
    signs = np.where(all_assignments(10), -1, 1)
    gordan.gordan_certificates(W, None, signs, box=(np.full(5, -5.0), np.full(5, 1.0)), eps=1e-8)
    assert seen and all(np.array_equal(reach, np.full(5, 5.0)) for reach in seen)


def test_dual_stage_proves_a_wide_gaussian_layer_without_lp():
    # n >> 2d: every sparse assignment is unargmaxable (Wendel), and the projection proves each one.
    rng = np.random.default_rng(12)
    W = rng.normal(size=(600, 20))
    Y = [rng.choice(600, k, replace=False) for k in (1, 5, 30)]
    res = am.check_assignments(W, Y)
    assert res.status.tolist() == ["unargmaxable"] * 3 and (res.lp_rounds == 0).all()
    assert "dual stage" in res.message[0] and (res.radius_upper <= 1e-8).all() and np.isnan(res.radius).all()
    assert am.verify_certificate(res, W, items=Y).all()
    s = -np.ones(600)
    s[Y[0]] = 1
    assert chebyshev(-s[:, None] * W, np.zeros(600), 1e4).status == "infeasible"  # the exact LP agrees
    exact = am.check_assignments(W, Y[:1], exact_radius=True)  # radii computed, not bounded: no dual stage
    assert exact.status[0] == "unargmaxable" and exact.lp_rounds[0] > 0 and exact.radius_exact[0]
    rows, weights = res.certificates[0]
    bad = weights.copy()
    bad[np.argmax(bad)] *= -1  # a tampered certificate must fail the independent check
    res.certificates[0] = (rows, bad)
    assert not am.verify_certificate(res, W, items=Y)[0]


BOX4 = (np.full(8, -1e4), np.full(8, 1e4))


def test_polish_makes_loose_dual_weights_exact():
    """Duals that cancel the rows only to 1e-9 (a solver's tolerance) bound the radius by about B * 1e-9 > eps at
    B = 1e4; projected onto the exact cancellation over the same rows they prove radius <= eps."""
    from argmaxable.core.chebyshev import dual_bound, polish

    rng = np.random.default_rng(13)
    A = rng.normal(size=(9, 8))
    mu = np.append(rng.uniform(0.5, 1.0, 8), 1.0)
    A[8] = -(mu[:8] @ A[:8])  # sum mu_i a_i = 0 with mu > 0: infeasible, radius 0
    norms = np.linalg.norm(A, axis=1)
    exact = mu * norms / (mu * norms).sum()  # the same weights on the normalised rows
    loose = exact * (1 + 1e-9 * rng.standard_normal(9))
    rows = np.arange(9)
    assert dual_bound(A, np.zeros(9), norms, rows, loose, BOX4) > 1e-8
    rows_p, weights_p = polish(A, norms, rows, loose)
    assert dual_bound(A, np.zeros(9), norms, rows_p, weights_p, BOX4) <= 1e-9  # its rounding bound included
    np.testing.assert_allclose(weights_p, exact, rtol=1e-7)


@pytest.mark.skipif(not bf16_gemm(), reason="no native bfloat16 products on this CPU")
def test_bf16_gram_margins_are_certified_lower_bounds(monkeypatch):
    """With bfloat16 products (CPUs that have them), every positive first-step margin is still a lower bound on
    the exact float64 distance to the nearest decision boundary, and the whole check gives the same verdicts."""
    from argmaxable.core import systems

    rng = np.random.default_rng(6)
    n, d = 1500, 700  # over 1e6 weights: the float32 system, which takes the bfloat16 products
    W = rng.normal(size=(n, d)) * rng.uniform(0.3, 1.0, size=(n, 1))  # varied norms: some rows lose at x = w_t
    b = rng.normal(size=n) * 30
    system = systems.CategorySystem(W, b)
    gram = system.start_margins(1e-8, block=256).margin
    G = W @ W.T
    sq = np.diag(G).copy()
    logits = G + b  # logits[t, i] = w_i . w_t + b_i
    own = np.diag(logits).copy()
    dist = (own[:, None] - logits) / np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * G, 1e-300))
    np.fill_diagonal(dist, np.inf)
    exact = dist.min(axis=1)
    won = gram > 0  # a positive margin is a certified lower bound (a negative one only says "not proven")
    assert (gram[won] <= exact[won]).all()
    assert 0.3 < (gram > 1e-8).mean() < (exact > 1e-8).mean()
    monkeypatch.setattr(fastpath, "bf16_gemm", lambda: False)
    float32 = systems.CategorySystem(W, b).start_margins(1e-8, block=256).margin
    assert ((gram > 1e-8) <= (float32 > 1e-8)).all()  # the looser bound certifies no item the tight one misses
    monkeypatch.undo()
    res = am.check_categories(W, b=b)
    monkeypatch.setattr(fastpath, "bf16_gemm", lambda: False)
    np.testing.assert_array_equal(res.status, am.check_categories(W, b=b).status)
    assert am.verify_certificate(res, W, b).all()


@pytest.mark.parametrize(("d", "steps"), [(120, "float32"), (256, "bfloat16")])
def test_bf16_steps_only_for_wide_layers(monkeypatch, d, steps):
    """Where the CPU has bfloat16 products (forced here; emulated where it has not), a whole vocabulary's Gram pass
    takes them, but reflection steps do only from BF16_STEPS_D columns: a narrower layer (an OCR head, d = 120)
    steps in float32, whose argmax is the most violated row (bfloat16 steps doubled PP-OCRv6 small's LP
    items). The first step's margins are certified either way. On a device neither is bfloat16."""
    import torch

    from argmaxable.core import systems

    monkeypatch.setattr(fastpath, "bf16_gemm", lambda: True)
    monkeypatch.setattr(fastpath, "BF16_ABOVE", 0)
    rng = np.random.default_rng(7)
    n = 300
    W = (rng.normal(size=(n, d)) * rng.uniform(0.3, 1.0, size=(n, 1))).astype(np.float32)
    monkeypatch.setattr(fastpath, "FLOAT32_ABOVE", 0)
    system = systems.CategorySystem(W, rng.normal(size=n))
    assert system.bf16_start
    items = np.arange(5)
    assert system.bf16_steps == (steps == "bfloat16")
    L, _, _ = system._logits(items, system.start(items), coarse=system.bf16_steps)
    assert L.dtype == (torch.bfloat16 if steps == "bfloat16" else np.float32)
    on_device = systems.CategorySystem(W, rng.normal(size=n), device=torch.device("cpu"))
    assert not on_device.bf16_start and not on_device.bf16_steps  # a device's products: float32, whatever the CPU


@pytest.mark.parametrize("cluster", [0, 10])
def test_a_point_bf16_leaves_open_is_measured_again_or_its_item_steps_in_float32(monkeypatch, cluster):
    """With bfloat16 steps, a point whose bfloat16 logits settle nothing (a row within their bound of its own
    logit, none certainly above it) is measured as float32 steps measure it: row by row in float64 where at most
    n / RECHECK_COST rows come within the bound, its item staying in bfloat16; else in float32, its item stepping in
    float32 from then on. A point some row certainly beats stays in bfloat16 (of the points bfloat16
    leaves open, half have 1-2 such rows on the LLM heads, a tenth thousands, near a cluster)."""
    from argmaxable.core import systems

    for name, value in ARITHMETIC["bfloat16"].items():
        monkeypatch.setattr(fastpath, name, value)
    rng = np.random.default_rng(5)
    n, d = 400, 256
    W = rng.normal(size=(n, d)).astype(np.float32)
    W[1] = 0.1 * W[1]  # a short row: far inside, certainly beaten at its start point
    W[3 : 3 + cluster] = W[2] + 1e-4 * rng.normal(size=(cluster, d))  # near-duplicates of row 2
    system = systems.CategorySystem(W, None)
    assert system.bf16_steps and n // fastpath.RECHECK_COST == 6
    # Item 0 at w_0 + w_2 moved onto the hyperplane where rows 0 and 2 tie, then 1e-5 toward row 0: its margin is
    # about 1e-5, far below bfloat16's bound (about 1 on logits of about 250 here) and far above float32's.
    u = W[0].astype(np.float64) - W[2]
    u /= np.linalg.norm(u)
    p = W[0].astype(np.float64) + W[2]
    x = p - (p @ u) * u + 1e-5 * u
    items, X = np.array([0, 1]), np.vstack([x, W[1]]).astype(np.float32)
    coarse_calls = []
    logits = system._logits
    monkeypatch.setattr(system, "_logits", lambda it, P, coarse=False: coarse_calls.append((list(it), coarse))
                        or logits(it, P, coarse))
    worst, margin = system.evaluate(items, X, 1e-8)
    steps_float32 = cluster > 0  # 11 rows within the bound of item 0's point, or 1
    assert coarse_calls == [([0, 1], True)] + [([0], False)] * steps_float32
    assert list(np.flatnonzero(system._fine)) == [0] * steps_float32
    assert margin[1] < 0 and worst[1] != 1
    plain = systems.CategorySystem(W, None)
    monkeypatch.setattr(plain, "bf16_steps", False)
    plain_worst, plain_margin = plain.evaluate(items[:1], X[:1], 1e-8)
    assert worst[0] == plain_worst[0] and margin[0] == plain_margin[0]
    assert (0 < margin[0] < 1e-3) if cluster == 0 else (worst[0] in range(2, 3 + cluster))
    coarse_calls.clear()
    system.evaluate(items, X, 1e-8)
    assert coarse_calls == ([([1], True), ([0], False)] if steps_float32 else [([0, 1], True)])
    system.release()
    assert not system._fine.any()


@pytest.mark.parametrize("arithmetic", ["float32", "bfloat16"])
def test_numpy_blas_keeps_one_thread_while_torch_multiplies_the_steps(monkeypatch, arithmetic):
    """Where reflection's steps multiply in bfloat16 (torch's threads), numpy's BLAS runs on one thread for the
    scope of the products, except in the float32 products of the items that left bfloat16 steps, which get the
    caller's threads, and gets its threads back after; float32 steps keep them throughout (the idle BLAS
    threads spinning beside torch's made SmolLM2's bfloat16 products 1.3x slower on 2 cores)."""
    from contextlib import contextmanager

    from threadpoolctl import threadpool_info, threadpool_limits

    from argmaxable.core import systems

    def blas():
        return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    for name, value in ARITHMETIC[arithmetic].items():
        monkeypatch.setattr(fastpath, name, value)
    rng = np.random.default_rng(3)
    W = rng.normal(size=(300, 256)).astype(np.float32)
    W[:20] *= 0.2  # beaten at their start points: the pool steps
    threads, float32_threads = [], []
    evaluate, caller = systems.CategorySystem.evaluate, fastpath.LayerProducts._caller_blas_threads

    def spy(self, *args, **kw):
        threads.append(blas())
        return evaluate(self, *args, **kw)

    @contextmanager
    def spy_caller(self):
        with caller(self):
            float32_threads.append(blas())
            yield

    monkeypatch.setattr(systems.CategorySystem, "evaluate", spy)
    monkeypatch.setattr(fastpath.LayerProducts, "_caller_blas_threads", spy_caller)
    with threadpool_limits(limits=2, user_api="blas"):
        res = am.check_categories(W)
        after = blas()
        system = systems.CategorySystem(W, None)
        with system.step_threads():
            inside = blas()
            with system._caller_blas_threads():
                float32 = blas()
    one = arithmetic == "bfloat16"
    assert threads and set(threads) == {1 if one else 2} and after == 2
    assert (inside, float32) == ((1, 2) if one else (2, 2)) and set(float32_threads) <= {2}
    assert am.verify_certificate(res, W).all()


def test_exact_float32_holds_a_callers_lower_matmul_precision_off():
    """torch's float32 products run in true float32 within :class:`exact_float32` though the caller allowed
    bfloat16 passes (``set_float32_matmul_precision("medium")``), and the caller's setting comes back after."""
    import torch

    from argmaxable.core.backend import exact_float32

    was = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        with exact_float32():
            assert torch.get_float32_matmul_precision() == "highest"
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(was)


def test_items_bf16_steps_leave_unproven_reflect_again_in_float32(monkeypatch):
    """Items reflection's bfloat16 steps leave unproven (made so here: the proofs of every item that took more than
    one step are dropped) reflect again from their start points in float32 steps, and only they: each is decided
    as a check in float32 steps decides it, without the LP, and every witness verifies (Qwen2.5-Coder's
    under-trained Thai tokens on a CPU with native bfloat16, each an LP of minutes at d = 896)."""
    from argmaxable.core import reflect as reflection
    from argmaxable.core import stages

    for name, value in ARITHMETIC["bfloat16"].items():
        monkeypatch.setattr(fastpath, name, value)
    rng = np.random.default_rng(11)
    n, d = 600, 256
    mean = rng.normal(size=d) * 0.5
    W = mean + rng.normal(size=(n, d)) * rng.lognormal(0, 0.25, size=(n, 1))
    W[:30] = 1.2 * mean + 0.1 * rng.normal(size=(30, d))  # pulled toward the mean: beaten at their start points
    W = W.astype(np.float32)
    calls = []

    def spy(system, items, **kw):
        out = reflection.reflect(system, items, **kw)
        calls.append((len(items), system.bf16_steps))
        if len(calls) == 1:
            lost = out.proven & (out.steps > 1)
            out.proven[lost], out.steps[lost], out.margin[lost] = False, -1, np.nan
            calls.extend([np.flatnonzero(lost), np.flatnonzero(~out.proven)])  # no row is tied: all go again
        return out

    monkeypatch.setattr(stages, "reflect", spy)
    res = am.check_categories(W, workers=1)
    lost, unproven = calls[1], calls[2]
    assert len(lost) >= 5 and calls[0] == (n, True) and calls[3] == (len(unproven), False) and len(calls) == 4
    assert (res.status[lost] == "argmaxable").all() and (res.lp_rounds[lost] == 0).all()
    assert (res.steps[lost] > 1).all()
    monkeypatch.setattr(stages, "reflect", reflection.reflect)
    monkeypatch.setattr(fastpath, "BF16_STEPS_D", 10**9)
    plain = am.check_categories(W, workers=1)
    np.testing.assert_array_equal(res.status, plain.status)
    assert am.verify_certificate(res, W).all()


def test_shared_supports_prove_clustered_categories_without_lp():
    # Categories clustered deep inside the hull (as on a real OCR head) share certificate supports: one LP's
    # support proves its neighbours. Verdicts still match Qhull and every certificate passes the independent check.
    rng = np.random.default_rng(21)
    outer = rng.normal(size=(300, 4))
    inner = 0.05 * rng.normal(size=(60, 4))
    W = np.vstack([outer, inner])
    res = am.check_categories(W, workers=1)
    vertices = np.zeros(len(W), dtype=bool)
    vertices[ConvexHull(W).vertices] = True
    np.testing.assert_array_equal(res.status == "argmaxable", vertices)
    shared = np.char.find(res.message.astype(str), "another category") >= 0
    assert shared.sum() > 30 and (res.lp_rounds[shared] == 0).all()
    assert (res.radius_upper[shared] <= 1e-8).all()
    assert am.verify_certificate(res, W).all()
    two = am.check_categories(W, workers=2)  # the waves keep results independent of the workers
    np.testing.assert_array_equal(res.radius_upper, two.radius_upper)


def test_support_coordinates_use_lu_where_square_and_svd_where_singular():
    from argmaxable.core.supports import _pseudo_inverse

    rng = np.random.default_rng(3)
    M = rng.normal(size=(6, 6))
    np.testing.assert_allclose(_pseudo_inverse(M), np.linalg.pinv(M), atol=1e-10)
    M[5] = M[4]  # singular: LU fails, the SVD still gives least-squares coordinates
    np.testing.assert_allclose(_pseudo_inverse(M), np.linalg.pinv(M), atol=1e-10)
    M[5] += 1e-13 * rng.normal(size=6)  # nearly singular: LU "succeeds" with entries of 1e13, the SVD does not
    np.testing.assert_allclose(_pseudo_inverse(M), np.linalg.pinv(M), atol=1e-10)
    tall = rng.normal(size=(6, 4))  # fewer rows than d + 1
    np.testing.assert_allclose(_pseudo_inverse(tall), np.linalg.pinv(tall), atol=1e-12)


def test_reflection_gives_up_on_a_stalled_item_before_the_patience():
    from argmaxable.core.reflect import reflect
    from argmaxable.core.systems import CategorySystem

    W = np.vstack([TOY[:3], [[0.1, 0.1]]])  # row 3 lies inside the triangle: reflection can never succeed
    system = CategorySystem(W, None)
    box = (np.full(2, -100.0), np.full(2, 100.0))
    calls = []
    evaluate = system.evaluate
    system.evaluate = lambda *a, **k: calls.append(1) or evaluate(*a, **k)
    out = reflect(system, np.array([3]), patience=2500, box=box, eps=1e-8, stall=20)
    assert not out.proven[0] and 20 < len(calls) < 200
    assert set(out.rows[0].tolist()) <= {0, 1, 2} and out.rows[0].size > 0  # the rows that beat it, for the LP


def _pulled_layer(n, d, seed):
    """Rows of an anisotropic spread about a common mean, 4% of them pulled toward it at low spread (the under-trained
    tokens of real LLM heads): many items beaten at their start points, some with thin regions."""
    rng = np.random.default_rng(seed)
    spread = np.linalg.qr(rng.standard_normal((d, d)))[0] * np.geomspace(1.0, 0.03, d)
    mean = rng.standard_normal(d)
    mean *= 0.6 * np.linalg.norm(spread) / np.linalg.norm(mean)
    W = mean + (rng.standard_normal((n, d)) @ spread.T) * rng.lognormal(0, 0.25, (n, 1))
    low = rng.choice(n, n // 25, replace=False)
    W[low] = 1.25 * mean + 0.1 * (rng.standard_normal((len(low), d)) @ spread.T)
    return W


def test_working_sets_spare_thin_regions_their_evaluations(monkeypatch):
    """A restarted item reflects across the rows near its points between two evaluations: on a layer with
    pulled rows, the slowest item takes at most 16 evaluations where braid reflection alone takes over 100, with
    the same verdicts, and every witness and certificate verifies."""
    from argmaxable.core import reflect as reflection

    W = _pulled_layer(2000, 32, 1)
    monkeypatch.setattr(reflection, "SETS_ABOVE", 0)  # a small layer, to stay quick
    res = am.check_categories(W, workers=1)
    monkeypatch.setattr(reflection, "SETTLE_STEPS", 0)
    alone = am.check_categories(W, workers=1)
    assert res.steps.max() <= 16 < 100 < alone.steps.max()
    assert res.steps[res.steps > 2].sum() < 0.8 * alone.steps[alone.steps > 2].sum()
    np.testing.assert_array_equal(res.status, alone.status)
    assert am.verify_certificate(res, W).all()


@pytest.mark.parametrize("power", [100, -100])
def test_restarts_of_a_float32_layer_far_from_1_keep_its_verdicts(power):
    """The whitened restarts' metric comes from the rows' second moments: a float32 layer at 2^100 (squares
    beyond float32) or 2^-100 (squares below its normal range) gets them from the rows scaled by a power of two, so
    that its items take about as many reflections as the same layer's in range and no more of them reach the LP,
    every verdict verified."""
    W = _pulled_layer(2000, 32, 1).astype(np.float32)
    plain = am.check_categories(W, workers=1)
    assert plain.steps.max() > 20  # restarted items (whitened after RESTART_AFTER steps)
    far = (W.astype(np.float64) * 2.0**power).astype(np.float32)
    res = am.check_categories(far, workers=1)
    np.testing.assert_array_equal(res.status, plain.status)
    assert (res.lp_rounds > 0).sum() == (plain.lp_rounds > 0).sum()  # an overflowed metric left 1608 to the LP
    assert res.steps.sum() <= 1.1 * plain.steps.sum()
    assert am.verify_certificate(res, far).all()


def test_a_working_set_settles_a_point_inside_its_rows():
    """:class:`_WorkingSets` on rows of a sphere (every category argmaxable, so any set of its rows holds a point):
    settling reflects a point that violates many of them into the region they bound, as measured on the rows
    themselves in float64 (not on the Gram matrix the loop tracks); rows it holds are not added twice, and the
    oldest give way once it is full."""
    from argmaxable.core.reflect import _WorkingSets
    from argmaxable.core.systems import CategorySystem

    rng = np.random.default_rng(4)
    W = rng.normal(size=(300, 6))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    system = CategorySystem(W, None)
    t = 7
    near = np.argsort(W @ W[t])[::-1][1:25]  # the 24 rows nearest w_t
    sets = _WorkingSets(slots=3, size=16, d=6, dtype=np.float64)
    sets.clear(np.arange(3))
    sets.add(system, np.array([t]), np.array([1]), near[None, :12])
    sets.add(system, np.array([t]), np.array([1]), near[None, 6:18])  # 6 held already, 6 new
    assert set(sets.rows[1]) == set(near[2:18]) and (sets.rows[[0, 2]] == -1).all()  # the two oldest gave way
    x = -W[t][None, :]  # beaten by every row near w_t
    A = W[sets.rows[1]] - W[t]
    assert (A @ x[0] > 0).sum() >= 12
    y = sets.settle(system, np.array([1]), x.copy(), steps=10_000)
    assert (A @ y[0] <= 1e-12).all() and not np.array_equal(x, y)
    assert not sets.dropped.any()


def test_a_working_set_that_holds_no_point_is_dropped():
    """A set whose rows admit no point (w_t = 0 inside the hull of +-e_i: every point violates one of the rows +-e_i)
    is still violated after each settle and dropped after DROP_AFTER of them, a set that holds points is not; the
    next item in the slot starts with a set again."""
    from argmaxable.core.reflect import DROP_AFTER, _WorkingSets
    from argmaxable.core.systems import CategorySystem

    W = np.vstack([np.zeros(3), np.eye(3), -np.eye(3), np.eye(3) + 0.5])
    system = CategorySystem(W, None)
    sets = _WorkingSets(slots=2, size=8, d=3, dtype=np.float64)
    sets.clear(np.arange(2))
    sets.add(system, np.array([0, 7]), np.arange(2), np.array([np.arange(1, 7), [8, 9, -1, -1, -1, -1]]))
    X = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    for k in range(1, DROP_AFTER + 1):
        assert not sets.dropped.any()
        X = sets.settle(system, np.arange(2), X, steps=50)
        np.testing.assert_array_equal(sets.unsettled, [k, 0])
    np.testing.assert_array_equal(sets.dropped, [True, False])
    sets.clear(np.array([0]))
    assert not sets.dropped.any() and not sets.unsettled.any()


def test_stall_window_follows_the_costs_it_balances():
    # The windows measured best (benchmarks/RESULTS.md): short where a step is dear next to an LP (large n, small
    # d), the cap of 64 on the PP-OCRv4 head, in between on the debtags LM's 4000 x 16 head.
    from argmaxable.core.reflect import stall_window

    assert stall_window(32000, 32) == stall_window(50257, 64) == stall_window(4000, 4) == 16
    assert stall_window(4000, 8) == 24 and stall_window(4000, 16) == 48
    assert stall_window(6625, 120) == stall_window(100, 2) == 64


def test_float32_layer_is_checked_without_a_float64_copy():
    # A large float32 layer stays float32 (and so do its witnesses): same verdicts and witnesses as its float64 copy.
    rng = np.random.default_rng(22)
    W = rng.normal(0, 0.02, size=(4000, 260)).astype(np.float32)
    W[0] = W[1]  # duplicates: they go on to reflection and the LP
    whole = am.check_categories(W)
    ref = am.check_categories(W.astype(np.float64))
    np.testing.assert_array_equal(whole.status, ref.status)
    assert (whole.status[:2] == "unargmaxable").all() and (whole.status[2:] == "argmaxable").all()
    won = whole.steps == 1
    assert won.sum() > 3900 and np.array_equal(whole.witness[won], W[won])
    part = am.check_categories(W, np.arange(200, 300))  # a subset: the batched float32 path
    assert part.witness.dtype == np.float32 and (part.status == "argmaxable").all()
    assert am.verify_certificate(part, W).all() and am.verify_certificate(am.check_categories(W, [0, 1]), W).all()


@pytest.mark.parametrize("bias", [False, True])
def test_torch_device_path_matches_the_cpu_path(bias):
    # device="cpu" runs the torch code path a CUDA GPU would run (Gram pass and reflection): same verdicts, and its
    # witnesses pass the independent check.
    rng = np.random.default_rng(23)
    W = rng.normal(size=(3600, 300)).astype(np.float32)  # above FLOAT32_ABOVE: float32 products
    W[1] = W[0]  # duplicates: 0 is unargmaxable (with a bias, it is the lower copy)
    b = rng.normal(0, 0.1, size=3600) if bias else None
    if bias:
        b[0] = b[1] - 1.0
    cpu = am.check_categories(W, np.arange(0, 3600, 60), b)
    torch_path = am.check_categories(W, np.arange(0, 3600, 60), b, device="cpu")
    np.testing.assert_array_equal(cpu.status, torch_path.status)
    assert (torch_path.status[:1] == "unargmaxable").all() and am.verify_certificate(torch_path, W, b).all()
    whole = am.check_categories(W[:1200, :100], None, None if b is None else b[:1200], device="cpu")
    ref = am.check_categories(W[:1200, :100], None, None if b is None else b[:1200], device=None)
    np.testing.assert_array_equal(whole.status, ref.status)
    with pytest.raises(ValueError, match="device"):
        am.check_categories(W[:10, :3], device="tpu")


@pytest.mark.skipif(any(map(os.path.exists, GPU_DRIVER_FILES)), reason="a GPU driver is present: 'auto' asks torch")
@pytest.mark.parametrize(("shape", "dtype", "path"), [((300, 3), "float64", "float64"),
                                                     ((3000, 100), "float32", "float32, float64")])
def test_small_layer_is_checked_without_importing_torch(shape, dtype, path):
    # Importing torch costs about a second per process, more than checking a 6625 x 120 head: below BF16_ABOVE
    # weights the CPU path (numpy's BLAS; float32 products above FLOAT32_ABOVE) must not import it when no GPU
    # driver is present.

    assert fastpath.FLOAT32_ABOVE < shape[0] * shape[1] <= fastpath.BF16_ABOVE or dtype == "float64"
    code = (f"import sys, numpy as np, argmaxable as am; W = np.random.default_rng(0).normal(size={shape})"
            f".astype('{dtype}'); r = am.check_categories(W, b=np.zeros({shape[0]})); "
            "print(r.counts()['undecided'], 'torch' in sys.modules, r.settings['numeric_path'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == f"0 False {path}"  # after the HiGHS banner


def test_rows_highs_refuses_make_the_solve_fail_never_a_verdict():
    """HiGHS drops rows with infinite coefficients (addRows status kError): the LP must not solve without them."""
    from argmaxable.core.solvers import HighsLP

    lp = HighsLP(np.full(2, -1.0), np.full(2, 1.0))
    lp.add_rows(np.array([[1.0, 0.0]]), np.array([0.0]))
    assert lp.solve().ok
    lp.add_rows(np.array([[np.inf, 1.0]]), np.array([0.0]))
    out = lp.solve()
    assert not out.ok and "HiGHS refused 1 rows" in out.message


def clustered_layer(seed: int, n: int = 120, d: int = 4) -> np.ndarray:
    """Rows on the unit sphere with clusters of near-duplicates (distances 1e-4, 1e-3, 1e-2 from a centre), three
    rows inside each cluster's hull, and an exact duplicate: the pattern of real LLM heads."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(n, d))
    parts = [W / np.linalg.norm(W, axis=1, keepdims=True)]
    for centre, spread in zip(parts[0][:3], (1e-4, 1e-3, 1e-2), strict=True):
        pts = centre + spread * rng.normal(size=(12, d))
        pts /= np.linalg.norm(pts, axis=1, keepdims=True)
        parts += [pts, rng.dirichlet(np.ones(12), size=3) @ pts]  # members, and points inside their hull
    parts.append(parts[0][5:6])  # an exact duplicate of row 5
    return np.vstack(parts)


def test_margins_bf16_steps_leave_at_their_floor_are_measured_again_in_float32(monkeypatch):
    """A point bfloat16 steps prove with the rows they could not place beyond eps (their bound 2^16 looser than
    float32's) has its certified margin at the floor, eps (1 + 4 U64): those margins are measured again in float32
    (``sharpen``), and only they. Every status and witness is as without it, each such radius bound rises above
    the floor, and the verifier holds every witness to its raised bound (SmolLM2-135M's 1072 bounds at
    1e-8)."""
    for name, value in ARITHMETIC["bfloat16"].items():
        monkeypatch.setattr(fastpath, name, value)
    rng = np.random.default_rng(11)
    n, d = 600, 256
    mean = rng.normal(size=d) * 0.5
    W = (mean + rng.normal(size=(n, d)) * rng.lognormal(0, 0.5, size=(n, 1))).astype(np.float32)  # norms vary 7x
    res = am.check_categories(W, workers=1)
    monkeypatch.setattr(fastpath.LayerProducts, "sharpen", lambda *args: 0)
    coarse = am.check_categories(W, workers=1)
    floor = fastpath.margin_floor(1e-8)
    low = np.flatnonzero((coarse.status == "argmaxable") & (coarse.radius <= floor))
    assert len(low) >= 20
    np.testing.assert_array_equal(res.status, coarse.status)
    np.testing.assert_array_equal(res.witness, coarse.witness)
    assert (res.radius[low] > floor).all()
    others = np.setdiff1d(np.arange(n), low)
    np.testing.assert_array_equal(res.radius[others], coarse.radius[others])
    assert am.verify_certificate(res, W).all()


ARITHMETIC = {"float64": {}, "float32": {"FLOAT32_ABOVE": 0},
              "bfloat16": {"FLOAT32_ABOVE": 0, "BF16_ABOVE": 0, "bf16_gemm": lambda: True}}


@pytest.mark.parametrize("arithmetic", sorted(ARITHMETIC))
def test_clustered_layer_matches_qhull(arithmetic, monkeypatch):
    """A layer of near-duplicate clusters, checked in each arithmetic of the reflection steps (whose borderline
    points go through the per-row float64 re-check): the verdicts are Qhull's vertices without duplicates, and
    every certificate verifies."""

    for name, value in ARITHMETIC[arithmetic].items():
        monkeypatch.setattr(fastpath, name, value)
    W = clustered_layer(0).astype(np.float64 if arithmetic == "float64" else np.float32)
    expected = np.zeros(len(W), dtype=bool)
    expected[ConvexHull(W.astype(np.float64)).vertices] = True
    expected[[5, len(W) - 1]] = False  # the duplicate pair: neither can win strictly
    res = am.check_categories(W, workers=1)
    np.testing.assert_array_equal(res.status == "argmaxable", expected)
    assert (res.status == "unargmaxable").sum() == (~expected).sum() >= 11
    assert am.verify_certificate(res, W).all()


@pytest.mark.parametrize("arithmetic", sorted(ARITHMETIC))
def test_borderline_margins_agree_with_exact_arithmetic(arithmetic, monkeypatch):
    """:meth:`CategorySystem.evaluate` on points near cluster boundaries: a margin above eps holds in exact
    rational arithmetic for every row, and every point that wins by 1% more than eps in exact arithmetic gets a
    margin above eps (the re-check loses nothing to the rounding bound); a duplicate's point gets -inf."""
    from fractions import Fraction

    from argmaxable.core import systems

    for name, value in ARITHMETIC[arithmetic].items():
        monkeypatch.setattr(fastpath, name, value)
    W = clustered_layer(1).astype(np.float32 if arithmetic != "float64" else np.float64)
    system = systems.CategorySystem(W, None)
    rng = np.random.default_rng(2)
    items = np.concatenate([np.arange(120, len(W)), rng.choice(120, 10, replace=False)])
    X = np.vstack([W[items], W[items] + 3e-4 * rng.normal(size=(len(items), W.shape[1]))]).astype(system.dtype)
    items = np.concatenate([items, items])
    eps = 1e-8
    _, margin = system.evaluate(items, X, eps)
    Wq = [[Fraction(float(v)) for v in row] for row in W]
    for x, t, m in zip(X, items, margin, strict=True):
        xq = [Fraction(float(v)) for v in x]
        wins, clear = True, True
        for i, row in enumerate(Wq):
            if i == t:
                continue
            a = [p - q for p, q in zip(row, Wq[t], strict=True)]
            gap = -sum(p * q for p, q in zip(a, xq, strict=True))  # l_t - l_i
            sq = sum(p * p for p in a)
            wins &= gap > 0 and gap * gap > eps * eps * sq
            clear &= gap > 0 and gap * gap > (1.01 * eps) ** 2 * sq
        assert not (m > eps) or wins
        assert not clear or m > eps
    assert margin[items == len(W) - 1].max() == -np.inf  # the duplicate of row 5


def test_bf16_block_maxima_read_through_int16_bits_match_torch():
    """The Gram pass reads a bfloat16 block's maxima through its bits as int16 (negative values order in reverse):
    the same values as torch's own maxima, with negative rows, -0.0 and -inf among them."""
    torch = pytest.importorskip("torch")
    from argmaxable.core.backend import bf16_max

    T = (torch.randn((40, 33), generator=torch.Generator().manual_seed(0)) * 10).to(torch.bfloat16)
    T[0, :], T[1, :], T[2, 0] = -torch.rand(33) - 1, -0.0, -torch.inf  # all negative, signed zeros, -inf
    for axis in (0, 1):
        np.testing.assert_array_equal(bf16_max(T, axis), T.amax(dim=axis).double().numpy())


@pytest.mark.parametrize("n", [48, 50])  # spans of 3 columns: all full, or a shorter last one
def test_band_argmax_finds_the_first_maximum_of_each_span(n):
    torch = pytest.importorskip("torch")
    from argmaxable.core.backend import band_argmax

    rng = np.random.default_rng(n)
    L = rng.integers(0, 4, size=(30, n)).astype(np.float32)  # many ties: the first maximum counts
    width = -(-n // 16)
    span = rng.integers(0, -(-n // width), size=30)
    expected = [s * width + int(np.argmax(row[s * width : (s + 1) * width])) for row, s in zip(L, span, strict=True)]
    np.testing.assert_array_equal(band_argmax(L, span, width), expected)
    np.testing.assert_array_equal(band_argmax(torch.from_numpy(L).to(torch.bfloat16), span, width), expected)


def test_an_exact_duplicate_gets_its_first_blocking_row_alone_as_lp_system():
    """An item with an exact duplicate of bias at least as high gets that zero row alone as its LP system (the LP
    stops at the first such row of the whole system): the same outcome and certificate as the whole system, without
    an (n - 1) x d float64 matrix."""
    from argmaxable.core.systems import CategorySystem

    rng = np.random.default_rng(10)
    W, b = rng.normal(size=(300, 5)), rng.normal(size=300)
    W[[40, 90, 200]] = W[120]
    b[[40, 90, 200]] = b[120] + np.array([-1.0, 0.0, 1.0])
    system = CategorySystem(W, b)
    for t, dup in [(120, 90), (40, 90), (90, 120), (200, None), (7, None)]:
        A, c = system.dense(t)
        full_A, full_c = np.delete(W, t, axis=0) - W[t], np.delete(b, t) - b[t]
        if dup is None:
            np.testing.assert_array_equal(A, full_A)
            continue
        assert A.shape == (1, 5)
        out, full = chebyshev(A, c, 100.0), chebyshev(full_A, full_c, 100.0)
        assert out.status == full.status == "infeasible" and out.upper == full.upper == -np.inf
        assert system.row_index(t, out.dual_rows).tolist() == (full.dual_rows + (full.dual_rows >= t)).tolist() == [dup]
        assert system.dense_rows(t, [3, dup]).tolist() == [0]
    res = am.check_categories(W, b=b, workers=1)
    assert res.status[[40, 90, 120]].tolist() == ["unargmaxable"] * 3 and res.status[200] == "argmaxable"
    assert "duplicate of category 90" in res.message[120]
    assert am.verify_certificate(res, W, b).all()


def test_each_lp_system_is_written_over_its_threads_array_and_no_outcome_keeps_it():
    """The exact stage writes item after item's (n - 1) x d differences into one array per thread (a fresh one
    costs its pages: 0.8 s at 62000 x 512): a second item on the thread gets the same memory, another thread its
    own; an outcome read after later items overwrote the array equals the outcome of the item's own fresh system."""
    import threading

    from argmaxable.core.systems import CategorySystem

    rng = np.random.default_rng(11)
    W, b = rng.normal(size=(400, 6)), rng.normal(size=400)
    system = CategorySystem(W, b)
    first = system.dense(3)[0]
    assert system.dense(50)[0] is first
    np.testing.assert_array_equal(first, np.delete(W, 50, axis=0) - W[50])
    other = []
    thread = threading.Thread(target=lambda: other.append(system.dense(7)[0]))
    thread.start()
    thread.join()
    assert other[0] is not first and not np.shares_memory(other[0], first)
    items = [3, 50, 399, 0, 211]
    outcomes = [chebyshev(*system.dense(t), 100.0) for t in items]
    for t, out in zip(items, outcomes, strict=True):
        fresh = chebyshev(np.delete(W, t, axis=0) - W[t], np.delete(b, t) - b[t], 100.0)
        assert (out.status, out.lower, out.upper) == (fresh.status, fresh.lower, fresh.upper)
        np.testing.assert_array_equal(out.dual_rows, fresh.dual_rows)
        np.testing.assert_array_equal(out.dual_weights, fresh.dual_weights)
        if fresh.x is not None:
            np.testing.assert_array_equal(out.x, fresh.x)
    res = am.check_categories(W, b=b, patience=0, workers=2)
    assert am.verify_certificate(res, W, b).all()


@pytest.mark.skipif(not bf16_gemm(), reason="no native bfloat16 products on this CPU")
def test_logits_of_one_pass_take_an_eighth_of_the_layer_and_cutting_changes_nothing():
    """On the bfloat16 path a reflection step's logits are computed a pass of points at a time, at most an eighth
    of the layer (8 MiB for a small one), into one buffer; a batch cut into passes gets the results of one pass:
    the same rows to reflect across, the same margins but for the points whose rows near the bound are measured
    again in float64 (a product of their group, whose rounding follows its shape), within a few units of it."""
    from argmaxable.core import systems

    rng = np.random.default_rng(9)
    n, d = 40000, 256  # 10.2M weights of 256 columns: bfloat16 steps (BF16_STEPS_D); 8 MiB of logits = 104 points
    W = (rng.normal(size=(n, d)) * rng.uniform(0.5, 2, size=(n, 1))).astype(np.float32)
    system = systems.CategorySystem(W, None)
    assert system._pass_rows == (8 << 20) // (2 * n)
    items = np.arange(0, n, 100)  # 400 points: four passes
    X = (0.6 * W[items] + 0.4 * W[items + 1]).astype(np.float32)
    worst, margin = system.evaluate(items, X, 1e-8)
    assert system._logit_buffer.shape == (system._pass_rows, n)
    whole = systems.CategorySystem(W, None)
    whole.__dict__["_pass_rows"] = len(items)
    whole_worst, whole_margin = whole.evaluate(items, X, 1e-8)
    np.testing.assert_array_equal(whole_worst, worst)
    np.testing.assert_allclose(whole_margin, margin, rtol=1e-12, atol=0)
    assert (whole_margin == margin).mean() > 0.9
    big = systems.CategorySystem(np.zeros((70000, 256), dtype=np.float32), None)  # 72 MB: its eighth is the budget
    assert big._pass_rows == 70000 * 256 * 4 // 8 // (2 * 70000)


@pytest.mark.skipif(not bf16_gemm(), reason="no native bfloat16 products on this CPU")
def test_start_points_beaten_in_the_gram_pass_skip_their_first_whole_layer_step(monkeypatch):
    """Start points the bfloat16 Gram pass shows beaten take their first step from the Gram block that beat them
    (no product with the whole layer): on a clustered head whose norms vary by 20%, the rows chosen beat the start
    point in float64, the verdicts are those of the whole-layer first step, and every witness is verified."""
    from argmaxable.core import systems

    rng = np.random.default_rng(8)
    n, d = 4000, 256  # 1.02M weights: the bfloat16 path
    W = rng.normal(size=(n, d))
    W[:80] = W[0] + 0.05 * rng.normal(size=(80, d))  # a cluster of near-duplicates
    W = (W / np.linalg.norm(W, axis=1, keepdims=True) * rng.uniform(0.9, 1.1, size=(n, 1))).astype(np.float32)
    system = systems.CategorySystem(W, None)
    gram = system.start_margins(1e-8)
    beaten = np.flatnonzero(gram.beaten >= 0)
    assert beaten.size > 50  # most of the cluster
    worst, margin = system.evaluate(beaten, W[beaten], 1e-8, gram)
    W64 = W.astype(np.float64)
    assert (np.einsum("kd,kd->k", W64[worst], W64[beaten]) > np.einsum("kd,kd->k", W64[beaten], W64[beaten])).all()
    assert (margin < 0).all()
    res = am.check_categories(W)
    assert am.verify_certificate(res, W).all()
    monkeypatch.setattr(systems.CategorySystem, "_first_steps", lambda self, items, *_: np.arange(len(items)))
    np.testing.assert_array_equal(res.status, am.check_categories(W).status)


def test_gram_maxima_through_one_buffer_are_the_row_maxima_off_the_diagonal():
    """The Gram pass's blocks, written into one reused buffer (numpy and torch alike), give every row's maximum
    over the other rows and the first block of ``block`` columns that holds it, as the whole matrix says; the
    block size does not divide n, so the last blocks are smaller than the buffer."""
    import torch

    from argmaxable.core.backend import gram_maxima

    rng = np.random.default_rng(11)
    W = rng.normal(size=(70, 6))
    G = W @ W.T
    np.fill_diagonal(G, -np.inf)
    for left in (W, torch.from_numpy(W)):
        top, where = gram_maxima(70, 16, left, left)
        np.testing.assert_allclose(top, G.max(axis=1), rtol=1e-12)
        np.testing.assert_array_equal(where, G.argmax(axis=1) // 16 * 16)


def test_padded_rows_are_few_powers_of_two_within_the_cap():
    """A bfloat16 product of k points is computed with the next power of two from 16 rows, at most the cap: a whole
    check meets a handful of shapes (oneDNN keeps a compiled kernel for every shape it meets, for good)."""
    from argmaxable.core.backend import padded_rows

    assert [padded_rows(k, 144) for k in (1, 16, 17, 33, 64, 65, 128, 129, 144)] == [16, 16, 32, 64, 64, 128, 128,
                                                                                    144, 144]
    assert {padded_rows(k, 144) for k in range(1, 145)} == {16, 32, 64, 128, 144}
    assert padded_rows(40, 20) == 20


@pytest.mark.skipif(not bf16_gemm(), reason="no native bfloat16 products on this CPU")
def test_a_bf16_check_multiplies_a_handful_of_point_counts_and_padding_changes_nothing(monkeypatch):
    """A whole check on the bfloat16 path multiplies points in a few padded counts only (no new kernel per pass as
    the active points shrink), and a point's logits do not depend on the zero points padded below it: evaluating
    points one pass at a time or a few at a time gives the same rows to reflect across and the same margins to the
    points bfloat16 settles (the others are measured again by numpy, in float64 or float32, whose rounding follows
    the shape: the same rows, margins within a few units of rounding)."""
    from argmaxable.core import systems

    rng = np.random.default_rng(12)
    n, d = 5000, 256  # 1.28M weights: the bfloat16 path
    W = rng.normal(size=(n, d))
    W[:60] = W[0] + 0.05 * rng.normal(size=(60, d))  # a cluster: points that take several steps
    W = (W * rng.uniform(0.5, 2, size=(n, 1))).astype(np.float32)
    counts = set()
    points = systems.CategorySystem._bf16_points

    def counted(self, X, rows):
        counts.add(rows)
        return points(self, X, rows)

    monkeypatch.setattr(systems.CategorySystem, "_bf16_points", counted)
    res = am.check_categories(W)
    assert am.verify_certificate(res, W).all()
    pass_rows = systems.CategorySystem(W, None)._pass_rows
    assert counts <= {16, 32, 64, 128, 256, 512, pass_rows} and len(counts) >= 2
    system = systems.CategorySystem(W, None)
    items = np.arange(0, 3000, 10)
    X = (0.5 * W[items] + 0.5 * W[items + 1]).astype(np.float32)
    measured = np.zeros(n, dtype=bool)  # the items whose points bfloat16 leaves open
    recheck = system._recheck

    def spy(p, open_, *args, **kw):
        measured[p.items[open_]] = True
        return recheck(p, open_, *args, **kw)

    monkeypatch.setattr(system, "_recheck", spy)
    worst, margin = system.evaluate(items, X, 1e-8)
    settled = ~measured[items]
    assert 50 <= settled.sum() < len(items) and system._fine[items].sum() < (~settled).sum()
    # A point measured again that wins has the margin its logits show, not eps (the rows left unmeasured: within
    # bfloat16's bound of their computed logits), and no more than its exact distance to any row.
    won = np.flatnonzero(~settled & ~system._fine[items] & (margin > 1e-8))
    W64, X64 = W.astype(np.float64), X.astype(np.float64)
    D = W64[items[won], None, :] - W64[None, :, :]  # (won, n, d)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.nanmin(np.einsum("knd,kd->kn", D, X64[won]) / np.linalg.norm(D, axis=2), axis=1)
    assert len(won) >= 2 and (margin[won] <= exact).all() and (margin[won] > 1e-4).all()
    for lo in range(0, len(items), 7):  # 7 points padded to 16 at a time
        k = slice(lo, lo + 7)
        system._fine[:] = False
        w7, m7 = system.evaluate(items[k], X[k], 1e-8)
        np.testing.assert_array_equal(w7[settled[k]], worst[k][settled[k]])
        np.testing.assert_array_equal(m7[settled[k]], margin[k][settled[k]])
        np.testing.assert_array_equal(w7, worst[k])
        np.testing.assert_allclose(m7, margin[k], rtol=1e-12, atol=0)


def _pool(system, box, record: bool, capacity: int = 64):
    """Reflection of every item of ``system`` in a pool of ``capacity`` slots, and each item's point (the witness
    if proven, else the iterate of best margin) from the pool's kept rows and its path."""
    from argmaxable.core import reflect as rf

    n = system.n_rows
    pool = rf._reflect_pool(system, np.arange(n), rf._Plan(2500, box, 1e-8, 64, capacity, record, system.dtype),
                            lambda k: None)
    x = np.full((n, system.d), np.nan, dtype=system.dtype)
    x[pool.kept] = pool.points
    if pool.path is not None:
        pool.path.replay(system, x, pool.path.where)
    return pool, x


def _clustered_system(dtype, bias):
    from argmaxable.core.systems import CategorySystem

    rng = np.random.default_rng(13)
    n, d = 600, 40
    W = rng.normal(size=(n, d)) * rng.uniform(0.3, 1.5, size=(n, 1))
    W[:40] = W[0] + 0.01 * rng.normal(size=(40, d))  # a cluster: several steps each
    W[40:43] = W[50]  # a tie group of four: never reflected
    return CategorySystem(W.astype(dtype), rng.normal(size=n) if bias else None)


@pytest.mark.parametrize("dtype, bias, bound", [(np.float32, False, 0.02), (np.float64, False, 0.02),
                                                (np.float32, True, 100.0), (np.float64, True, 100.0)])
def test_a_pool_path_replays_its_witnesses_bit_for_bit(dtype, bias, bound, monkeypatch):
    """A whole vocabulary's witnesses are written after reflection from the pool's recorded path (so the witnesses
    and the bfloat16 copy of the layer are never in memory at once): replaying the scalings into the box (a small
    box shrinks every point) and the reflections gives each proven point exactly as the pool computed it (the same
    pool without a recorder keeps every point as a row). Without a bias, the items that restarted from their
    whitened point (proven after more than one reflection) are not in the path: the pool keeps them as rows. A
    pool of 64 slots for 600 items refills them as items leave. The path replays 7 items at a time (a chunk
    boundary falls inside most steps' records)."""
    from argmaxable.core import reflect as rf
    from argmaxable.core.box import make_box

    monkeypatch.setattr(rf, "REPLAY_BYTES", 7 * 8 * 40)
    system, box = _clustered_system(dtype, bias), make_box(40, bound)
    pool, x = _pool(system, box, record=True)
    plain, y = _pool(system, box, record=False)
    proven, steps = pool.proven, pool.steps
    assert pool.path is not None and proven.sum() > 300 and (steps[proven] > 2).sum() > 10
    np.testing.assert_array_equal(pool.path.where, np.flatnonzero(proven & ((steps <= rf.RESTART_AFTER + 1) | bias)))
    assert plain.path is None and len(plain.kept) == system.n_rows
    np.testing.assert_array_equal(proven, plain.proven)
    np.testing.assert_array_equal(x, y)
    if not bias:
        w = pool.path.where
        assert (np.abs(x[w]) <= bound).all() and (np.abs(system.Win[w]) > bound).any(axis=1).all()


def test_a_pool_whose_records_would_outgrow_its_points_keeps_its_witnesses_as_rows(monkeypatch):
    """A recorder stops once its records hold more numbers than an eighth of the points: the witnesses proven so
    far are replayed then and kept as rows, as are all later ones, and every point is the unrecorded pool's."""
    from argmaxable.core import reflect as rf
    from argmaxable.core.box import make_box

    class Small(rf._Recorder):
        def __init__(self, T, d):
            super().__init__(T, d)
            self.limit = 200  # entries: outgrown after a few steps

    system, box = _clustered_system(np.float64, True), make_box(40, 100.0)
    _, y = _pool(system, box, record=False)
    monkeypatch.setattr(rf, "_Recorder", Small)
    pool, x = _pool(system, box, record=True)
    assert pool.path is None and len(pool.kept) == system.n_rows
    np.testing.assert_array_equal(x, y)


def test_tied_items_are_left_to_the_lp_unreflected():
    """Items with a duplicate row (offset at least as high) are not reflected: they leave reflection unproven,
    with no steps and no rows seen, and the LP proves them unargmaxable from that one row."""
    import argmaxable as am
    from argmaxable.core import reflect as rf
    from argmaxable.core.box import make_box

    system = _clustered_system(np.float64, False)
    np.testing.assert_array_equal(np.flatnonzero(system.tied(np.arange(600))), [40, 41, 42, 50])
    out = rf.reflect(system, np.arange(600), patience=2500, box=make_box(40, 100.0), eps=1e-8)
    assert not out.proven[[40, 41, 42, 50]].any() and (out.steps[[40, 41, 42, 50]] == -1).all()
    assert not {40, 41, 42, 50} & set(out.rows)
    res = am.check_categories(system.Win)
    assert (res.status[[40, 41, 42, 50]] == "unargmaxable").all()


def test_a_whole_vocabulary_with_ties_takes_the_gram_pass_and_names_first_rows_from_its_blocks(monkeypatch):
    """Ties do not knock a whole vocabulary off the Gram pass (its items are all the rows, less the tied ones to
    reflect); on the numpy float32 path the start points the pass shows beaten are not measured again: each one's
    first row to reflect across is the argmax of the Gram block holding its maximum, which is the argmax of its
    whole row of logits, and its margin is the pass's certified one (negative). The numpy path is taken on any CPU
    (one with bfloat16 products would otherwise take them)."""
    from argmaxable.core.systems import CategorySystem

    monkeypatch.setattr(fastpath, "bf16_gemm", lambda: False)
    rng = np.random.default_rng(21)
    n, d = 6000, 192  # 1152000 weights: float32, the Gram pass's blocks name the first rows
    W = (rng.normal(size=(n, d)) * rng.lognormal(0, 0.4, size=(n, 1))).astype(np.float32)
    W[1:5] = W[0]
    passes = []
    start_margins = CategorySystem.start_margins
    monkeypatch.setattr(CategorySystem, "start_margins",
                        lambda self, eps, **kw: passes.append(1) or start_margins(self, eps, **kw))
    res = am.check_categories(W)
    assert passes == [1] and (res.status[:5] == "unargmaxable").all() and (res.steps == 1).sum() > n // 2

    system = CategorySystem(W, None)
    assert system.dtype == np.float32 and not system.bf16_start
    gram = system.start_margins(1e-8)
    where, gram_margin = gram.beaten, gram.margin
    items = np.flatnonzero(where >= 0)
    assert len(items) > 100
    worst, margin = system.evaluate(items, W[items], 1e-8, gram)
    full = W[items] @ W.T
    full[np.arange(len(items)), items] = -np.inf
    np.testing.assert_array_equal(worst, np.argmax(full, axis=1))
    np.testing.assert_array_equal(margin, gram_margin[items])
    assert (margin < 0).all()


def test_a_whole_vocabulary_releases_the_bf16_copy_before_its_witnesses_are_written(monkeypatch):
    """The whole-vocabulary path writes its witnesses once the system has released what its products keep; the
    witnesses are those of every start point or reflected path, each verified."""
    from argmaxable.core import reflect as rf
    from argmaxable.core.systems import CategorySystem

    order = []
    monkeypatch.setattr(CategorySystem, "release", lambda self: order.append(("release", self.__dict__.copy())))
    write = rf._write_witnesses

    def spy(system, X, *args):
        order.append(("write",))
        return write(system, X, *args)

    monkeypatch.setattr(rf, "_write_witnesses", spy)
    rng = np.random.default_rng(14)
    W = rng.normal(size=(400, 6))
    res = am.check_categories(W)
    assert [o[0] for o in order] == ["release", "write"]  # reflection's products are over, their copies dropped
    assert am.verify_certificate(res, W).all() and (res.status == "argmaxable").sum() > 100


@pytest.mark.parametrize("dtype, bound", [(np.float64, 0.05), (np.float32, 100.0)])
def test_replayed_witnesses_equal_the_rows_the_pool_computed(dtype, bound, monkeypatch):
    """A whole vocabulary checked with its pool's path replayed gives the same witnesses, bit for bit, as with the
    pool keeping every point as a row; a float64 layer above 2e5 weights reflects in float32 and keeps float64
    witnesses, and its path replays in float32 as its pool ran."""
    from dataclasses import replace

    from argmaxable.core import reflect as rf

    rng = np.random.default_rng(15)
    n, d = 5000, 48  # 240000 weights: float32 steps
    W = rng.normal(size=(n, d)) * rng.uniform(0.5, 1.5, size=(n, 1))
    W[:100] = W[0] + 0.02 * rng.normal(size=(100, d))
    W = W.astype(dtype)
    res = am.check_categories(W, bound=bound)
    assert (res.steps > 2).sum() > 20
    pool = rf._reflect_pool
    monkeypatch.setattr(rf, "_reflect_pool", lambda system, items, plan, progress: pool(  # no recorder
        system, items, replace(plan, record=False), progress))
    rows = am.check_categories(W, bound=bound)
    np.testing.assert_array_equal(res.witness, rows.witness)
    np.testing.assert_array_equal(res.status, rows.status)
    assert am.verify_certificate(res, W, bound=bound).all()


def test_tiers_2_and_3_on_bf16_logits_run_torch_on_one_thread_and_give_the_threads_back(monkeypatch):
    """Tiers 2 and 3 of a bfloat16 step (small exact gathers, comparisons and maxima over a group's logits) run
    with torch on one thread, where a second thread cost more to wake than it saved, and torch has its threads
    again after; the verdicts are those of the same layer checked in float32 steps."""
    import torch

    from argmaxable.core import systems

    for name, value in ARITHMETIC["bfloat16"].items():
        monkeypatch.setattr(fastpath, name, value)
    seen, recheck = [], fastpath.LayerProducts._recheck

    def spy(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return recheck(self, *args, **kwargs)

    monkeypatch.setattr(fastpath.LayerProducts, "_recheck", spy)
    rng = np.random.default_rng(11)
    W = rng.normal(size=(600, 256)).astype(np.float32)
    b = rng.normal(size=600).astype(np.float32)
    W[5] = 0.01 * W[5]  # a short row: its start point loses, and points near its region's edge come to tier 2
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert systems.CategorySystem(W, b).bf16_steps
        res = am.check_categories(W, b=b)
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    monkeypatch.setattr(fastpath, "BF16_STEPS_D", 10**6)  # the same layer in float32 steps
    assert (am.check_categories(W, b=b).status == res.status).all()


def test_a_biased_layer_starts_at_its_rows_lifted_into_the_box():
    """Rows of spread 0.05 beside biases of spread 0.5 (a Gaussian replica of a translation model's head): at w_t
    the biases decide and one category wins at its start point; lifted by 256 (the largest power of two keeping
    every row in the box of 100) the own products decide, 2852 of 3000 win there with the Gram pass's margins, each
    witness exactly 256 w_t, and the verdicts are those the unlifted start reached (2899 argmaxable, 101 not, the
    rows shrunk near the origin: the statuses pinned from that run), every one verified."""
    from argmaxable.core.box import start_lift

    rng = np.random.default_rng(5)
    n, d = 3000, 96
    W = (rng.standard_normal((n, d)) * 0.05).astype(np.float32)
    b = (rng.standard_normal(n) * 0.5).astype(np.float32)
    few = rng.choice(n, 150, replace=False)
    W[few] *= np.float32(0.05)
    b[few] += np.float32(3.0)
    assert start_lift(W, np.full(d, -100.0), np.full(d, 100.0)) == 256
    res = am.check_categories(W, b=b, bound=100.0, workers=1)
    assert res.counts() == {"argmaxable": 2899, "unargmaxable": 101, "undecided": 0}
    assert set(res.unargmaxable) <= set(few.tolist())
    start = res.steps == 1
    assert start.sum() == 2852
    np.testing.assert_array_equal(res.witness[start], W[start].astype(np.float64) * 256)
    assert am.verify_certificate(res, W, b).all()
