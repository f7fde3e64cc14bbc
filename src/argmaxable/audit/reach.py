"""How hard each argmaxable token is to reach: certified bounds on the size of its region.

The region of category t is {x in the box : w_t.x + b_t > w_i.x + b_i for all i != t}; its size is the Chebyshev
radius r_t, the radius of the largest ball centred in the box that stays inside it. Three bounds, each certified:

- every witness x already bounds it from below: the ball around x whose radius is x's smallest distance to the
  hyperplanes, min_i (z_t - z_i) / ||w_t - w_i|| with z = W x + b, lies in the region. The check records a
  cheaper form of it for every token (``result.radius``: the same margin over ||w_t|| + max_i ||w_i||, from the
  products it computed anyway: no extra pass over the layer);
- :func:`witness_radii` computes the tight form for a few tokens (those whose recorded bound is smallest), in
  float64 with every rounding bounded: one product of their witnesses with W, and exact distances for the rows
  whose cheap bound could be the smallest;
- the Chebyshev LP (:func:`argmaxable.check_categories` with ``exact_radius``) gives both bounds for the hardest
  few: a point whose margin bounds r_t from below and dual weights that bound it from above.
"""

from __future__ import annotations

import numpy as np

from argmaxable.core.result import ARGMAXABLE

U = 2.0**-53  # float64 unit roundoff
GROUP = 128  # witnesses per product
BLOCK = 8192  # rows of W per product
KEEP = 64  # rows per witness whose distances are measured exactly


def _gamma(k: int) -> float:
    return k * U / (1 - k * U)


def witness_radii(W: np.ndarray, b: np.ndarray | None, items: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Certified lower bound on the Chebyshev radius of each category ``items[k]`` from its witness ``X[k]`` (a
    point in the box where it wins): min_{i != t} (z_t - z_i) / ||w_t - w_i||, with z = W x + b in float64.

    Each logit errs by at most gamma_(d+2) (||x|| ||w_i|| + |b_i|) (Cauchy-Schwarz bounds the sum of absolute
    products); each distance is bounded above by ||w_t|| + ||w_i|| first, and for the :data:`KEEP` rows with the
    smallest such bound per witness measured exactly on the difference w_i - w_t. The result is the smallest of
    those exact ratios and of the cheap bound of every row not measured. A row equal to w_t with a lower offset is
    no constraint (it never wins against t); an equal row with an offset at least as high gives -inf (t cannot win
    strictly, so it is not argmaxable).

    Examples
    --------
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    >>> witness_radii(W, None, np.array([0]), np.array([[10.0, 0.0]])).round(6).tolist()  # 10 / sqrt(2)
    [7.071068]
    """
    W = np.asarray(W)
    n, d = W.shape
    bias = np.zeros(n) if b is None else np.asarray(b, dtype=np.float64)
    items, X = np.asarray(items, dtype=np.int64), np.asarray(X, dtype=np.float64)
    norms = np.empty(n)  # ||w_i|| rounded up
    for s in range(0, n, BLOCK):
        block = np.asarray(W[s : s + BLOCK], dtype=np.float64)
        norms[s : s + len(block)] = np.sqrt(np.einsum("nd,nd->n", block, block)) * (1 + _gamma(d + 4))
    out = np.empty(len(items))
    for g in range(0, len(items), GROUP):
        out[g : g + GROUP] = _group(W, bias, norms, items[g : g + GROUP], X[g : g + GROUP])
    return out


def _group(W, bias, norms, t, X) -> np.ndarray:
    """:func:`witness_radii` for one group of witnesses."""
    n, d = W.shape
    k = len(t)
    g = _gamma(d + 4)
    xn = np.sqrt(np.einsum("kd,kd->k", X, X)) * (1 + g)  # ||x|| rounded up
    own = np.einsum("kd,kd->k", X, np.asarray(W[t], dtype=np.float64)) + bias[t]
    own_low = own - g * (xn * norms[t] + np.abs(bias[t]))
    keep_r = np.full((k, 0), np.inf)  # the KEEP smallest cheap bounds so far, their rows and certified gaps
    keep_i = np.zeros((k, 0), dtype=np.int64)
    keep_gap = np.zeros((k, 0))
    floor = np.full(k, np.inf)  # the smallest cheap bound among rows dropped from the kept ones
    for s in range(0, n, BLOCK):
        block = np.asarray(W[s : s + BLOCK], dtype=np.float64)
        cols = np.arange(s, s + len(block))
        up = X @ block.T + bias[cols] + g * (np.outer(xn, norms[cols]) + np.abs(bias[cols]))  # >= z_i
        gap = own_low[:, None] - up  # <= z_t - z_i, rounded down below (relative 2u)
        gap -= 2 * U * np.abs(gap)
        with np.errstate(divide="ignore", invalid="ignore"):
            cheap = np.where(gap > 0, gap / (norms[t][:, None] + norms[cols]) * (1 - 2 * U), gap)
        cheap[(cols[None, :] == t[:, None])] = np.inf  # the item's own row is no constraint
        r = np.hstack([keep_r, cheap])
        i = np.hstack([keep_i, np.broadcast_to(cols, (k, len(cols)))])
        gp = np.hstack([keep_gap, gap])
        if r.shape[1] > KEEP:
            part = np.argpartition(r, KEEP - 1, axis=1)
            drop = part[:, KEEP:]
            floor = np.minimum(floor, np.take_along_axis(r, drop, axis=1).min(axis=1))
            sel = part[:, :KEEP]
            r, i, gp = (np.take_along_axis(a, sel, axis=1) for a in (r, i, gp))
        keep_r, keep_i, keep_gap = r, i, gp
    exact = np.full(keep_r.shape, np.inf)
    for j in range(keep_i.shape[1]):
        A = np.asarray(W[keep_i[:, j]], dtype=np.float64) - np.asarray(W[t], dtype=np.float64)
        # the float64 difference of float32 rows is exact; of float64 rows, within u of it
        dist = np.sqrt(np.einsum("kd,kd->k", A, A)) * (1 + g) / (1 - U)
        same = ~(A != 0).any(axis=1)
        higher = bias[keep_i[:, j]] >= bias[t]
        with np.errstate(divide="ignore", invalid="ignore"):
            exact[:, j] = np.where(same, np.where(higher, -np.inf, np.inf), keep_gap[:, j] / dist * (1 - 2 * U))
        exact[keep_i[:, j] == t, j] = np.inf
    return np.minimum(exact.min(axis=1, initial=np.inf), floor)


def hardest(result, W, b, k: int, *, refine: int, settings: dict, progress: bool = False):
    """The ``k`` argmaxable categories of ``result`` (a check of the whole vocabulary) whose regions are certifiably
    the smallest, each with both bounds on its radius.

    The ``refine`` argmaxable categories with the smallest recorded bounds (``result.radius``) are first bounded
    again at their witnesses by :func:`witness_radii`; the smallest half of ``k`` of those, and the half of ``k``
    that reflection took most steps to prove (``result.steps``), go to the Chebyshev LP, run to its optimum or for at
    most ``settings["lp_rounds"]`` rounds.

    Returns
    -------
    refined : CheckResult
        A copy of ``result`` whose ``radius`` holds the tighter bound where :func:`witness_radii` found one (the
        witnesses are the same: ``verify`` re-checks each at its claimed radius).
    lp : CheckResult
        The LP's check of the ``k`` categories (``exact_radius``), in increasing order of their radius: a float64
        witness whose margin is ``radius`` and dual weights (``certificates``) bounding it by ``radius_upper``
        (``radius_exact``: the LP reached its optimum, so the two meet).
    """
    import copy

    from argmaxable.core import check_categories

    refined = copy.copy(result)
    refined.radius = result.radius.copy()
    arg = np.flatnonzero(result.status == ARGMAXABLE)
    cand = arg[np.argsort(result.radius[arg], kind="stable")][: max(refine, k)]
    if cand.size:
        tight = witness_radii(W, b, result.items[cand], result.witness[cand])
        refined.radius[cand] = np.fmax(refined.radius[cand], tight)
    # Half the LPs go to the smallest bounds, half to the tokens reflection needed most steps for (a witness that
    # barely wins says little about the radius; a token reflection struggled to reach is a candidate of its own).
    by_bound = cand[np.argsort(refined.radius[cand], kind="stable")]
    by_steps = arg[np.argsort(-result.steps[arg], kind="stable")]
    by_steps = by_steps[~np.isin(by_steps, by_bound[: k - k // 2])][: k // 2]
    top = np.concatenate([by_bound[: k - len(by_steps)], by_steps]) if k > 0 else by_bound[:0]
    # patience 0: these tokens already have witnesses, so no reflection; each LP starts at its token's witness (at
    # its own row instead, an LP of Qwen2.5-Coder's head at d = 896 had not converged after 5 rounds and minutes)
    lp = check_categories(W, result.items[top], b, bound=settings["bound"], lower=settings.get("lower"),
                          upper=settings.get("upper"), eps=settings["eps"], patience=0,
                          solver=settings.get("solver", "highs"), workers=settings.get("workers", 2),
                          exact_radius=True, progress=progress, starts=result.witness[top],
                          lp_rounds=settings.get("lp_rounds"))
    return refined, _sorted(lp, np.argsort(lp.radius, kind="stable"))


def _sorted(res, order: np.ndarray):
    """``res`` with its items in ``order``."""
    import copy

    out = copy.copy(res)
    for name in ("items", "status", "radius", "radius_exact", "steps", "lp_rounds", "witness", "message",
                 "radius_upper"):
        setattr(out, name, getattr(res, name)[order])
    out.certificates = [res.certificates[i] for i in order]
    out.answers = {key: np.asarray(v)[order] for key, v in res.answers.items()}
    return out
