"""Detection over a model config: the per-category table and summary agree with Qhull (no bias: category t is
argmaxable iff w_t is a hull vertex: ACL 2022 §2.2), and the table gathers summaries in the ACL 2022 paper's layout."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from scipy.spatial import ConvexHull

from argmaxable.detect.check import check_model, make_detect_table
from argmaxable.detect.loaders import load_random

DETECT = {"bound": 100.0, "patience": 2500, "eps": 1e-8, "solver": "highs", "workers": 1}
MODEL = {"name": "toy", "source": "random", "params": {"n": 40, "d": 3, "dist": "gaussian", "bias": False,
                                                        "seed": 5},
         "paper": {"table": "002 Table 4", "potentially_unargmaxable": "0", "unargmaxable": 0}}


def test_check_model_matches_qhull_and_writes_outputs(tmp_path):
    W = load_random(40, 3, "gaussian", bias=False, seed=5).W
    vertices = np.zeros(40, dtype=bool)
    vertices[ConvexHull(W).vertices] = True
    summary = check_model(MODEL, DETECT, tmp_path / "categories.parquet", tmp_path / "summary.json",
                          config={"test": True})
    table = pd.read_parquet(tmp_path / "categories.parquet")
    assert table["category"].tolist() == list(range(40))
    np.testing.assert_array_equal(table["status"] == "argmaxable", vertices)
    assert summary["unargmaxable"] == int((~vertices).sum()) > 0
    assert summary["unargmaxable_categories"] == np.flatnonzero(~vertices).tolist()
    # every unargmaxable category was left to the exact stage by the approximate one
    assert summary["potentially_unargmaxable"] >= summary["unargmaxable"]
    assert (summary["n"], summary["d"], summary["bias"]) == (40, 3, False)
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    meta = json.loads((tmp_path / "categories.parquet.meta.json").read_text())
    check = meta["check"]  # the check's own settings in the sidecar
    assert (check["bound"], check["eps"], check["lower"]) == (100.0, 1e-8, [-100.0] * 3)
    assert check["numeric_path"] == "float64" and check["blas"] and "lp_feasibility" in check["tolerances"]


def test_make_detect_table(tmp_path):
    paths = []
    for i, model in enumerate([MODEL, {**MODEL, "name": "toy2", "paper": {}}]):
        check_model(model, DETECT, tmp_path / f"{i}.parquet", tmp_path / f"{i}.json")
        paths.append(tmp_path / f"{i}.json")
    table = make_detect_table(paths, [tmp_path / "detect.parquet", tmp_path / "detect.md"])
    assert table["model"].tolist() == ["toy", "toy2"]
    assert {"# potentially unargmaxable", "# unargmaxable", "mean steps", "paper # unargmaxable"} <= set(table)
    assert table["paper # unargmaxable"].tolist() == ["0", ""]
    md = (tmp_path / "detect.md").read_text()
    assert md.startswith("| model") and "toy2" in md
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "detect.parquet"), table)
