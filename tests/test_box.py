"""The per-coordinate box: activation ranges, and verdicts that move exactly as hand-computed
facts say when the box narrows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import argmaxable as am
from argmaxable.cli import main

TOY = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # ACL 2022 Fig. 1: c4 lies inside the triangle


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
    assert am.verify_certificate(relu, TOY, lower=0.0).all()
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
        assert am.verify_certificate(res, W, b, lower=lower, upper=upper).all()


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


# The box holds the activation as the model computes it, in its dtype; tanh-GELU is its own activation.

C = math.sqrt(2 / math.pi)


def _forms(name, x):
    """The activation ``name`` of ``x`` computed the ways frameworks do: fused in float32 and rounded once, or op
    by op in x's dtype (each product, sum and function rounded)."""
    import torch
    from torch.nn import functional as F

    k = lambda v: torch.tensor(v, dtype=x.dtype)  # noqa: E731
    if name == "silu":
        return [F.silu(x), x * torch.sigmoid(x), x / (1 + torch.exp(-x)), F.silu(x.float()).to(x.dtype)]
    if name == "gelu":
        return [F.gelu(x), x * 0.5 * (1 + torch.erf(x / k(math.sqrt(2)))), 0.5 * x * (1 + torch.erf(x * k(2**-0.5)))]
    return [F.gelu(x, approximate="tanh"), 0.5 * x * (1 + torch.tanh(k(C) * (x + k(0.044715) * x * x * x))),
            x * torch.sigmoid(k(2 * C) * (x + k(0.044715) * x**3))]


def _every(dtype):
    """Every finite value of a 16-bit float dtype."""
    import torch

    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    return x[torch.isfinite(x)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["silu", "gelu", "gelu_tanh"])
def test_activation_boxes_hold_every_value_of_a_half_precision_dtype(name, dtype):
    """SiLU reaches -0.27856 in float16 and -0.2793 in bfloat16, below the bound -0.2785; GELU op by
    op reaches -0.1702 / -0.1709, below -0.17. Every input of the dtype, every way of computing it."""
    import torch

    lower, _ = am.activation_bounds(name, 100.0, dtype)
    least = min(float(y[torch.isfinite(y)].min()) for y in _forms(name, _every(getattr(torch, dtype))))
    assert lower <= least < lower + 0.0025  # holds every value, rounded outward by about one unit of the dtype
    if name == "silu":
        assert least < am.activation_bounds(name, 100.0)[0]  # the float32 box misses it


@pytest.mark.parametrize(("name", "around"), [("silu", (-1.35, -1.2)), ("gelu", (-0.8, -0.7)),
                                              ("gelu_tanh", (-0.8, -0.7))])
def test_float32_boxes_hold_every_float32_value_around_the_minimum(name, around):
    """Every float32 input within the interval that holds the minimiser (the functions rise away from it)."""
    import torch

    lo = torch.tensor(around[0], dtype=torch.float32).view(torch.int32)
    hi = torch.tensor(around[1], dtype=torch.float32).view(torch.int32)
    x = torch.arange(int(hi), int(lo) + 1, dtype=torch.int32).view(torch.float32)  # negative: bits run backwards
    least = min(float(y.min()) for y in _forms(name, x))
    lower = am.activation_bounds(name, 100.0, "float32")[0]
    assert lower <= least < lower + 1e-3
    assert am.activation_bounds(name, 100.0, "float64")[0] == lower


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**15), 2**15 - 1), st.sampled_from(["float16", "bfloat16", "float32"]),
       st.sampled_from(["silu", "swish", "gelu", "gelu_tanh"]), st.floats(0.0, 100.0))
def test_activation_boxes_hold_random_inputs(bits, dtype, name, scale):
    import torch

    if dtype == "float32":
        x = torch.tensor([-scale, scale / 7], dtype=torch.float32)
    else:
        x = torch.tensor([bits], dtype=torch.int16).view(getattr(torch, dtype))
    lower, _ = am.activation_bounds(name, 100.0, dtype)
    for y in _forms("silu" if name == "swish" else name, x):
        y = y[torch.isfinite(y)]
        assert (y >= lower).all()


def test_tanh_gelu_reaches_below_the_erf_box():
    """W = [[1], [-1]], b = [0, -0.340004]. Category 1 wins where -x - 0.340004 > x, i.e.
    x < -0.170002: never after the erf GELU (>= -0.16997), but tanh-GELU gives -0.17004 at x = -0.75246."""
    import torch
    from torch.nn import functional as F

    W, b = np.array([[1.0], [-1.0]]), np.array([0.0, -0.340004])
    x = F.gelu(torch.tensor([-0.75246], dtype=torch.float64), approximate="tanh").numpy()
    assert int(np.argmax(W @ x + b)) == 1
    for name, status in (("gelu", "unargmaxable"), ("gelu_tanh", "argmaxable")):
        lower, upper = am.activation_bounds(name, 100.0)
        res = am.check_categories(W, b=b, lower=lower, upper=upper, workers=1)
        assert res.status[1] == status and am.verify_certificate(res, W, b, lower=lower, upper=upper).all()
    with pytest.raises(ValueError, match="'dtype' parameter of activation_bounds must be one of"):
        am.activation_bounds("silu", 100.0, "int8")


def test_start_lift_is_the_largest_power_of_two_keeping_every_row_in_the_box():
    """The lift of a layer whose largest entry is 0.3 in the box of 100 is 256 (256 x 0.3 = 76.8; 512 x 0.3 leaves
    it), set by the tighter end of an asymmetric box, 1 where no lift of at least 2 fits or the box does not hold
    the origin, and never past the cap for a zero layer."""
    from argmaxable.core.box import MAX_LIFT, start_lift

    W = np.array([[0.3, -0.1], [0.2, -0.25]], dtype=np.float32)
    lo, hi = np.full(2, -100.0), np.full(2, 100.0)
    assert start_lift(W, lo, hi) == 256
    assert start_lift(W, np.array([-100.0, -20.0]), hi) == 64  # 64 x 0.25 = 16 <= 20 < 128 x 0.25
    assert start_lift(W, np.full(2, -0.5), np.full(2, 0.5)) == 1  # 2 x 0.3 leaves |x| <= 0.5
    assert start_lift(W, np.zeros(2), hi) == 1  # the origin on the box's edge
    assert start_lift(np.zeros((3, 2)), lo, hi) == MAX_LIFT
    # at the edge: 0.390625 x 256 = 100 exactly stays in
    assert start_lift(np.array([[0.390625, 0.0]]), lo, hi) == 256
    lift = start_lift(W, lo, hi)
    assert math.log2(lift).is_integer() and ((lift * W >= lo) & (lift * W <= hi)).all()


def test_a_layer_finds_its_start_lift_once_per_box(monkeypatch):
    """Reflection asks the layer for its lift again when it reruns items in float32: the layer scans its rows once
    per box and answers the same lift (another box, its own)."""
    from argmaxable.core import box, fastpath
    from argmaxable.core.systems import CategorySystem

    scans = []
    monkeypatch.setattr(fastpath, "start_lift", lambda W, lo, hi: scans.append(len(W)) or box.start_lift(W, lo, hi))
    W = np.array([[0.3, -0.1], [0.2, -0.25], [0.0, 0.1]], dtype=np.float32)
    system = CategorySystem(W, np.array([0.0, 1.0, -1.0]))
    lo, hi = np.full(2, -100.0), np.full(2, 100.0)
    assert system.start_lift(lo, hi) == system.start_lift(lo.copy(), hi.copy()) == 256 and scans == [3]
    assert system.start_lift(np.array([-100.0, -20.0]), hi) == 64 and scans == [3, 3]
