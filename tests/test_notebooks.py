"""The notebooks run top to bottom on a results directory and show what it holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.spatial import ConvexHull

from argmaxable.detect.check import check_model, make_detect_table
from argmaxable.detect.loaders import load_model
from argmaxable.theory.toy import run_toy
from argmaxable.topm.experiments import (
    run_fraction,
    run_fraction_summary,
    run_rows,
    run_scaling_point,
    run_scaling_summary,
)
from argmaxable.topm.ranking import run_rankings

TOPM_CHECK = {"bound": 100.0, "eps": 1e-8, "patience": 0, "solver": "highs", "workers": 1, "exact_radius": True}
TINY_DETECT = {"name": "tiny", "source": "random", "params": {"n": 50, "d": 2, "dist": "gaussian", "bias": False}}
TINY_LM = {"name": "tiny", "source": "random", "params": {"n": 120, "d": 12, "dist": "gaussian", "bias": True}}


def build_topm(root: Path) -> None:
    """Every top-m rule function at a tiny size, writing results/topm as the rules do."""
    topm = root / "topm"
    tables, figures = topm / "tables", topm / "figures"
    settings = {"fraction": {"m_values": [1, 3, 6], "trials": 3}, "probability": 0.99, "check": TOPM_CHECK,
                "prescribed": {"eps_ratio": 0.05, "delta": 0.1, "low": 0.1, "high": 1.1}}
    curves = [str(topm / f"tiny_{kind}.parquet") for kind in ("trained", "gaussian")]
    for kind, path in zip(("trained", "gaussian"), curves, strict=True):
        run_fraction(settings, "tiny", kind, TINY_LM, str(root), path, seed=0)
    run_fraction_summary(settings, curves, {"curves": tables / "fraction_curves.parquet",
                                            "summary": tables / "fraction_summary.parquet",
                                            "figure": figures / "fraction.png"})
    points = {(200, 10): topm / "a.parquet", (200, 20): topm / "b.parquet", (400, 10): topm / "c.parquet"}
    for (N, d), path in points.items():
        run_scaling_point({"scaling": {"trials": 4}, "probability": 0.99, "check": TOPM_CHECK}, N, d, str(path),
                          seed=0)
    run_scaling_summary({"scaling": {"trials": 4}}, [points[200, 10], points[200, 20]],
                        [points[200, 10], points[400, 10]],
                        {"by_d": tables / "scaling_by_d.parquet", "by_n": tables / "scaling_by_n.parquet",
                         "slope": tables / "scaling_slope.parquet", "figure": figures / "scaling.png"})
    run_rows({"rows": {"pairs": 100}}, {"tiny": (TINY_LM, str(root))},
             {"table": tables / "rows.parquet", "figure": figures / "rows.png"}, seed=0)
    ranking = {"ranking": {"exhaustive_n": [6], "sampled_n": [16], "k_values": [1, 2], "samples": 5, "by_d_n": 6,
                           "by_d_k": [1], "matrices": 1, "bound": 1e4}, "check": TOPM_CHECK}
    run_rankings(ranking, {"exhaustive": tables / "dft_rankings_exhaustive.parquet",
                           "sampled": tables / "dft_rankings_sampled.parquet",
                           "by_d": tables / "dft_rankings_gaussian_by_d.parquet",
                           "figure": figures / "dft_rankings.png"}, seed=0)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    detect = {"bound": 100.0, "patience": 50, "eps": 1e-8, "solver": "highs", "workers": 1}
    tiny = root / "detect" / "tiny"
    check_model(TINY_DETECT, detect, tiny / "categories.parquet", tiny / "summary.json")
    make_detect_table([tiny / "summary.json"], [root / "detect" / "tables" / "detect.parquet"])
    figures, tables = root / "theory" / "figures", root / "theory" / "tables"
    run_toy({"table": tables / "toy.parquet", "figure": figures / "toy.png"})
    build_topm(root)
    return root


def test_detect_notebook_shows_each_model(results, run_notebook):
    # Without a bias, class i is argmaxable exactly when w_i is a vertex of conv(W): Qhull's count must be
    # the one the notebook prints for the tiny layer, and its first unargmaxable class the smallest non-vertex.
    W = load_model(TINY_DETECT).W.astype(np.float64)
    vertices = set(ConvexHull(W).vertices.tolist())
    inside = [i for i in range(len(W)) if i not in vertices]
    text = run_notebook("detect", results)
    assert "No detection results" not in text
    assert f"'argmaxable': {len(vertices)}" in text and f"'unargmaxable': {len(inside)}" in text
    assert f"first unargmaxable: [{inside[0]}, " in text


def test_detect_notebook_stands_in_without_results(tmp_path, run_notebook):
    assert "No detection results" in run_notebook("detect", tmp_path)


def test_theory_notebook_shows_tables_and_figures(results, run_notebook):
    text = run_notebook("theory", results)
    assert "1 tables, 1 figures" in text and "### toy" in text and "c4" in text


def test_topm_rules_write_what_the_notebook_shows(results, run_notebook):
    tables, figures = results / "topm" / "tables", results / "topm" / "figures"
    for path in [*tables.glob("*.parquet"), *figures.glob("*.png")]:
        assert path.with_suffix(".md" if path.suffix == ".parquet" else ".pdf").exists(), path
    curves = pd.read_parquet(tables / "fraction_curves.parquet")
    assert set(curves["test"]) == {"top-m", "prescribed"} and set(curves["kind"]) == {"trained", "gaussian"}
    assert (curves.loc[curves["m"] == 1, "fraction"] == 1.0).all()  # a Gaussian row is a vertex almost surely
    ranks = pd.read_parquet(tables / "dft_rankings_exhaustive.parquet")
    assert (ranks.loc[ranks["layer"] == "dft", "fraction"] == 1.0).all()
    text = run_notebook("topm", results)
    assert "9 tables, 4 figures" in text and "Fig. 3: m grows by" in text and "### fraction_summary" in text


def test_topm_notebook_stands_in_without_results(tmp_path, run_notebook):
    assert "No top-m results" in run_notebook("topm", tmp_path)
