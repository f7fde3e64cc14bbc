"""The notebooks run top to bottom on a results directory and show what the report shows of it.

The results are tiny: each family's own rule functions at small sizes, writing the files the report declares
(``workflow/report/<family>.yaml``), so every figure a notebook shows is one a rule drew.
"""

from __future__ import annotations

import base64
import re
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.spatial import ConvexHull
from test_multilabel_train import N_LABELS, RUN, tiny_dataset

from argmaxable.audit.models import audit_model, make_audit_index
from argmaxable.detect.check import check_model, make_detect_table
from argmaxable.detect.figures import make_paper_tables, make_source_table, plot_steps, plot_unargmaxable_per_model
from argmaxable.detect.loaders import load_model
from argmaxable.detect.study import make_study, study_model
from argmaxable.multilabel.aggregate import FIGURES, aggregate
from argmaxable.multilabel.schema import VerifyConfig
from argmaxable.multilabel.train import fit
from argmaxable.multilabel.verify import verify_arrays
from argmaxable.provenance import FIGURE_WIDTH, panel_grid
from argmaxable.theory.basri_jacobs import run_basri_jacobs
from argmaxable.theory.cover import run_cover
from argmaxable.theory.dft import run_dft
from argmaxable.theory.illustrations import run_illustrations
from argmaxable.theory.random_layers import run_random_layer, run_random_summary
from argmaxable.theory.regions import run_regions
from argmaxable.theory.toy import run_toy
from argmaxable.topm.experiments import (
    run_fraction,
    run_fraction_summary,
    run_rows,
    run_scaling_point,
    run_scaling_summary,
)
from argmaxable.topm.ranking import run_rankings

NOTEBOOKS = ("detect", "multilabel", "theory", "topm")
LAPTOP_PX = 1600  # the widest figure a laptop's notebook shows without scrolling
TOPM_CHECK = {"bound": 100.0, "eps": 1e-8, "patience": 0, "solver": "highs", "workers": 1, "exact_radius": True}
TINY_DETECT = {"name": "tiny", "source": "random", "params": {"n": 50, "d": 2, "dist": "gaussian", "bias": False}}
# Four heads of several widths, as the default run's OCR heads and small LMs: Figs. 11 and 12 draw a panel each.
DETECT_MODELS = [TINY_DETECT, *({"name": f"tiny d{d}", "group": "tiny heads", "source": "random",
                                 "params": {"n": 60, "d": d, "dist": "gaussian", "bias": True, "seed": d}}
                                for d in (3, 4, 6))]
DETECT = {"bound": 100.0, "patience": 50, "eps": 1e-8, "solver": "highs", "workers": 1}
AUDIT = {"hardest": 2, "refine": 20, "lp_rounds": 10, "share": 0.02}
TINY_LM = {"name": "tiny", "source": "random", "params": {"n": 120, "d": 12, "dist": "gaussian", "bias": True}}


def build_detect(root: Path) -> None:
    """Every detect rule function the report's detect items read (check, study, audit, tables, Figs. 6, 11, 12)."""
    detect, tables, figures = root / "detect", root / "detect" / "tables", root / "detect" / "figures"
    summaries, categories, records, tokens, cards = [], [], [], [], []
    for model in DETECT_MODELS:
        key = model["name"].replace(" ", "_")
        out = detect / key
        check_model(model, DETECT, out / "categories.parquet", out / "summary.json",
                    evidence_path=out / "evidence.npz")
        study_model(model, DETECT, out / "categories.parquet", out / "summary.json", detect / "study" / f"{key}.json",
                    detect / "study" / f"{key}_tokens.parquet", key=key)
        audit_model(model, {**DETECT, "audit": AUDIT}, out / "evidence.npz", detect / "audit" / key)
        summaries.append(out / "summary.json")
        categories.append(out / "categories.parquet")
        records.append(detect / "study" / f"{key}.json")
        tokens.append(detect / "study" / f"{key}_tokens.parquet")
        cards.append(detect / "audit" / f"{key}.json")
    make_detect_table(summaries, [tables / "detect.parquet", tables / "detect.md"])
    make_source_table(summaries, [tables / "table1_sources.md", tables / "table1_sources.parquet"])
    make_paper_tables(summaries, tables / "paper_tables.md")
    plot_unargmaxable_per_model(summaries, figures / "fig6_unargmaxable_per_model.png", study_paths=records)
    names, widths = [m["name"] for m in DETECT_MODELS], [m["params"]["d"] for m in DETECT_MODELS]
    for fig in ("fig11", "fig12"):
        plot_steps(categories, names, figures / f"{fig}_steps_per_token.png", figure=fig, widths=widths,
                   summary_path=tables / f"{fig}_steps_summary.csv")
    make_study(records, tokens, tables / "lm_study.md", tables / "lm_study.parquet", tables / "lm_study_tokens.parquet",
               figures / "lm_study_share.png")
    make_audit_index(cards, root, tables / "audit_cards.parquet", tables / "audit_cards.md")


def build_multilabel(root: Path) -> None:
    """BSL and DFT heads of the tiny multi-label sweep at two widths, verified and aggregated by the rules'
    functions (thesis Tables 4.2, 5.1, 5.2 and Figs. 4.3, 5.6-5.8)."""
    dsd, runs = tiny_dataset(), []
    for head in ("bsl", "dft"):
        for d in (2, 4):
            out = root / "multilabel" / "tiny" / head / f"d{d}" / "seed0"
            fit(dsd, N_LABELS, out, head=head, d=d, seed=0, run={**RUN, "d": [d], "max_epochs": 1})
            with np.load(out / "head.npz") as npz:
                table = verify_arrays(dict(npz), {s: dsd[s]["labels"] for s in ("dev", "test")}, VerifyConfig())
            table.to_parquet(out / "verify.parquet")
            runs.append(out)
    aggregate(runs, root / "multilabel" / "tables", root / "multilabel" / "figures")


def _theory_paths(root: Path, **names: str) -> dict[str, str]:
    """Rule outputs under results/theory: a name ending in .png is a figure, any other a table."""
    return {key: str(root / "theory" / ("figures" if name.endswith(".png") else "tables") /
                     (name if name.endswith(".png") else f"{name}.parquet")) for key, name in names.items()}


def build_theory(root: Path) -> None:
    """Every theory rule function at the tiny sizes of tests/test_theory_rules.py (the default's DFT geometry
    and illustrations: their figures' panels are the default run's)."""
    run_toy(_theory_paths(root, table="toy", figure="toy.png"))
    run_regions({"max_n": 10, "max_d": 10, "enumerate_max_n": 3, "bound": 1e4, "eps": 1e-8},
                _theory_paths(root, table="regions", no_bias="regions_no_bias", bias="regions_bias"), seed=0)
    run_cover({"n": 100, "d_values": [1, 50], "enumerate_max_n": 4, "bound": 1e4, "eps": 1e-8},
              _theory_paths(root, percentage="cover_percentage", enumeration="cover_enumeration",
                            figure="cover_percentage.png"), seed=0)
    run_dft({"geometry_n": [3, 4, 5], "n_values": [16], "k_values": [1], "slack": 2, "samples": 10,
             "quantile": 0.01, "alternation_max_n": 5, "bound": 1e4, "eps": 1e-8},
            _theory_paths(root, alternation="dft_alternation", radius="dft_radius", geometry="dft_geometry.png",
                          radius_figure="dft_radius.png"), seed=0)
    layers = {"n": 200, "d_values": [2, 5, 10, 20, 30, 50], "low": -1.0, "high": 1.0, "bias": True, "patience": 10,
              "bound": 100.0, "eps": 1e-8, "workers": 1, "qhull_n": 200, "qhull_d_values": [2]}
    inputs = [str(root / "theory" / "random_layers" / f"d{d}.parquet") for d in layers["d_values"]]
    for d, path in zip(layers["d_values"], inputs, strict=True):
        run_random_layer(layers, d, path, seed=0)
    run_random_summary(layers, inputs, _theory_paths(root, summary="random_layers", qhull="random_layers_qhull",
                                                     figure="random_layers.png"), seed=0)
    run_basri_jacobs({"probability": 0.99, "mc_N": 500, "mc_d": 60, "mc_m_max": 5, "mc_trials": 20, "mc_matrices": 1},
                     _theory_paths(root, table1="basri_jacobs_table1", appendix_b="basri_jacobs_appendix_b",
                                   crossings="basri_jacobs_crossings", fig2="basri_jacobs_fig2.png",
                                   fig_b="basri_jacobs_appendix_b.png"), seed=0)
    run_illustrations({"bound": 100.0, "eps": 1e-8, "patience": 50, "overcrowding_lines": [4, 8, 16, 32]},
                      _theory_paths(root, arrangements="arrangements", braid_reflect="braid_reflect",
                                    chebyshev_balls="chebyshev_balls", overcrowding="overcrowding",
                                    fig3="acl_fig3_braid.png", fig7="acl_fig7_bias.png",
                                    fig8="acl_fig8_construction.png", reflect_figure="braid_reflect.png",
                                    balls_figure="chebyshev_balls.png", overcrowding_figure="overcrowding.png"),
                      seed=0)


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
    build_detect(root)
    build_multilabel(root)
    build_theory(root)
    build_topm(root)
    return root


def _png_widths(nb) -> list[int]:
    """The pixel width of every PNG a notebook's cells output (read from the PNG header, the IHDR chunk)."""
    widths = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if png := out.get("data", {}).get("image/png"):
                data = base64.b64decode(png)
                assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
                widths.append(struct.unpack(">I", data[16:20])[0])
    return widths


def test_detect_notebook_shows_the_reports_detect_items(results, run_notebook):
    text, nb = run_notebook("detect", results, executed=True)
    for name in ("fig6_unargmaxable_per_model.png", "fig11_steps_per_token.png", "fig12_steps_per_token.png",
                 "lm_study_share.png", "audit_cards.parquet", "lm_study_tokens.parquet", "detect.parquet"):
        assert f"detect/{'figures' if name.endswith('.png') else 'tables'}/{name}" in text, name
    assert "ACL 2022 Fig. 6" in text and "ACL 2022 Fig. 11" in text and "ACL 2022 Fig. 12" in text
    assert "LM study" in text and "detect/audit/tiny.html" in text  # the audit index, each card linked
    assert re.search(r"detect: \d+ items, 4 figures, 7 tables", text)  # the thesis's items repeat the paper's
    assert len(_png_widths(nb)) == 4  # each figure once, though several items declare it


def test_detect_notebook_shows_the_detection_table_whole(results, run_notebook):
    # Without a bias, class i is argmaxable exactly when w_i is a vertex of conv(W): Qhull's count must be the
    # tiny layer's in the detection table, and the notebook must show that table as the file holds it.
    W = load_model(TINY_DETECT).W.astype(np.float64)
    inside = len(W) - len(ConvexHull(W).vertices)
    table = pd.read_parquet(results / "detect" / "tables" / "detect.parquet")
    assert table.set_index("model").loc["tiny", "# unargmaxable"] == inside > 0
    _, nb = run_notebook("detect", results, executed=True)
    html = [out["data"]["text/html"] for cell in nb.cells for out in cell.get("outputs", [])
            if "text/html" in out.get("data", {})]
    assert table._repr_html_() in html


@pytest.mark.parametrize("family", NOTEBOOKS)
def test_notebook_says_when_its_results_are_absent(family, tmp_path, run_notebook):
    assert f"No {family} results under {tmp_path}" in run_notebook(family, tmp_path)


def test_theory_notebook_shows_its_figures_and_tables(results, run_notebook):
    text, nb = run_notebook("theory", results, executed=True)
    figures = sorted(p.name for p in (results / "theory" / "figures").glob("*.png"))
    assert len(figures) == 13 and all(f"theory/figures/{name}" in text for name in figures)
    assert len(_png_widths(nb)) == len(figures)
    assert "ACL 2022 Fig. 1" in text and "c4" in text  # the toy layer's unargmaxable class (ACL 2022 Fig. 1)


def test_multilabel_notebook_shows_the_thesis_figures(results, run_notebook):
    text, nb = run_notebook("multilabel", results, executed=True)
    assert all(f"multilabel/figures/{name}.png" in text for name in FIGURES) and "Thesis Table 5.2" in text
    assert len(_png_widths(nb)) == len(FIGURES)


def test_topm_rules_write_what_the_notebook_shows(results, run_notebook):
    tables, figures = results / "topm" / "tables", results / "topm" / "figures"
    for path in [*tables.glob("*.parquet"), *figures.glob("*.png")]:
        assert path.with_suffix(".md" if path.suffix == ".parquet" else ".pdf").exists(), path
    curves = pd.read_parquet(tables / "fraction_curves.parquet")
    assert set(curves["test"]) == {"top-m", "prescribed"} and set(curves["kind"]) == {"trained", "gaussian"}
    assert (curves.loc[curves["m"] == 1, "fraction"] == 1.0).all()  # a Gaussian row is a vertex almost surely
    ranks = pd.read_parquet(tables / "dft_rankings_exhaustive.parquet")
    assert (ranks.loc[ranks["layer"] == "dft", "fraction"] == 1.0).all()
    text, nb = run_notebook("topm", results, executed=True)
    assert all(f"topm/figures/{p.name}" in text for p in figures.glob("*.png"))
    assert len(_png_widths(nb)) == 4 and "Basri & Jacobs Fig. 3" in text
    assert "in no item of the report" in text  # the ranking figure, which no item of topm.yaml declares


@pytest.mark.parametrize("family", NOTEBOOKS)
def test_every_figure_fits_a_laptops_width(family, results, run_notebook):
    _, nb = run_notebook(family, results, executed=True)
    widths = _png_widths(nb)
    assert widths and max(widths) <= LAPTOP_PX, widths


@pytest.mark.parametrize("width", [3.2, 4.0, 4.6, 5.0, 6.4, 12.0])
def test_a_panel_grid_of_any_size_fits_the_width(width):
    # The paper experiment draws more panels than the default run (three multi-label datasets, five Fig. 1
    # matrices): however many, the grid is no wider than FIGURE_WIDTH (a panel wider than it alone excepted),
    # holds exactly n visible panels, and uses no more rows than the columns that fit require.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for n in range(1, 25):
        fig, axes = panel_grid(n, width, 3.0)
        fits = max(1, int(FIGURE_WIDTH // width))
        assert fig.get_size_inches()[0] <= max(FIGURE_WIDTH, width)
        assert sum(ax.get_visible() for ax in axes.flat) == n and axes.shape[0] == -(-n // min(n, fits))
        plt.close(fig)
