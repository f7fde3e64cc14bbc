"""Multi-label evaluation metrics: P@k, R@k, F1@k (CAML; thesis Fig. 5.6(b)), micro-F1 and exact match.

Labels stay index lists until a block of examples needs them dense (:func:`labels_to_dense` of that block);
:class:`MetricTotals` adds a split up block by block.
"""

from __future__ import annotations

import numpy as np


def labels_to_dense(labels, n: int) -> np.ndarray:
    """Index lists (one per example) to a dense (m, n) bool matrix."""
    Y = np.zeros((len(labels), n), dtype=bool)
    for i, row in enumerate(labels):
        Y[i, list(row)] = True
    return Y


class MetricTotals:
    """Sums behind :func:`multilabel_metrics`, added one block of examples at a time, so that a split's metrics
    need neither its whole (m, n) score matrix nor a dense (m, n) gold matrix (BioASQ's test split: 10k x 20k).

    Examples
    --------
    >>> s = np.array([[3.0, -1.0, 2.0], [-1.0, 1.0, -2.0]])
    >>> g = np.array([[True, False, False], [False, True, True]])
    >>> totals = MetricTotals(1)
    >>> totals.add(s[:1], g[:1]); totals.add(s[1:], g[1:])
    >>> totals.result() == multilabel_metrics(s, g, 1)
    True
    """

    def __init__(self, k: int):
        self.k = k
        self.examples = self.with_gold = self.exact = 0
        self.precision = self.recall = 0.0  # sums over examples of hits / k and of hits / |gold|
        self.tp = self.fp = self.fn = 0

    def add(self, scores: np.ndarray, gold: np.ndarray) -> None:
        """One block: logits (b, n) and its gold assignments (b, n) bool; a label is predicted when logit > 0."""
        if scores.shape != gold.shape:
            raise ValueError(f"scores {scores.shape} and gold {gold.shape} must have the same shape")
        k = min(self.k, scores.shape[1])
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # (b, k) indices of the k largest logits
        hits = np.take_along_axis(gold, top, axis=1).sum(axis=1)  # (b,)
        n_gold = gold.sum(axis=1)
        has = n_gold > 0
        pred = scores > 0
        self.examples += len(scores)
        self.precision += float(np.sum(hits / k))
        self.recall += float(np.sum(hits[has] / n_gold[has]))
        self.with_gold += int(has.sum())
        self.tp += int(np.sum(pred & gold))
        self.fp += int(np.sum(pred & ~gold))
        self.fn += int(np.sum(~pred & gold))
        self.exact += int(np.sum(np.all(pred == gold, axis=1)))

    def result(self) -> dict[str, float]:
        """``p@k``, ``r@k``, ``f1@k``, ``micro_f1`` and ``exact_match`` of the examples added so far."""
        p = self.precision / self.examples if self.examples else 0.0
        r = self.recall / self.with_gold if self.with_gold else 0.0
        denom = 2 * self.tp + self.fp + self.fn
        return {
            "p@k": p,
            "r@k": r,
            "f1@k": 2 * p * r / (p + r) if p + r > 0 else 0.0,
            "micro_f1": 2 * self.tp / denom if denom > 0 else 0.0,
            "exact_match": self.exact / self.examples if self.examples else 0.0,
        }


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
    totals = MetricTotals(k)
    totals.add(scores, gold)
    return totals.result()
