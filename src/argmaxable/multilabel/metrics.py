"""Multi-label evaluation metrics: P@k, R@k, F1@k (CAML; thesis Fig. 5.6(b)), micro-F1 and exact match."""

from __future__ import annotations

import numpy as np


def labels_to_dense(labels, n: int) -> np.ndarray:
    """Index lists (one per example) to a dense (m, n) bool matrix."""
    Y = np.zeros((len(labels), n), dtype=bool)
    for i, row in enumerate(labels):
        Y[i, list(row)] = True
    return Y


def multilabel_metrics(scores: np.ndarray, gold: np.ndarray, k: int) -> dict[str, float]:
    """Ranking and thresholded metrics of one split.

    Parameters
    ----------
    scores : np.ndarray, shape (m, n)
        Logits; a label is predicted active when its logit is > 0 (sigmoid > 0.5).
    gold : np.ndarray, shape (m, n), bool
        Gold label assignments.
    k : int
        Cut-off of P@k and R@k (8 for MIMIC-III, 10 otherwise).

    Returns
    -------
    dict
        ``p@k``, ``r@k`` (mean over examples with at least one gold label), ``f1@k`` (harmonic mean of the
        two), ``micro_f1`` and ``exact_match`` (fraction of examples whose predicted set equals the gold set).

    Examples
    --------
    >>> s = np.array([[3.0, -1.0, 2.0], [-1.0, 1.0, -2.0]])
    >>> g = np.array([[True, False, False], [False, True, True]])
    >>> multilabel_metrics(s, g, 1)["p@k"]
    1.0
    """
    if scores.shape != gold.shape:
        raise ValueError(f"scores {scores.shape} and gold {gold.shape} must have the same shape")
    k = min(k, scores.shape[1])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # (m, k) indices of the k largest logits
    hits = np.take_along_axis(gold, top, axis=1).sum(axis=1)  # (m,)
    n_gold = gold.sum(axis=1)
    p = float(np.mean(hits / k))
    has = n_gold > 0
    r = float(np.mean(hits[has] / n_gold[has])) if has.any() else 0.0
    pred = scores > 0
    tp = float(np.sum(pred & gold))
    denom = 2 * tp + float(np.sum(pred & ~gold)) + float(np.sum(~pred & gold))
    return {
        "p@k": p,
        "r@k": r,
        "f1@k": 2 * p * r / (p + r) if p + r > 0 else 0.0,
        "micro_f1": 2 * tp / denom if denom > 0 else 0.0,
        "exact_match": float(np.mean(np.all(pred == gold, axis=1))),
    }
