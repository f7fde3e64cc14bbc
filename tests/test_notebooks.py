"""The notebooks run top to bottom on a results directory and show what it holds."""

from __future__ import annotations

import pytest

from argmaxable.models.detect import check_model, make_detect_table
from argmaxable.theory.toy import run_toy


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    layer = {"name": "tiny", "source": "random", "params": {"n": 50, "d": 2, "dist": "gaussian", "bias": False}}
    detect = {"bound": 100.0, "patience": 50, "eps": 1e-8, "solver": "highs", "workers": 1}
    tiny = root / "detect" / "tiny"
    check_model(layer, detect, tiny / "categories.parquet", tiny / "summary.json")
    make_detect_table([tiny / "summary.json"], [root / "detect" / "tables" / "detect.parquet"])
    figures, tables = root / "theory" / "figures", root / "theory" / "tables"
    run_toy({"table": tables / "toy.parquet", "figure": figures / "toy.png"})
    return root


def test_detect_notebook_shows_each_model(results, run_notebook):
    text = run_notebook("detect", results)
    assert "tiny" in text and "unargmaxable" in text and "No detection results" not in text


def test_detect_notebook_stands_in_without_results(tmp_path, run_notebook):
    assert "No detection results" in run_notebook("detect", tmp_path)


def test_theory_notebook_shows_tables_and_figures(results, run_notebook):
    text = run_notebook("theory", results)
    assert "1 tables, 1 figures" in text and "### toy" in text and "c4" in text
