"""BSL and DFT heads: the DFT matrix of thesis eq. 5.10, the head's product with it, Prop. 5.1, Thm 5.3/5.4."""

import itertools

import numpy as np
import pytest
import torch

import argmaxable as am
from argmaxable.constructions import dft_matrix
from argmaxable.layers import DFTSigmoidHead
from argmaxable.multilabel.heads import BSLHead, composite, make_head, trainable_parameters


def _explicit(n, k):
    """Eq. 5.10 entry by entry, straight from the thesis (no vectorisation shared with dft_matrix)."""
    W = np.zeros((n, 2 * k + 1))
    for i in range(n):
        t = 2 * np.pi * i / n
        W[i, 0] = 1 / np.sqrt(n)
        for j in range(1, k + 1):
            W[i, 2 * j - 1] = np.sqrt(2 / n) * np.cos(j * t)
            W[i, 2 * j] = np.sqrt(2 / n) * np.sin(j * t)
    return W


@pytest.mark.parametrize(("n", "k"), [(3, 1), (7, 0), (8, 3), (9, 4), (64, 5), (101, 20)])
def test_dft_matrix_is_eq_5_10_with_orthonormal_columns(n, k):
    W = dft_matrix(n, k)
    np.testing.assert_allclose(W, _explicit(n, k), atol=1e-12)
    np.testing.assert_allclose(W.T @ W, np.eye(2 * k + 1), atol=1e-12)  # thesis §5.1.2: orthonormal


@pytest.mark.parametrize(("n", "k"), [(5, 2), (8, 3), (64, 5), (101, 20), (527, 20)])
def test_dft_head_logits_are_the_explicit_matrix_times_its_features(n, k):
    head = DFTSigmoidHead(3, n=n, k=k)
    x = torch.randn(6, 2 * k + 1, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
    np.testing.assert_allclose(head.double().classify(x).detach().numpy(), x.numpy() @ _explicit(n, k).T,
                               atol=1e-10)
    # float32 features: the float32 product, to float32's rounding of the same logits
    z32 = head.float().classify(x.float()).detach().double().numpy()
    np.testing.assert_allclose(z32, x.numpy() @ _explicit(n, k).T, atol=1e-5)
    # a bfloat16 module: the DFT matrix it holds, rounded to bfloat16, is the one weights() shows; its features
    # are multiplied in float32 and the logits rounded once
    head = head.bfloat16()
    xb = x.bfloat16()
    W = head.weights()[0]
    assert np.abs(W - _explicit(n, k)).max() <= 2**-8 * np.abs(_explicit(n, k)).max()
    zb = head.classify(xb)
    assert zb.dtype == torch.bfloat16
    expected = torch.from_numpy(xb.double().numpy() @ W.T).bfloat16().double().numpy()
    np.testing.assert_allclose(zb.detach().double().numpy(), expected, rtol=2**-7, atol=1e-6)


def test_dft_head_forward_equals_its_full_matrix_and_composite_map():
    torch.manual_seed(0)
    head = DFTSigmoidHead(7, n=50, k=4, slack=3).double()
    e = torch.randn(5, 7, dtype=torch.float64)
    z = head(e).detach().numpy()
    x = head.projection(e).detach().numpy()
    assert head.weights()[0].shape == (50, 2 * 4 + 1 + 3)
    np.testing.assert_allclose(z, x @ head.weights()[0].T, atol=1e-10)
    WP, Wb = composite(head)
    np.testing.assert_allclose(z, e.numpy() @ WP.T + Wb, atol=1e-10)


def test_dft_head_of_the_sweep_is_the_former_construction_on_a_fixed_seed():
    """The sweep's DFT head (make_head("dft") -> argmaxable.layers) draws the same parameters in the same order as
    the construction it replaced: nn.Linear(e, 2k+1+d), then d slack columns by kaiming_uniform_(a=sqrt(5)), then
    the projection bias set to [sqrt(n) logit(k/n), 0, ...]; so the BSL-vs-DFT numbers do not move."""
    e, n, d, k = 7, 50, 3, 4
    torch.manual_seed(0)
    projection = torch.nn.Linear(e, 2 * k + 1 + d)
    slack = torch.empty(n, d)
    torch.nn.init.kaiming_uniform_(slack, a=np.sqrt(5))
    after_old = torch.rand(3)  # the RNG state both leave behind
    bias = torch.zeros(2 * k + 1 + d)
    bias[0] = np.sqrt(n) * np.log(k / (n - k))
    old = [slack, projection.weight, bias]  # nn.Module order: own parameters, then the submodule's
    torch.manual_seed(0)
    head = make_head("dft", e, n, d, k)
    assert [name for name, _ in head.named_parameters()] == ["slack", "projection.weight", "projection.bias"]
    for new, ref in zip(head.parameters(), old, strict=True):
        torch.testing.assert_close(new.detach(), ref.detach(), rtol=0, atol=0)
    torch.testing.assert_close(torch.rand(3), after_old, rtol=0, atol=0)
    feats = torch.randn(4, e, generator=torch.Generator().manual_seed(1))
    x = (feats @ projection.weight.T + bias).detach().double().numpy()
    expected = x @ np.hstack([_explicit(n, k), slack.double().numpy()]).T
    np.testing.assert_allclose(head(feats).detach().double().numpy(), expected, atol=1e-5)


def test_bsl_head_is_projection_then_bias_free_classifier():
    head = BSLHead(e=6, n=20, d=3)
    assert head.classifier.bias is None and head.weights()[0].shape == (20, 3)
    assert trainable_parameters(head) == 6 * 3 + 3 + 3 * 20
    e = torch.randn(4, 6)
    WP, Wb = composite(head)
    np.testing.assert_allclose(head(e).detach().numpy(), e.numpy() @ WP.T + Wb, atol=1e-5)


@pytest.mark.parametrize(("n", "k"), [(5, 1), (7, 1), (6, 2), (8, 2), (9, 3)])
def test_maximal_minors_are_nonzero_and_of_one_sign(n, k):
    """Thesis Prop. 5.1: span(W^DFT) lies in the positive Grassmannian Gr+_{n,2k+1}."""
    W = dft_matrix(n, k)
    minors = np.array([np.linalg.det(W[list(rows)]) for rows in itertools.combinations(range(n), 2 * k + 1)])
    assert np.all(np.abs(minors) > 1e-9)
    assert np.all(minors > 0) or np.all(minors < 0)


def _cyclic_sign_changes(y):
    return int(np.sum(y != np.roll(y, 1)))


@pytest.mark.parametrize(("n", "k"), [(8, 1), (9, 2)])
def test_argmaxable_iff_at_most_2k_cyclic_sign_changes(n, k):
    """Thesis Thm 5.3 (alternation, an oracle that is not our code): W^DFT_{n,2k+1} makes exactly the assignments
    with at most 2k cyclic sign changes argmaxable; so every assignment with at most k active labels is argmaxable."""
    Y = np.array(list(itertools.product([False, True], repeat=n)))
    res = am.check_assignments(dft_matrix(n, k), Y, workers=1)
    expected = np.array([_cyclic_sign_changes(y) <= 2 * k for y in Y])
    np.testing.assert_array_equal(res.status == "argmaxable", expected)
    assert np.all(res.status[Y.sum(axis=1) <= k] == "argmaxable")
    assert not np.any(res.status == "undecided")


def test_every_k_active_assignment_is_argmaxable_with_slack_columns():
    """Thesis Thm 5.4 with s random slack columns: W = [W^DFT, S] keeps every k-active assignment."""
    n, k = 16, 2
    torch.manual_seed(0)
    W = DFTSigmoidHead(4, n=n, k=k, slack=3).weights()[0]
    Y = [list(c) for r in range(k + 1) for c in itertools.combinations(range(n), r)]
    res = am.check_assignments(W, Y, workers=1)
    assert len(Y) == 1 + 16 + 120
    assert np.all(res.status == "argmaxable")


@pytest.mark.parametrize(("n", "k"), [(527, 20), (8921, 80)])
def test_initialisation_trick_gives_probability_k_over_n(n, k):
    """Thesis §5.1.3: projection bias [sqrt(n) logit(k/n), 0, ...] starts every label at probability k/n."""
    torch.manual_seed(0)
    head = DFTSigmoidHead(32, n=n, k=k, slack=8)
    p0 = torch.sigmoid(head(torch.zeros(1, 32)))
    np.testing.assert_allclose(p0.detach().numpy(), k / n, rtol=1e-4)
    p = torch.sigmoid(head(0.01 * torch.randn(64, 32)))  # features near zero: close to k/n on average
    assert abs(p.mean().item() - k / n) < 0.2 * k / n


def test_bad_sizes_are_rejected_with_a_clear_message():
    with pytest.raises(ValueError, match="2k\\+1 <= n"):
        dft_matrix(4, 2)
    with pytest.raises(ValueError, match="head kind"):
        make_head("lsl", 3, 10, 2, 1)
