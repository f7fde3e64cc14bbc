"""The per-coordinate box (issue 9 part 3): activation ranges, and verdicts that move exactly as hand-computed
facts say when the box narrows."""

from __future__ import annotations

import math

import numpy as np
import pytest

import argmaxable as am
from argmaxable.cli import main

TOY = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # 002 Fig. 1: c4 lies inside the triangle


def test_activation_bounds_contain_the_activation_range_tightly():
    x = np.linspace(-10, 10, 2_000_001)
    silu = x / (1 + np.exp(-x))
    gelu = x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    for name, values in (("silu", silu), ("swish", silu), ("gelu", gelu)):
        lo, hi = am.activation_bounds(name, 100.0)
        assert lo <= values.min() < lo + 1e-3 and hi == 100.0  # contains every value, rounded outward by < 1e-3
    assert am.activation_bounds("relu", 100.0) == (0.0, 100.0)
    assert am.activation_bounds("tanh", 100.0) == (-1.0, 1.0)
    assert am.activation_bounds("sigmoid", 0.5) == (0.0, 0.5)  # capped by the paper's box
    assert am.activation_bounds(None, 7.0) == (-7.0, 7.0)
    with pytest.raises(ValueError, match="Unknown activation 'softsign'"):
        am.activation_bounds("softsign", 100.0)


def test_relu_box_makes_a_negative_only_category_unargmaxable():
    """Category 2 = (-1, -1) wins only where x1 + x2 < 0; with x >= 0 its logit -x1-x2 <= 0 <= 0.1 (x1+x2), the
    logit of category 3: it can never win strictly (hand-computed)."""
    paper = am.check_categories(TOY)
    relu = am.check_categories(TOY, lower=0.0)
    assert paper.status.tolist() == ["argmaxable", "argmaxable", "argmaxable", "unargmaxable"]
    assert relu.status.tolist() == ["argmaxable", "argmaxable", "unargmaxable", "unargmaxable"]
    assert (relu.witness[:2] >= 0).all()  # witnesses lie in the narrowed box
    assert am.verify_certificate(relu, TOY).all()
    lo, hi = am.activation_bounds("relu", 100.0)
    np.testing.assert_array_equal(am.check_categories(TOY, lower=lo, upper=hi).status, relu.status)


def test_one_dimensional_box_against_exact_intervals():
    """d = 1, logits x, 2x - 1, 3x - 3: category 0 wins on x < 1, category 1 on (1, 2), category 2 on x > 2.
    A category is argmaxable in [lower, upper] iff its interval meets the box in more than a point (exact
    arithmetic on the interval ends, no Qhull)."""
    W, b = np.array([[1.0], [2.0], [3.0]]), np.array([0.0, -1.0, -3.0])
    wins = [(-np.inf, 1.0), (1.0, 2.0), (2.0, np.inf)]
    for lower, upper in [(-5, 5), (-5, 1.0), (-5, 1.5), (1.0, 2.0), (1.2, 1.8), (2.0, 5), (2.5, 5), (-5, 0.5)]:
        res = am.check_categories(W, b=b, lower=lower, upper=upper)
        truth = ["argmaxable" if min(hi, upper) - max(lo, lower) > 1e-6 else "unargmaxable" for lo, hi in wins]
        assert res.status.tolist() == truth, (lower, upper)
        assert am.verify_certificate(res, W, b).all()


def test_assignment_and_top_m_boxes():
    """Sigmoid labels w = (1, 0), (0, 1): the assignment 'label 0 on, label 1 off' needs x1 > 0 > x2, so it
    is gone under x >= 0; with tanh's box it stays. Top-m: {2} (row (-1, -1)) is the top-1 only where category 2
    is argmaxable, so it follows the ReLU verdict above."""
    W = np.array([[1.0, 0.0], [0.0, 1.0]])
    Y = [[0], [0, 1], []]
    assert am.check_assignments(W, Y, lower=0.0).status.tolist() == ["unargmaxable", "argmaxable", "unargmaxable"]
    assert am.check_assignments(W, Y, lower=-1.0, upper=1.0).status.tolist() == ["argmaxable"] * 3
    res = am.check_top_m(TOY, [[2], [0, 1]], lower=0.0)
    assert res.status.tolist() == ["unargmaxable", "argmaxable"]
    assert res.settings["lower"][:2] == [0.0, 0.0]


def test_box_errors_are_one_line():
    for kwargs, match in [({"lower": 1.0, "upper": 1.0}, "empty or flat at coordinate 0"),
                          ({"lower": [0.0, 0.0, 0.0]}, "shape \\(2,\\)"),
                          ({"upper": "1"}, "'upper' parameter must be a number"),
                          ({"lower": 1j}, "'lower' parameter must be a number")]:
        with pytest.raises(ValueError, match=match) as err:
            am.check_categories(TOY, **kwargs)
        assert "\n" not in str(err.value)


def test_cli_activation_box(tmp_path, capsys):
    path = tmp_path / "toy.npz"
    np.savez(path, W=TOY)
    assert main(["check", "softmax", str(path), "--activation", "relu", "--workers", "1"]) == 0
    assert "2 argmaxable, 2 unargmaxable" in capsys.readouterr().out
    assert main(["check", "softmax", str(path), "--lower", "0", "--workers", "1"]) == 0
    assert "2 argmaxable, 2 unargmaxable" in capsys.readouterr().out
    assert main(["check", "softmax", str(path), "--activation", "relu", "--lower", "0"]) == 2
    assert "either --activation or --lower" in capsys.readouterr().err


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shrink_factors_put_points_in_the_box_with_the_smallest_factor(dtype):
    # A cone's start point is scaled into the box by the smallest s >= 1: the fast path of a box around the origin
    # (two products per row in X's dtype, rounded up) agrees with the exact ratios max_j x_j / hi_j, x_j / lo_j
    # to a few units, and X / s lies in the box; a box with an end at 0 takes the general path.
    from argmaxable.core.box import inside, shrink_factors

    rng = np.random.default_rng(5)
    X = (rng.normal(size=(500, 7)) * rng.uniform(0.01, 300, size=(500, 1))).astype(dtype)
    X[0] = 0.0
    lo, hi = np.array([-100.0, -5, -100, -1, -100, -100, -0.5]), np.array([100.0, 3, 100, 1, 100, 50, 0.5])
    s = shrink_factors(X, lo, hi)
    X64 = X.astype(np.float64)
    exact = np.maximum(np.maximum(X64 / hi, X64 / lo).max(axis=1), 1.0)
    assert (s >= exact).all() and np.allclose(s, exact, rtol=1e-5 if dtype == np.float32 else 1e-13)
    assert s[0] == 1.0 and inside(X64 / s[:, None], lo, hi).all()
    relu = shrink_factors(X, np.zeros(7), hi)  # x_j < 0 cannot be scaled into x_j >= 0
    assert np.array_equal(np.isinf(relu), (X < 0).any(axis=1))
