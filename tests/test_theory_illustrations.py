"""The papers' illustrations: counts from the core against closed forms, balls inside their regions."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from argmaxable.multilabel.setup_tables import make_setup_tables
from argmaxable.theory.illustrations import (
    B3,
    BOX,
    REFLECT_B,
    REFLECT_BOX,
    REFLECT_W,
    W3,
    arrangement_table,
    braid_reflect_table,
    chebyshev_balls,
    reflect_trace,
)
from argmaxable.theory.regions import count_rankings


def test_ranking_counts_match_the_captions_and_the_recurrence():
    table = arrangement_table(bound=100.0, eps=1e-8)
    closed = [count_rankings(n, 2, bias=b) for n, b in zip(table["classes"], table["bias"], strict=True)]
    assert table["feasible"].tolist() == table["paper"].tolist() == closed == [6, 12, 12, 18, 6]


def test_chebyshev_balls_lie_inside_their_regions_and_the_box():
    balls = chebyshev_balls(W3, B3, eps=1e-8)
    ok = balls[balls["status"] == "argmaxable"]
    assert len(ok) == 7  # 3 lines in general position cut the plane into 1 + 3 + 3 regions
    X = ok[["x1", "x2"]].to_numpy()  # (7, 2)
    signs = np.array([[c == "+" for c in a] for a in ok["assignment"]])
    margin = (X @ W3.T + B3) * np.where(signs, 1, -1) / np.linalg.norm(W3, axis=1)  # signed distances
    assert (margin >= ok["radius"].to_numpy()[:, None] - 1e-9).all()
    assert (np.abs(X) + ok["radius"].to_numpy()[:, None] <= BOX + 1e-9).all()


def test_braid_reflect_toy_shows_all_three_outcomes_and_its_trace_ends_with_the_target_winning():
    verdicts = braid_reflect_table(bound=REFLECT_BOX, eps=1e-8, patience=50)
    assert verdicts["outcome"].tolist() == verdicts["expected"].tolist()
    t = int(verdicts["steps"].idxmax())
    xs, winners = reflect_trace(REFLECT_W, REFLECT_B, t, steps=int(verdicts["steps"].max()), eps=1e-8)
    assert len(xs) == verdicts["steps"].max()  # x0 .. x_{steps-1}: one argmax evaluation each
    assert np.argmax(REFLECT_W @ xs[-1] + REFLECT_B) == t and np.argmax(REFLECT_W @ xs[0] + REFLECT_B) != t
    # Each step reflects x across the hyperplane of the class then winning: the iterates move (no x0 = x1
    # drawn on top of each other) and the reflected-away class was the argmax before the step.
    assert (np.linalg.norm(np.diff(xs, axis=0), axis=1) > 1e-9).all()
    assert [int(np.argmax(REFLECT_W @ x + REFLECT_B)) for x in xs[:-1]] == winners.tolist()


def test_setup_tables_put_ours_beside_the_papers(tmp_path):
    ds = tmp_path / "tiny"
    ds.mkdir()
    (ds / "stats.json").write_text(json.dumps({"n_labels": 7, "k": 3, "split_sizes": {"train": 20, "dev": 5,
                                                                                       "test": 6}}))
    run = {"encoder": {"kind": "cnn", "filters": 8, "pretrained": ""}, "d": [2, 4], "lr_encoder": 0.01,
           "lr_classifier": 0.01, "batch_size": 4, "patience": 3, "eval_every": 0, "criterion": "loss",
           "metric_k": 10}
    out = {"table_4_1": tmp_path / "t41.csv", "table_a_4": tmp_path / "ta4.csv"}
    make_setup_tables({"tiny": ds}, {"tiny": run}, out)
    t41 = pd.read_csv(out["table_4_1"])
    assert t41["source"].tolist() == ["paper"] * 3 + ["ours"]
    assert t41.iloc[-1][["n", "k", "N", "e"]].astype(str).tolist() == ["7", "3", "20", "8"]
    ta4 = pd.read_csv(out["table_a_4"]).set_index("attribute")
    assert ta4.loc["# test", "tiny (ours)"] == "6" and ta4.loc["lr (encoder)", "MIMIC-III"] == "0.001"
    assert (tmp_path / "ta4.md").exists()


def test_run_illustrations_writes_every_table_and_figure(tmp_path):
    from argmaxable.theory.illustrations import run_illustrations

    tables = ("arrangements", "braid_reflect", "chebyshev_balls", "overcrowding")
    figures = ("fig3", "fig7", "fig8", "reflect_figure", "balls_figure", "overcrowding_figure")
    out = {k: str(tmp_path / f"{k}.parquet") for k in tables} | {k: str(tmp_path / f"{k}.png") for k in figures}
    run_illustrations({"bound": 100.0, "eps": 1e-8, "patience": 50, "overcrowding_lines": [3, 6]}, out, seed=0)
    for k in tables:
        assert (tmp_path / f"{k}.md").exists()
    for k in figures:
        assert (tmp_path / f"{k}.pdf").exists()
    crowd = pd.read_parquet(out["overcrowding"])
    assert crowd["regions"].tolist() == sorted(crowd["regions"]) and (crowd["argmaxable"] == crowd["regions"]).all()
