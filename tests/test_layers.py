"""argmaxable.layers: each head, trained a few steps on a toy problem, keeps its guarantee under the core's
check with re-verified certificates, while a plain nn.Linear of the same shape loses outputs on the same check."""

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import argmaxable as am
from argmaxable.constructions import dft_matrix
from argmaxable.core import check_rankings, verify_rankings
from argmaxable.layers import DFTSigmoidHead, DFTSoftmaxHead, SphericalSoftmaxHead


def _train(head: nn.Module, in_features: int, n: int, loss: str, steps: int = 30) -> nn.Module:
    """A few Adam steps on random features with random targets (a class, or a 0/1 label row)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, in_features, generator=g)
    opt = torch.optim.Adam(head.parameters(), lr=0.05)
    if loss == "softmax":
        y = torch.randint(n, (256,), generator=g)
        fn = nn.functional.cross_entropy
    else:
        y = (torch.rand(256, n, generator=g) < 0.15).float()
        fn = nn.functional.binary_cross_entropy_with_logits
    before = [p.detach().clone() for p in head.parameters()]
    for _ in range(steps):
        opt.zero_grad()
        fn(head(x), y).backward()
        opt.step()
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, head.parameters(), strict=True))
    return head


def _plain_weights(layer: nn.Linear):
    b = None if layer.bias is None else layer.bias.detach().double().numpy()
    return layer.weight.detach().double().numpy(), b


def test_spherical_head_keeps_every_category_where_a_plain_linear_loses_most():
    torch.manual_seed(0)
    d, n = 2, 40
    head = _train(SphericalSoftmaxHead(d, n, bias=False), d, n, "softmax")
    W, b = head.weights()
    assert b is None
    np.testing.assert_allclose(np.linalg.norm(W, axis=1), np.exp(head.log_scale.item()), rtol=1e-6)  # float32 rows
    x = torch.randn(3, d)
    np.testing.assert_allclose(head(x).detach().double().numpy(), x.double().numpy() @ W.T, atol=1e-5)
    res = am.check_categories(W, b=b, workers=1)
    assert res.counts()["argmaxable"] == n
    assert am.verify_certificate(res, W, b).all()

    plain = _train(nn.Linear(d, n), d, n, "softmax")
    Wp, bp = _plain_weights(plain)
    res = am.check_categories(Wp, b=bp, workers=1)
    assert res.counts()["unargmaxable"] > n // 2  # 40 points in the plane: few are hull vertices
    assert am.verify_certificate(res, Wp, bp).all()


def test_spherical_head_with_a_bias_returns_it():
    head = SphericalSoftmaxHead(3, 5)
    W, b = head.weights()
    x = torch.randn(2, 3)
    np.testing.assert_allclose(head(x).detach().double().numpy(), x.double().numpy() @ W.T + b, atol=1e-5)


def test_dft_softmax_head_keeps_every_top_k_ranking_where_a_plain_linear_loses_some():
    torch.manual_seed(0)
    e, n, k = 8, 12, 2
    head = _train(DFTSoftmaxHead(e, n, k, slack=1), e, n, "softmax")
    W, b = head.weights()
    assert W.shape == (n, 2 * k + 1) and b is None
    feats = torch.randn(3, e)
    x = head.projection(feats).detach().double().numpy()
    np.testing.assert_allclose(head(feats).detach().double().numpy(), x @ W.T, atol=1e-4)
    rankings = list(itertools.permutations(range(n), k))  # all 132 top-2 rankings
    res = check_rankings(W, rankings, workers=1)
    assert res.counts()["argmaxable"] == len(rankings)
    assert verify_rankings(res, W, rankings).all()

    plain = _train(nn.Linear(2 * k + 1, n, bias=False), 2 * k + 1, n, "softmax")
    Wp, _ = _plain_weights(plain)
    res = check_rankings(Wp, rankings, workers=1)
    assert res.counts()["unargmaxable"] > 0
    assert verify_rankings(res, Wp, rankings).all()


def test_dft_sigmoid_head_keeps_every_k_active_set_where_a_plain_linear_loses_some():
    torch.manual_seed(0)
    e, n, k = 8, 12, 2
    head = _train(DFTSigmoidHead(e, n, k), e, n, "sigmoid")
    W, b = head.weights()
    assert W.shape == (n, 2 * k + 1) and b is None
    Y = [list(s) for r in range(k + 1) for s in itertools.combinations(range(n), r)]  # 1 + 12 + 66 sets
    res = am.check_assignments(W, Y, b, workers=1)
    assert res.counts()["argmaxable"] == len(Y) == 79
    assert am.verify_certificate(res, W, b, items=Y).all()

    plain = _train(nn.Linear(2 * k + 1, n, bias=False), 2 * k + 1, n, "sigmoid")
    Wp, _ = _plain_weights(plain)
    res = am.check_assignments(Wp, Y, workers=1)
    assert res.counts()["unargmaxable"] > 0
    assert am.verify_certificate(res, Wp, items=Y).all()


def test_bad_sizes_are_refused_with_one_line():
    with pytest.raises(ValueError, match="2k\\+1 <= n"):
        DFTSoftmaxHead(4, n=4, k=2)
    with pytest.raises(ValueError, match=r"'k' parameter of DFTSoftmaxHead must be an integer >= 1\. Got 0"):
        DFTSoftmaxHead(4, n=10, k=0)
    with pytest.raises(ValueError, match=r"'slack' parameter of DFTSigmoidHead must be an integer >= 0\. Got -1"):
        DFTSigmoidHead(4, n=10, k=1, slack=-1)


def test_the_package_exposes_the_layers_lazily():
    assert am.layers.SphericalSoftmaxHead is SphericalSoftmaxHead


def test_centred_order_is_a_row_permutation_gathering_low_indices_around_angle_zero():
    n, k = 9, 2
    torch.manual_seed(0)
    head = DFTSoftmaxHead(5, n, k, slack=1, order="centred")
    W, _ = head.weights()
    torch.manual_seed(0)
    W_index, _ = DFTSoftmaxHead(5, n, k, slack=1).weights()
    fixed = W_index[:, :2 * k]
    angles = np.round(np.degrees(np.arctan2(W[:, 1], W[:, 0])))  # first frequency: cos t, sin t
    assert angles.tolist() == [0, -40, 40, -80, 80, -120, 120, -160, 160]
    np.testing.assert_array_equal(W[:, 2 * k:], W_index[:, 2 * k:])  # the slack column is not permuted
    np.testing.assert_array_equal(W[[0, 2, 4, 6, 8, 7, 5, 3, 1], :2 * k], fixed)
    feats = torch.randn(2, 5)
    x = head.projection(feats).detach().double().numpy()
    np.testing.assert_allclose(head(feats).detach().double().numpy(), x @ W.T, atol=1e-5)
    with pytest.raises(ValueError, match="'order' parameter of DFTSoftmaxHead"):
        DFTSoftmaxHead(5, n, k, order="random")


# weights() is the matrix the module computes with; constructions outside the guarantee are refused.

def _spherical(rows: torch.Tensor, log_scale: float) -> SphericalSoftmaxHead:
    head = SphericalSoftmaxHead(rows.shape[1], rows.shape[0], bias=False)
    with torch.no_grad():
        head.weight.copy_(rows)
        head.log_scale.fill_(log_scale)
    return head


def test_a_scale_that_underflows_is_checked_as_the_module_computes():
    """Trained to log_scale = -104.6, the module's float32 rows are all 0 and only category 0 ever wins
    (first-index argmax), while the float64 matrix weights() gave had 300 argmaxable categories."""
    torch.manual_seed(0)
    head = _spherical(torch.randn(300, 16), -104.6)
    x = torch.randn(64, 16)
    assert (head(x) == 0).all()
    W, b = head.weights()
    assert not W.any()
    res = am.check_categories(W, b=b, workers=1)
    assert res.counts()["argmaxable"] == 0 and am.verify_certificate(res, W).all()


def test_rows_equal_in_the_modules_dtype_are_ties():
    """Rows one float32 unit apart in one entry normalise to the same float32 row (3e-9 apart in float64): the
    module can never tell them apart, so neither can win strictly."""
    torch.manual_seed(0)
    for _ in range(3):
        torch.randn(16)
    v = torch.randn(16)
    w = v.clone()
    w[3] = torch.nextafter(w[3], torch.tensor(np.inf))
    rows = torch.cat([torch.stack([v, w]), torch.randn(10, 16)])
    head = _spherical(rows, 0.0)
    W, _ = head.weights()
    assert (W[0] == W[1]).all()
    res = am.check_categories(W, workers=1)
    assert res.status[:2].tolist() == ["unargmaxable"] * 2 and "equals category 1" in res.message[0]


@settings(max_examples=25, deadline=None)
@given(st.floats(-120.0, 88.0), st.integers(0, 2**16), st.sampled_from([torch.float32, torch.float64,
                                                                        torch.bfloat16, torch.float16]))
def test_weights_are_the_matrix_the_module_computes_with(log_scale, seed, dtype):
    """At any scale (float32 underflows below about e^-103, overflows above e^88) and in any dtype, the
    module's logits of the unit vectors are the columns of weights(), exactly."""
    g = torch.Generator().manual_seed(seed)
    head = _spherical(torch.randn(12, 4, generator=g), log_scale).to(dtype)
    W, _ = head.weights()
    with torch.no_grad():
        logits = head(torch.eye(4, dtype=dtype)).double().numpy()
    if np.isfinite(W).all():  # e^88 * 1 overflows nothing; a float16 scale above e^11 does
        np.testing.assert_array_equal(logits, W.T)
        res = am.check_categories(W, workers=1)
        assert am.verify_certificate(res, W).all()
        if not W.any():
            assert res.counts()["argmaxable"] == 0


def test_dft_heads_hold_their_dtype_and_refuse_what_breaks_the_guarantee():
    """DFTSoftmaxHead(1, 30, k=4) (one input feature for 2k = 8) was accepted, and only 8 of its 30
    tokens could win; weights() now gives the float32 values the module multiplies by. Beside it: a float
    k or slack was a torch TypeError, DFTSigmoidHead.bfloat16() a RuntimeError and .half() gave float64."""
    with pytest.raises(ValueError, match=r"in_features = 1 < 2k \+ slack = 8"):
        DFTSoftmaxHead(1, 30, k=4)
    with pytest.raises(ValueError, match=r"'k' parameter of DFTSigmoidHead must be an integer >= 1. Got 2.0"):
        DFTSigmoidHead(8, 12, k=2.0)
    with pytest.raises(ValueError, match=r"'slack' parameter of DFTSoftmaxHead must be an integer >= 0. Got 1.5"):
        DFTSoftmaxHead(8, 12, k=2, slack=1.5)
    with pytest.raises(ValueError, match="a sphere in in_features = 1 dimension has two points"):
        SphericalSoftmaxHead(1, 3)
    head = DFTSoftmaxHead(4, 30, k=2)
    W, _ = head.weights()
    np.testing.assert_array_equal(W, head.fixed.double().numpy())  # float32 values, not the float64 DFT
    assert not np.array_equal(W, np.sqrt(15) * dft_matrix(30, 2)[:, 1:])
    for dtype in (torch.float16, torch.bfloat16):
        sig = DFTSigmoidHead(8, 12, k=2, slack=1).to(dtype)
        z = sig(torch.randn(3, 8).to(dtype))
        assert z.dtype == dtype and z.shape == (3, 12)
        soft = DFTSoftmaxHead(8, 12, k=2).to(dtype)
        Ws, _ = soft.weights()
        np.testing.assert_array_equal(Ws[:, :4], soft.fixed.double().numpy())
