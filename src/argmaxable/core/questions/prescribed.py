"""Prescribed probabilities (004 §4.2, §6): can a token set receive target probabilities? A label assignment of a
derived layer (:mod:`argmaxable.core.derived`). Tokens S with targets p (summing to 1 over S), r = the token with the
smallest target (the paper's p_m), logits ``z = W x + b``. The item holds when

- ratios: ``(1 - eps) p_i / p_r < exp(z_i - z_r) < (1 + eps) p_i / p_r`` for i in S (two rows each);
- threshold: ``z_j < tau`` for every j outside S;
- gap: ``z_r - tau > g`` with ``g = log((1 - delta) (N - m) p_r / (delta (1 - eps)))``.

Then the mass outside S is below delta: it is at most ``(N - m) e^tau``, while the mass on S is at least
``e^{z_r} (1 - eps) / p_r`` (each ratio at least (1 - eps) of its target), and the gap makes their quotient at
most ``delta / (1 - delta)``. This is the paper's Prop. 2 construction (rest bounded by (N - m) times its
largest term, eq. 16) made linear; the paper fixes the ratios exactly (equalities, whose region has no
interior), we let them move within eps so that the region holds a ball the LP can measure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from argmaxable.core.derived import Derived, as_tokens, check_layers, two_diff, verify_layers
from argmaxable.core.questions import Question
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import BOUND, EPS


def prescribed_layer(W: np.ndarray, b: np.ndarray | None, tokens, probs, *, eps: float, delta: float
                     ) -> Derived:
    """The derived layer whose label assignment ``active`` holds iff ``tokens`` get ``probs`` (module doc), with
    bounds on its rounding (:class:`~argmaxable.core.derived.Derived`).

    Parameters
    ----------
    W : ndarray, shape (N, d)
    b : ndarray, shape (N,), optional
    tokens : sequence of int, length m < N
    probs : sequence of float, length m
        Target probabilities of the tokens (positive; normalised here to sum to 1).
    eps : float
        Relative tolerance of each ratio p_i / p_r (004 §6: 0.05).
    delta : float
        Bound on the probability mass outside the set (004 §6: 0.1).

    Returns
    -------
    Derived
        Rows ``V`` (N + m - 1, d + 1) over (x, tau): N - m threshold rows, 2 (m - 1) ratio rows, one gap row; their
        offsets ``e``; the assignment ``active`` (row i must be positive where True, negative where False); the
        bounds on their rounding.
    """
    N, d = W.shape
    S = as_tokens(tokens, N)
    p = np.asarray(probs, dtype=np.float64)
    if p.shape != S.shape or not np.all(p > 0):
        raise ValueError(f"The 'probs' must be {S.size} positive numbers, one per token. Got {p[:10].tolist()}.")
    if not (0 < eps < 1 and 0 < delta < 1):
        raise ValueError(f"eps and delta must lie in (0, 1). Got eps={eps!r}, delta={delta!r}.")
    m = S.size
    if m >= N:
        raise ValueError(f"A prescribed set must leave some token out: m={m} >= N={N}.")
    b = np.zeros(N) if b is None else b
    p = p / p.sum()
    r = int(np.argmin(p))
    ref, others = S[r], np.delete(S, r)
    log_ratio = np.log(np.delete(p, r) / p[r])  # (m-1,) target z_i - z_r
    rest = np.setdiff1d(np.arange(N), S)
    gap = np.log((1 - delta) * (N - m) * p[r] / (delta * (1 - eps)))

    rows = N + m - 1
    V = np.zeros((rows, d + 1))
    e = np.empty(rows)
    err_V, err_e = np.zeros((rows, d + 1)), np.zeros(rows)
    active = np.zeros(rows, dtype=bool)
    k = N - m
    V[:k, :d], V[:k, d], e[:k] = W[rest], -1.0, b[rest]  # z_j - tau < 0 (exact)
    diff, T = two_diff(W[others], W[ref])  # (m-1, d)
    offset = b[others] - b[ref] - log_ratio
    upper, lower = slice(k, k + m - 1), slice(k + m - 1, rows - 1)
    V[upper, :d], e[upper] = diff, offset - np.log1p(eps)  # upper ratio: negative
    V[lower, :d], e[lower], active[lower] = diff, offset - np.log1p(-eps), True  # lower ratio: positive
    V[-1, :d], V[-1, d], e[-1], active[-1] = W[ref], -1.0, b[ref] - gap, True  # z_r - tau > gap
    # Rounding: the differences' exact errors; each offset of logarithms (within 2 ulps each) and of up to four
    # rounded terms (the targets' normalisation and quotient add 4 U64 to a log's argument) errs by less than
    # 8 U64 times its terms' magnitudes plus 8 U64.
    err_V[upper, :d] = err_V[lower, :d] = np.abs(T)
    u8 = 8 * 2.0**-53
    terms = np.abs(b[others]) + np.abs(b[ref]) + np.abs(log_ratio)
    err_e[upper] = u8 * (terms + abs(np.log1p(eps)) + 1)
    err_e[lower] = u8 * (terms + abs(np.log1p(-eps)) + 1)
    err_e[-1] = u8 * (abs(b[ref]) + abs(gap) + 1)
    return Derived(V, e, active, err_V, err_e)


def _prescribed_layers(W, b, sets, probs, eps, delta):
    if len(sets) != len(probs):
        raise ValueError(f"Need one probability vector per set. Got {len(sets)} sets, {len(probs)} vectors.")
    for S, p in zip(sets, probs, strict=True):
        yield prescribed_layer(W, b, S, p, eps=eps, delta=delta)


def check_prescribed(W, sets: Sequence, probs: Sequence, b=None, *, eps_ratio: float = 0.05,
                     delta: float = 0.1, **check) -> CheckResult:
    """Can each token set receive its target probabilities (ratios within ``eps_ratio``, rest below ``delta``)?

    Parameters
    ----------
    W : array_like, shape (N, d)
    sets : sequence of sequences of int
        Token sets.
    probs : sequence of sequences of float
        Target probabilities, one per token of the matching set (normalised over the set).
    b : array_like, shape (N,), optional
    eps_ratio, delta : float
        004 §6 uses 0.05 and 0.1.
    **check
        Keywords of :func:`argmaxable.check_assignments` (``bound`` 100 by default here, as for softmax).

    Returns
    -------
    CheckResult
        ``witness`` holds (x, tau); an argmaxable item's x gives the probabilities (see module doc).

    Examples
    --------
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    >>> check_prescribed(W, [[0, 1], [3]], [[0.5, 0.5], [1.0]]).status.tolist()
    ['argmaxable', 'unargmaxable']
    """
    W = np.asarray(W, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    check.setdefault("bound", BOUND)
    res = check_layers(_prescribed_layers(W, b, sets, probs, eps_ratio, delta), "prescribed probabilities",
                       **check)
    res.settings.update(eps_ratio=eps_ratio, delta=delta)
    return res


def verify_prescribed(result: CheckResult, W, sets: Sequence, probs: Sequence, b=None, *, eps_ratio: float = 0.05,
                      delta: float = 0.1, bound: float = BOUND, lower=None, upper=None, eps: float = EPS
                      ) -> np.ndarray:
    """Re-check every verdict of :func:`check_prescribed` without a solver (True where the evidence holds), for
    the targets, ``eps_ratio``, ``delta``, box and eps given here (defaults: :func:`check_prescribed`'s); a result
    that records other values is refused (ValueError)."""
    W = np.asarray(W, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    for key, value in (("eps_ratio", eps_ratio), ("delta", delta)):
        recorded = result.settings.get(key)
        if recorded is not None and recorded != value:
            raise ValueError(f"verify_prescribed: the result records {key}={recorded!r} but {key}={value!r} is "
                             "verified: verify against the settings the check ran with.")
    return verify_layers(result, _prescribed_layers(W, b, sets, probs, eps_ratio, delta), "prescribed probabilities",
                         bound=bound, lower=lower, upper=upper, eps=eps)


def achieved(W, b, x: np.ndarray, tokens) -> tuple[np.ndarray, float]:
    """Softmax of ``W x + b`` restricted to ``tokens`` (normalised over them) and the mass outside them."""
    z = np.asarray(W, dtype=np.float64) @ x + (0.0 if b is None else b)
    q = np.exp(z - z.max())
    q /= q.sum()
    inside = q[np.asarray(tokens)]
    return inside / inside.sum(), float(1.0 - inside.sum())


QUESTION = Question(kind="prescribed probabilities", check=check_prescribed, bound=BOUND, evidence="assignments")
