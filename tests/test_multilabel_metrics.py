"""Multi-label metrics against values computed by hand."""

import numpy as np
import pytest

from argmaxable.multilabel.metrics import labels_to_dense, multilabel_metrics


def test_metrics_match_hand_computed_values():
    scores = np.array([[3.0, 2.0, -1.0, -2.0],  # top-2 {0, 1}; predicted {0, 1}
                       [-1.0, 0.5, 2.0, -3.0],  # top-2 {2, 1}; predicted {1, 2}
                       [-1.0, -2.0, -3.0, -0.5]])  # top-2 {3, 0}; predicted {}
    gold = labels_to_dense([[0], [1, 2], [2]], 4)
    m = multilabel_metrics(scores, gold, k=2)
    assert m["p@k"] == pytest.approx((1 / 2 + 2 / 2 + 0 / 2) / 3)
    assert m["r@k"] == pytest.approx((1 + 1 + 0) / 3)
    p, r = 0.5, 2 / 3
    assert m["f1@k"] == pytest.approx(2 * p * r / (p + r))
    # TP = 3 (0; 1, 2), FP = 1 (label 1 of example 0), FN = 1 (label 2 of example 2): 2*3 / (6 + 1 + 1)
    assert m["micro_f1"] == pytest.approx(6 / 8)
    assert m["exact_match"] == pytest.approx(1 / 3)


def test_shape_mismatch_is_rejected():
    with pytest.raises(ValueError, match="same shape"):
        multilabel_metrics(np.zeros((2, 3)), np.zeros((2, 4), dtype=bool), 1)
