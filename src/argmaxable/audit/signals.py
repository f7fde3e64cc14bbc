"""Under-training signals read from a head's weights alone, beside the certified verdicts and radii.

Land & Bartolo (2024, "Fishing for Magikarp", §2.2) find under-trained tokens from the unembedding matrix U: training
pushes the logits of tokens it never sees towards -inf for every input, which a model can do with one constant
direction in its residual stream and the opposite direction in those tokens' rows. Their indicator removes U's
first principal component, takes the mean row of tokens known to be unused, and ranks every token by how close its
row is to that mean (cosine); the row norm is their second indicator. They verify the top 2% of a ranking by
prompting (:data:`FLAG_SHARE`). Computed here, without any of their code:

- :func:`first_component` and :func:`unembedding_indicator`: the cosine of each row of U (first principal
  component removed) with the mean such row of the reference tokens (:func:`reference_tokens`: GGUF's ``unused``
  type, names like ``<unused12>`` or ``<|reserved_special_token_3|>``, or the ids or pattern a user names);
- the row norm (:func:`argmaxable.detect.study.norm_percentiles`);
- exact ties (:func:`argmaxable.detect.study.tie_groups`) and near-ties (:func:`near_ties`): rows within a few
  float32 units in the last place of another, never-trained rows that decayed alike.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from argmaxable.detect.study import NEAR_ULPS

FLAG_SHARE = 0.02  # the share of a ranking a signal flags: magikarp verifies the top 2% of its indicator
# Names of tokens that tokenizers reserve and models never see (Gemma's <unused12>, Llama-3's
# <|reserved_special_token_3|>, BERT's [unused7], fairseq's madeupword0001).
UNUSED_NAMES = r"<unused\d+>|<\|reserved_special_token_\d+\|>|\[unused\d+\]|<reserved_\d+>|madeupword\d+"
BLOCK = 8192  # rows per float64 block
PROJECTIONS = 4  # random directions near_ties sorts by (the first) and filters by (the others)


def reference_tokens(n: int, tokens: Sequence[str] | None = None, token_types: Sequence[str] | None = None,
                     spec: str | None = None) -> tuple[np.ndarray, str]:
    """Ids of the tokens known to be unused, and how they were chosen (in words).

    ``spec`` (a user's choice) wins: ids and ranges (``"5,7,100-120"``) or a regular expression that a token's
    whole name must match. Otherwise the tokens whose GGUF type is ``unused``, and those whose names match
    :data:`UNUSED_NAMES`.

    Examples
    --------
    >>> reference_tokens(6, ["a", "<unused0>", "b", "<unused1>", "c", "d"])[0].tolist()
    [1, 3]
    >>> reference_tokens(6, spec="0, 4-5")[0].tolist()
    [0, 4, 5]
    """
    if spec is not None and re.fullmatch(r"[\d,\-\s]+", spec):
        ids = []
        for part in filter(None, (p.strip() for p in spec.split(","))):
            lo, dash, hi = part.partition("-")
            if not lo.strip().isdigit() or (dash and not hi.strip().isdigit()):
                raise ValueError(f"unused tokens {spec!r}: {part!r} is neither an id nor a range lo-hi")
            ids += range(int(lo), int(hi or lo) + 1)
        ids = np.unique(np.asarray(ids, dtype=np.int64))
        if ids.size and ids[-1] >= n:
            raise ValueError(f"unused tokens {spec!r}: id {int(ids[-1])} is outside the head's {n} rows")
        return ids, f"ids {spec}"
    if spec is not None or tokens is not None:
        try:
            pattern = re.compile(spec or UNUSED_NAMES)
        except re.error as err:
            raise ValueError(f"unused tokens {spec!r}: not a regular expression ({err})") from None
    picked = np.zeros(n, dtype=bool)
    if spec is None and token_types is not None:
        picked |= np.asarray(token_types) == "unused"
    if tokens is not None:
        picked |= np.fromiter((bool(pattern.fullmatch(str(t))) for t in tokens), dtype=bool, count=n)
    how = f"names matching {spec!r}" if spec is not None else f"GGUF type 'unused' or names matching {UNUSED_NAMES!r}"
    return np.flatnonzero(picked), how


def first_component(W: np.ndarray) -> np.ndarray:
    """The first principal component of the rows of W (unit vector, (d,)): the top eigenvector of their covariance,
    each block of rows multiplied in W's own precision and the blocks summed in float64; its sign makes the mean
    row's projection non-negative."""
    n, d = W.shape
    mean = np.zeros(d)
    for s in range(0, n, BLOCK):
        mean += np.asarray(W[s : s + BLOCK], dtype=np.float64).sum(axis=0)
    mean /= n
    cov = np.zeros((d, d))
    for s in range(0, n, BLOCK):
        block = np.asarray(W[s : s + BLOCK], dtype=np.float32 if W.dtype == np.float32 else np.float64)
        block = block - mean.astype(block.dtype)
        cov += block.T @ block
    c = np.linalg.eigh(cov)[1][:, -1]
    return c if c @ mean >= 0 else -c


def unembedding_indicator(W: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Land & Bartolo's unembedding indicator: cos(u'_i, mean_{j in reference} u'_j) for every row, where u' is a
    row of W with its first principal component removed (u' = u - (u.c) c). High values: rows like the unused
    tokens'. NaN for a row that is zero once the component is removed.

    Examples
    --------
    >>> W = np.array([[3.0, 0.0, 0.0], [-3.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.9, 0.1], [0.0, 0.0, 1.0]])
    >>> unembedding_indicator(W, np.array([2])).round(2).tolist()  # the first component is the x axis
    [nan, nan, 1.0, 0.99, 0.0]
    """
    reference = np.asarray(reference, dtype=np.int64)
    if reference.size == 0:
        raise ValueError("the unembedding indicator needs at least one unused token to compare with")
    c = first_component(W)
    R = np.asarray(W[reference], dtype=np.float64)
    u = (R - np.outer(R @ c, c)).mean(axis=0)
    out = np.empty(W.shape[0])
    dtype = np.float32 if W.dtype == np.float32 else np.float64  # a float32 layer in float32: a ranking's precision
    c32, u32 = c.astype(dtype), (u / np.linalg.norm(u)).astype(dtype)
    for s in range(0, W.shape[0], BLOCK):
        block = np.asarray(W[s : s + BLOCK], dtype=dtype)
        block = block - np.outer(block @ c32, c32)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[s : s + len(block)] = block @ u32 / np.linalg.norm(block, axis=1)
    return out


def flagged(values: np.ndarray, share: float = FLAG_SHARE, largest: bool = True) -> np.ndarray:
    """The ``share`` of the rows a ranking flags (at least one): the largest values (or the smallest), ties at the
    edge included; NaN never flags."""
    finite = np.flatnonzero(np.isfinite(values))
    out = np.zeros(len(values), dtype=bool)
    if not finite.size:
        return out
    k = max(1, int(np.ceil(share * len(values))))
    v = values[finite] if largest else -values[finite]
    edge = np.partition(v, len(v) - min(k, len(v)))[len(v) - min(k, len(v))]
    out[finite[v >= edge]] = True
    return out


def near_ties(W: np.ndarray, b: np.ndarray | None = None, ulps: int = NEAR_ULPS, seed: int = 0
              ) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of rows (i < j) that are near-ties: not equal, yet the largest absolute difference of their weights and
    bias is at most ``ulps`` float32 units in the last place at the largest entry of either row (the LM study's
    :data:`~argmaxable.detect.study.NEAR_ULPS`). Returns the pairs (i, j) and each pair's largest difference.

    Found without comparing every pair: rows are sorted by their projection on a random direction r, and
    |r.(w_i - w_j)| <= ||r||_1 max_k |w_ik - w_jk|, so only rows whose projections lie that close (plus the
    projections' rounding) can be near-ties; three more directions rule out most of those pairs the same way, and
    the rest are compared exactly, a block at a time.
    """
    n, d = W.shape
    bias = np.zeros(n) if b is None else np.asarray(b, dtype=np.float64)
    R = np.random.default_rng(seed).standard_normal((d + 1, PROJECTIONS))
    proj, scale = np.empty((n, PROJECTIONS)), np.empty(n)
    for s in range(0, n, BLOCK):
        block = np.column_stack([np.asarray(W[s : s + BLOCK], dtype=np.float64), bias[s : s + BLOCK]])
        proj[s : s + len(block)] = block @ R
        scale[s : s + len(block)] = np.abs(block).max(axis=1)
    tol = ulps * np.spacing(scale.astype(np.float32)).astype(np.float64)  # per row: its near-tie distance
    # A pair within max(tol_i, tol_j) projects within that times ||r||_1; each float64 projection errs by at most
    # gamma_(d+1) sum_k |r_k| |w_k| <= gamma_(d+1) ||r||_1 max|w|. Each row looks ahead in the sorted order as far as
    # its own distance reaches, and back as far (for the pairs where the other row's distance is the larger): two
    # searchsorted windows, no pass per offset.
    r1 = np.abs(R).sum(axis=0)  # (PROJECTIONS,)
    order = np.argsort(proj[:, 0], kind="stable")
    p, reach, err = proj[order, 0], (r1[0] * tol)[order], (r1[0] * 2 * (d + 1) * 2.0**-53 * scale)[order]
    span = reach + err + err.max()
    ahead = np.searchsorted(p, p + span, side="right")  # rows a+1 .. ahead[a]-1 may pair with a
    behind = np.searchsorted(p, p - span, side="left")  # rows behind[c] .. c-1 may pair with c
    counts_a, counts_c = ahead - np.arange(n) - 1, np.arange(n) - behind
    if not (counts_a.sum() + counts_c.sum()):
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0)
    a = np.repeat(np.arange(n), counts_a)
    a_next = a + 1 + np.arange(len(a)) - np.repeat(np.cumsum(counts_a) - counts_a, counts_a)
    c = np.repeat(np.arange(n), counts_c)
    c_prev = c - 1 - (np.arange(len(c)) - np.repeat(np.cumsum(counts_c) - counts_c, counts_c))
    lo, hi = np.concatenate([a, c_prev]), np.concatenate([a_next, c])  # sorted positions, lo < hi
    keep = np.unique(lo * n + hi)
    i, j = order[keep // n], order[keep % n]
    # the other directions rule out most of those pairs before any row is compared (the same bound holds on each)
    errs = 2 * (d + 1) * 2.0**-53 * np.outer(scale, r1)  # (n, PROJECTIONS)
    close = (np.abs(proj[i, 1:] - proj[j, 1:]) <= np.maximum(tol[i], tol[j])[:, None] * r1[1:] + errs[i, 1:]
             + errs[j, 1:]).all(axis=1)
    i, j = i[close], j[close]
    gap = np.empty(len(i))
    for s in range(0, len(i), BLOCK):
        x, y = i[s : s + BLOCK], j[s : s + BLOCK]
        diff = np.abs(np.asarray(W[x], dtype=np.float64) - np.asarray(W[y], dtype=np.float64)).max(axis=1)
        gap[s : s + BLOCK] = np.maximum(diff, np.abs(bias[x] - bias[y]))
    near = (gap > 0) & (gap <= np.maximum(tol[i], tol[j]))
    pairs = np.sort(np.column_stack([i[near], j[near]]), axis=1)
    return pairs, gap[near]
