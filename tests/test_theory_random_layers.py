"""Random softmax layers: the core against Qhull, and the approximate stage's precision/recall."""

import numpy as np

from argmaxable.constructions import random_layer
from argmaxable.theory.random_layers import check_random_layer, qhull_table, summarize
from argmaxable.theory.schema import RandomLayersConfig

SETTINGS = RandomLayersConfig(n=300, low=-1.0, high=1.0, bias=True, patience=20, bound=100.0, eps=1e-8, workers=1,
                              qhull_n=300, qhull_d_values=[2, 3])


def test_random_layer_depends_on_seed_and_d_only():
    W1, b1 = random_layer(50, 3, low=-1, high=1, bias=True, seed=4)
    W2, b2 = random_layer(50, 3, low=-1, high=1, bias=True, seed=4)
    assert np.array_equal(W1, W2) and np.array_equal(b1, b2)
    assert np.abs(W1).max() <= 1.0 and random_layer(50, 3, low=-1, high=1, bias=False, seed=4)[1] is None


def test_core_agrees_with_qhull_and_approximate_stage_has_full_recall():
    df = qhull_table(SETTINGS, seed=0)
    assert (df["core_disagrees"] == 0).all()
    assert (df["qhull_unargmaxable"] == df["core_unargmaxable"]).all()
    assert (df["approx_recall"] == 1.0).all()  # one-sided: never proves an unargmaxable class argmaxable


def test_sweep_summary_counts():
    frames = [check_random_layer(SETTINGS, d, seed=0) for d in (2, 20)]
    summary = summarize(frames, SETTINGS.patience)
    assert summary["d"].tolist() == [2, 20]
    assert (summary[["argmaxable", "unargmaxable", "undecided"]].sum(axis=1) == 300).all()
    assert summary.loc[0, "unargmaxable"] > 0 and summary.loc[1, "unargmaxable"] == 0
