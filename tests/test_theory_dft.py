"""DFT geometry: alternation theorem (thesis Thm 5.3, Prop. 5.1) and slack columns (Prop. 5.2)."""

import numpy as np
import pytest

import argmaxable as am
from argmaxable.constructions import dft_matrix
from argmaxable.theory.dft import alternation_table, alternations, radius_table, sample_k_active


def test_alternations_count_sign_changes():
    Y = np.array([[1, 1, 0, 0, 0], [1, 1, 0, 1, 0]], dtype=bool)  # thesis: alt(++---) = 1, alt(++-+-) = 3
    assert alternations(Y).tolist() == [1, 3]


def test_dft_argmaxable_assignments_are_the_2k_alternating_ones():
    df = alternation_table(7, bound=1e4, eps=1e-8)
    assert df["mismatches"].sum() == 0 and df["undecided"].sum() == 0
    # |V_{n,2k}| = 2 sum_{i<=2k} C(n-1, i): for n = 7, k = 1 that is 2 (1 + 6 + 15) = 44.
    assert df.set_index(["n", "k"]).loc[(7, 1), "argmaxable"] == 44


def test_k_active_assignments_stay_argmaxable_with_slack():
    rng = np.random.default_rng(0)
    Y = sample_k_active(40, 2, 30, rng)
    assert (Y.sum(axis=1) == 2).all()
    W = np.hstack([dft_matrix(40, 2), rng.standard_normal((40, 16)) / np.sqrt(40)])
    assert (am.check_assignments(W, Y, workers=1).status == "argmaxable").all()


def test_radius_table_shape():
    df = radius_table([16], [1, 2], slack=4, samples=20, quantile=0.01, seed=0, bound=1e4, eps=1e-8)
    assert len(df) == 4 and set(df["slack"]) == {0, 4}
    assert (df["eps_argmaxable"] == 20).all()  # thesis Thm 5.4: every k-active assignment


def test_radius_table_values_match_scipy_linprog():
    """The radius column against an LP we did not write: scipy's linprog on the full Chebyshev programme
    (maximise t s.t. a_i.x/||a_i|| + t <= 0, |x_j| <= B, a_i = -s_i w_i) for the same sampled assignments."""
    from scipy.optimize import linprog

    n, k, samples, bound = 16, 1, 20, 1e4
    df = radius_table([n], [k], slack=0, samples=samples, quantile=0.0, seed=0, bound=bound, eps=1e-8)
    Y = sample_k_active(n, k, samples, np.random.default_rng(0))  # the table's first draw
    W = dft_matrix(n, k)
    radii = []
    for y in Y:
        A = -np.where(y, 1.0, -1.0)[:, None] * W
        A /= np.linalg.norm(A, axis=1, keepdims=True)
        d = W.shape[1]
        out = linprog(np.r_[np.zeros(d), -1.0], A_ub=np.hstack([A, np.ones((n, 1))]), b_ub=np.zeros(n),
                      bounds=[(-bound, bound)] * d + [(None, None)], method="highs")
        radii.append(-out.fun)
    row = df[df["slack"] == 0].iloc[0]
    assert row["radius_min"] == pytest.approx(min(radii), rel=1e-6)
    assert row["radius_quantile"] == pytest.approx(min(radii), rel=1e-6)  # the 0% quantile is the minimum


def test_regions_thinner_than_eps_are_settled_exactly():
    """With eps above every radius in the box (|x_j| <= 1e-3), no assignment is eps-argmaxable, yet Thm 5.3 makes
    every k-active one argmaxable: the exact stage finds each region non-empty (a rational point inside it)."""
    df = radius_table([16], [1, 2], slack=4, samples=10, quantile=0.01, seed=0, bound=1e-3, eps=0.5)
    assert (df["eps_argmaxable"] == 0).all()
    assert (df["thin"] == 10).all() and (df["empty"] == 0).all()
