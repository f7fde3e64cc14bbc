"""What the report's figures say: papers named as a reader of them knows them (no seed code in a title, label or
legend), every region of ACL Fig. 7(c) labelled, the top-m results naming the heads they read."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")

SRC = Path(__file__).resolve().parents[1] / "src" / "argmaxable"
DRAWS = {"set_title", "suptitle", "set_xlabel", "set_ylabel", "text", "annotate", "legend", "axvline", "axhline",
         "plot", "bar", "scatter", "hist", "errorbar", "axvspan", "fill_between"}
SEED_CODE = re.compile(r"\b00[0-4] (Figs?\.?|Tables?|Cor\.|App\.|§|l\.)")


def _drawn_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string a plotting call draws: its arguments and its ``label``/``title``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DRAWS:
            parts = [*node.args, *(k.value for k in node.keywords if k.arg in ("label", "title", "s"))]
            for part in parts:
                out += [(c.lineno, c.value) for c in ast.walk(part)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return out


def test_no_figure_names_a_paper_by_its_seed_code():
    """"002 Fig. 10" means nothing to a reader of the papers: "ACL 2022 Fig. 10" does."""
    found = [f"{p.relative_to(SRC)}:{line}: {text!r}" for p in sorted(SRC.rglob("*.py"))
             for line, text in _drawn_strings(p) if SEED_CODE.search(text)]
    assert found == [], found
    assert SEED_CODE.search("004 Fig. 5") and not SEED_CODE.search("Basri & Jacobs Fig. 5")


def test_fig_7c_labels_every_region_it_counts():
    """18 feasible rankings with a bias: 14 labelled on panel (c), the 4 bounded ones near the origin on the
    panel that draws that square larger; each label is a distinct ranking the grid finds there."""
    from argmaxable.theory.illustrations import arrangement_table, plot_fig7

    table = arrangement_table(bound=100.0, eps=1e-8)
    fig = plot_fig7(table)
    labels = [[t.get_text() for t in ax.texts] for ax in fig.axes]
    assert len(labels[0]) == 12 and len(set(labels[1]) | set(labels[2])) == len(labels[1]) + len(labels[2]) == 18
    assert int(table.loc[(table["figure"] == "Fig. 7") & table["bias"], "feasible"].iloc[0]) == 18
    assert all(re.fullmatch(r"[1-4]{4}", t) for t in labels[1] + labels[2])


def test_basri_jacobs_fig_5_legend_names_curves_not_columns():
    from argmaxable.theory.basri_jacobs import plot_appendix_b

    m = np.arange(1, 41)
    df = pd.DataFrame({"m": m, "trials": 200, "simulation": np.linspace(1, 0.98, 40),
                       "bound_gumbel": np.linspace(1, 0.97, 40), "bound_direct": np.linspace(1, 0.975, 40),
                       "bound_vs_simulation": "within"})
    fig = plot_appendix_b(df, 0.99, 50257, 768)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend and not any("bound_gumbel" in t or "bound_direct" in t for t in legend), legend
    assert any(t.startswith("ours: bound (Gumbel form) first below") for t in legend)


def test_top_m_results_record_the_head_they_read(tmp_path):
    """Basri & Jacobs Figs. 1, 7 read a trained head: each file's provenance names the head's files."""
    from argmaxable.topm.experiments import run_fraction, run_rows

    head = tmp_path / "models" / "tiny"
    head.mkdir(parents=True)
    np.save(head / "W.npy", np.random.default_rng(0).normal(size=(12, 4)))
    model = {"name": "tiny", "source": "file", "params": {"path": "W.npy"}}
    settings = {"fraction": {"m_values": [2], "trials": 2}, "check": {"patience": 0}, "probability": 0.99}
    run_fraction(settings, "tiny", "trained", model, str(head), str(tmp_path / "f.parquet"), seed=0)
    run_rows({"rows": {"pairs": 10}}, {"tiny": (model, str(head))},
             {"table": str(tmp_path / "rows.parquet"), "figure": str(tmp_path / "rows.png")}, seed=0)
    for name in ("f.parquet", "rows.parquet", "rows.png"):
        inputs = json.loads((tmp_path / f"{name}.meta.json").read_text())["inputs"]
        assert any(Path(k).name == "W.npy" for k in inputs), (name, inputs)
