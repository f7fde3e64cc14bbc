"""Questions answered as label assignments of derived layers: prescribed probabilities and top-k rankings.

Each question about one item (a token set with target probabilities, a ranking of k tokens) is a halfspace
system ``A x' + c < 0`` over ``x' = (x, tau)``. Written as a sigmoid label assignment ``y_i (v_i . x' + e_i) > 0``
of a layer ``V`` built for that item, it goes through the one core (:func:`argmaxable.check_assignments`: the
Chebyshev LP with its certificates), and its evidence is re-checked by :func:`argmaxable.verify_certificate`
against the same derived layer. ``check_top_m`` is the case with no ratio rows (GUIDE §1).

Prescribed probabilities (004 §4.2, §6). Tokens S with targets p (summing to 1 over S), r = the token with the
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

from collections.abc import Iterable, Sequence

import numpy as np

from argmaxable.core.check import check_assignments
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import BOUND, EPS
from argmaxable.verify import verify_certificate


def _as_tokens(tokens, n: int) -> np.ndarray:
    idx = np.asarray(list(tokens), dtype=np.int64)
    if idx.ndim != 1 or idx.size == 0 or np.unique(idx).size != idx.size or idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"A token set must hold distinct indices in [0, {n}). Got {idx[:10].tolist()}.")
    return idx


def prescribed_layer(W: np.ndarray, b: np.ndarray | None, tokens, probs, *, eps: float, delta: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The derived layer whose label assignment ``active`` holds iff ``tokens`` get ``probs`` (module doc).

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
    V : ndarray, shape (N + m - 1, d + 1)
        Rows over (x, tau): N - m threshold rows, 2 (m - 1) ratio rows, one gap row.
    e : ndarray, shape (N + m - 1,)
        Their offsets.
    active : ndarray of bool, shape (N + m - 1,)
        The assignment: row i must be positive (True) or negative (False).
    """
    N, d = W.shape
    S = _as_tokens(tokens, N)
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
    active = np.zeros(rows, dtype=bool)
    k = N - m
    V[:k, :d], V[:k, d], e[:k] = W[rest], -1.0, b[rest]  # z_j - tau < 0
    diff = W[others] - W[ref]  # (m-1, d)
    offset = b[others] - b[ref] - log_ratio
    V[k:k + m - 1, :d], e[k:k + m - 1] = diff, offset - np.log1p(eps)  # upper ratio: negative
    lower = slice(k + m - 1, rows - 1)
    V[lower, :d], e[lower], active[lower] = diff, offset - np.log1p(-eps), True  # lower ratio: positive
    V[-1, :d], V[-1, d], e[-1], active[-1] = W[ref], -1.0, b[ref] - gap, True  # z_r - tau > gap
    return V, e, active


def ranking_layer(W: np.ndarray, b: np.ndarray | None, ranking) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The derived layer whose all-active assignment holds iff ``ranking`` is the top-k ranking of ``W x + b``.

    Rows ``w_{s_t} - w_{s_t+1}`` (each ranked logit above the next) and ``w_{s_k} - w_j`` for every unranked j
    (thesis §5.2: a top-k ranking orders k logits and puts them above the rest in any order).

    Returns
    -------
    V : ndarray, shape (N - 1, d)
    e : ndarray, shape (N - 1,)
    active : ndarray of bool, shape (N - 1,), all True
    """
    N = W.shape[0]
    s = _as_tokens(ranking, N)
    b = np.zeros(N) if b is None else b
    rest = np.setdiff1d(np.arange(N), s)
    hi = np.concatenate([s[:-1], np.full(rest.size, s[-1])])
    lo = np.concatenate([s[1:], rest])
    return W[hi] - W[lo], b[hi] - b[lo], np.ones(N - 1, dtype=bool)


def check_layers(layers: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]], kind: str, **check) -> CheckResult:
    """Check one label assignment per derived layer with the core; one :class:`CheckResult` for all of them.

    ``check`` goes to :func:`argmaxable.check_assignments` as keywords (bound, eps, patience, solver, workers,
    exact_radius). Item k of the result is layer k; its certificate's rows index that layer's rows.
    """
    parts = [check_assignments(V, active[None, :], e, **check) for V, e, active in layers]
    if not parts:
        raise ValueError("check_layers needs at least one item.")
    first = parts[0]
    return CheckResult(
        kind, np.arange(len(parts)), np.concatenate([p.status for p in parts]),
        np.concatenate([p.radius for p in parts]), np.concatenate([p.radius_exact for p in parts]),
        np.concatenate([p.steps for p in parts]), np.concatenate([p.lp_rounds for p in parts]),
        np.concatenate([p.witness for p in parts]), np.concatenate([p.message for p in parts]),
        [cert for p in parts for cert in p.certificates], dict(first.settings),
        np.concatenate([p.radius_upper for p in parts]),
        {key: np.concatenate([p.answers[key] for p in parts]) for key in first.answers})


def _item(result: CheckResult, k: int) -> CheckResult:
    """Item k of a :func:`check_layers` result as the one-assignment result of its own layer."""
    one = slice(k, k + 1)
    return CheckResult("assignments", np.array([0]), result.status[one], result.radius[one],
                       result.radius_exact[one], result.steps[one], result.lp_rounds[one], result.witness[one],
                       result.message[one], [result.certificates[k]], result.settings, result.radius_upper[one],
                       {key: value[one] for key, value in result.answers.items()})


def verify_layers(result: CheckResult, layers: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]], kind: str, *,
                  bound: float = BOUND, lower=None, upper=None, eps: float = EPS) -> np.ndarray:
    """Re-check each item's evidence with :func:`argmaxable.verify_certificate` on its own derived layer: item p
    is layer ``result.items[p]``, verified in the box and at the eps given (a result that records others, of
    another kind, or whose items do not index the layers given, is refused with a ValueError)."""
    layers = list(layers)
    if result.kind != kind:
        raise ValueError(f"verify: a {result.kind!r} result, not one of {kind}.")
    which = np.asarray(result.items)
    if which.ndim != 1 or which.dtype.kind not in "iu" or ((which < 0) | (which >= len(layers))).any():
        raise ValueError(f"verify: the result's {len(which)} items must be positions among the {len(layers)} "
                         f"{kind} given.")
    box = {"bound": bound, "lower": lower, "upper": upper, "eps": eps}
    return np.array([bool(verify_certificate(_item(result, p), V, e, items=active[None, :], **box)[0])
                     for p, (V, e, active) in enumerate(layers[int(k)] for k in which)], dtype=bool)


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


def check_rankings(W, rankings: Sequence, b=None, **check) -> CheckResult:
    """Which top-k rankings (first = largest logit, the rest of the tokens below in any order) are argmaxable?

    Examples
    --------
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    >>> check_rankings(W, [[0, 3], [0, 1], [3]]).status.tolist()
    ['argmaxable', 'argmaxable', 'unargmaxable']
    """
    W = np.asarray(W, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    check.setdefault("bound", BOUND)
    return check_layers((ranking_layer(W, b, s) for s in rankings), "top-k rankings", **check)


def verify_rankings(result: CheckResult, W, rankings: Sequence, b=None, *, bound: float = BOUND, lower=None,
                    upper=None, eps: float = EPS) -> np.ndarray:
    """Re-check every verdict of :func:`check_rankings` without a solver, in the box and at the eps given
    (defaults: :func:`check_rankings`'s); a result that records others is refused (ValueError)."""
    W = np.asarray(W, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    return verify_layers(result, (ranking_layer(W, b, s) for s in rankings), "top-k rankings", bound=bound,
                         lower=lower, upper=upper, eps=eps)


def achieved(W, b, x: np.ndarray, tokens) -> tuple[np.ndarray, float]:
    """Softmax of ``W x + b`` restricted to ``tokens`` (normalised over them) and the mass outside them."""
    z = np.asarray(W, dtype=np.float64) @ x + (0.0 if b is None else b)
    q = np.exp(z - z.max())
    q /= q.sum()
    inside = q[np.asarray(tokens)]
    return inside / inside.sum(), float(1.0 - inside.sum())
