"""Tables and figures of the multi-label sweep (thesis Tables 4.2, 5.1, 5.2; Figs 4.3, 5.6(a)(b), 5.7, 5.8).

Inputs are the per-run outputs of :mod:`~argmaxable.multilabel.train` (``train.json``, ``curve.csv``) and
:mod:`~argmaxable.multilabel.verify` (``verify.parquet``) under ``<results>/multilabel/<dataset>/<head>/d<d>/
seed<seed>/``. Counts are medians over seeds, as in the thesis; figures show mean and std over seeds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.multilabel.setup_tables import SETUP_TABLES
from argmaxable.provenance import panel_grid, save_figure, write_table

TABLES = ("table_4_2", "table_5_1", "table_5_2", "table_encoder_space", "table_dft_exceptions",
          "table_metrics")
FIGURES = ("fig_4_3", "fig_5_6a", "fig_5_6b", "fig_5_7", "fig_5_8")
KEYS = ["dataset", "head", "d", "seed"]
COLOURS = {"bsl": "tab:orange", "dft": "tab:blue"}  # of the two heads in every figure


def run_key(path: Path) -> dict[str, Any]:
    """(dataset, head, d, seed) of a run directory ``.../<dataset>/<head>/d<d>/seed<seed>``."""
    seed, d, head, dataset = path.parts[-1], path.parts[-2], path.parts[-3], path.parts[-4]
    return {"dataset": dataset, "head": head, "d": int(d.removeprefix("d")), "seed": int(seed.removeprefix("seed"))}


def summarise(verify_paths: Iterable[str | Path]) -> pd.DataFrame:
    """Counts per run, split, source and space: total, eps-/1-argmaxable, unargmaxable, undecided.

    The ``*_within_k`` columns restrict to assignments with at most k active labels (the DFT guarantee);
    ``thin_within_k`` and ``empty_within_k`` count those not eps-argmaxable whose region the exact stage found
    non-empty (thinner than eps) or empty (0 where the table has no ``region`` column).
    """
    rows = []
    for path in verify_paths:
        path = Path(path)
        table = pd.read_parquet(path)
        for (split, source, space), g in table.groupby(["split", "source", "space"]):
            wk = g[g["within_k"]]
            rows.append({**run_key(path.parent), "split": split, "source": source, "space": space,
                         "total": len(g), "eps_argmaxable": int(g["eps_argmaxable"].sum()),
                         "one_argmaxable": int(g["one_argmaxable"].sum()),
                         "one_undecided": int(g["one_undecided"].sum()) if "one_undecided" in g else 0,
                         "unargmaxable": int((g["status"] == "unargmaxable").sum()),
                         "undecided": int((g["status"] == "undecided").sum()),
                         "total_within_k": len(wk), "eps_argmaxable_within_k": int(wk["eps_argmaxable"].sum()),
                         "unargmaxable_within_k": int((wk["status"] == "unargmaxable").sum()),
                         "undecided_within_k": int((wk["status"] == "undecided").sum()),
                         **_regions(wk)})
    return pd.DataFrame(rows)


def _regions(rows: pd.DataFrame) -> dict[str, int]:
    """Of ``rows`` not eps-argmaxable, how many the exact stage found with a non-empty region and an empty one."""
    if "region" not in rows:
        return {"thin_within_k": 0, "empty_within_k": 0}
    short = rows[~rows["eps_argmaxable"].astype(bool)]
    return {"thin_within_k": int((short["region"] == "yes").sum()),
            "empty_within_k": int((short["region"] == "no").sum())}


def load_runs(train_paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per run: sizes, wall time and dev/test metrics from ``train.json``."""
    rows = []
    for path in train_paths:
        rec = json.loads(Path(path).read_text())
        flat = {f"{split}_{m}": v for split, ms in rec["metrics"].items() for m, v in ms.items()}
        rows.append({**run_key(Path(path).parent), **{k: rec[k] for k in (
            "n", "k", "e", "features", "trainable_head", "trainable_total", "n_train", "steps", "epochs",
            "wall_time_s", "time_to_best_s", "metric_k")}, **flat})
    return pd.DataFrame(rows)


def _median_wide(summary: pd.DataFrame, index: list[str], values: list[str]) -> pd.DataFrame:
    """Median over seeds, pivoted to columns ``<value>_<HEAD>``."""
    med = summary.groupby([*index, "head"])[values].median().reset_index()
    wide = med.pivot_table(index=index, columns="head", values=values)
    wide.columns = [f"{v}_{h.upper()}" for v, h in wide.columns]
    return wide.reset_index()


def make_tables(summary: pd.DataFrame, runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The thesis tables, computed from :func:`summarise` and :func:`load_runs` frames."""
    gold_head = summary[(summary["source"] == "gold") & (summary["space"] == "head")]
    test = gold_head[gold_head["split"] == "test"]
    bsl = test[test["head"] == "bsl"]
    t42 = bsl.groupby(["dataset", "d"])["eps_argmaxable"].median().unstack("dataset").reset_index()
    sizes = test.groupby("dataset")["total"].first()
    t42.columns.name = None
    t42 = pd.concat([t42, pd.DataFrame([{"d": "test size", **sizes.to_dict()}])], ignore_index=True)
    counts = ["eps_argmaxable", "one_argmaxable"]
    enc = summary[(summary["source"] == "gold") & (summary["space"] == "encoder")]
    dft = gold_head[gold_head["head"] == "dft"]  # dev and test splits
    # Thesis Tables 5.1, 5.2 (d=25): assignments the theorem makes argmaxable that the LP cannot prove at eps.
    exceptions = dft[dft["eps_argmaxable_within_k"] < dft["total_within_k"]]
    metric_cols = ["test_p@k", "test_r@k", "test_f1@k", "test_micro_f1", "test_exact_match",
                   "trainable_head", "wall_time_s", "time_to_best_s", "epochs"]
    return {
        "table_4_2": t42,
        "table_5_1": _median_wide(gold_head, ["dataset", "split", "d"], counts),
        "table_5_2": _median_wide(test, ["dataset", "d"], counts),
        "table_encoder_space": _median_wide(enc, ["dataset", "split", "d"], [*counts, "total"]),
        "table_dft_exceptions": exceptions[[*KEYS, "split", "total_within_k", "eps_argmaxable_within_k",
                                            "unargmaxable_within_k", "undecided_within_k", "thin_within_k",
                                            "empty_within_k"]].reset_index(drop=True),
        "table_metrics": runs.groupby(["dataset", "head", "d"])[metric_cols].median().reset_index(),
    }


def _band(ax, frame: pd.DataFrame, x: str, y: str, label: str, **kw) -> None:
    """Mean over seeds with a shaded std band."""
    g = frame.groupby(x)[y].agg(["mean", "std"]).fillna(0.0)
    ax.plot(g.index, g["mean"], marker="o", label=label, **kw)
    ax.fill_between(g.index, g["mean"] - g["std"], g["mean"] + g["std"], alpha=0.2, **kw)


def _d_ticks(ax, values) -> None:
    """Label a log d axis at the widths that ran (not only at powers of ten)."""
    from matplotlib.ticker import NullFormatter, NullLocator

    ticks = sorted({int(v) for v in values})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


def make_figures(summary: pd.DataFrame, runs: pd.DataFrame, curves: pd.DataFrame, loss_curve_d: int | None):
    """The thesis figures as matplotlib figures, keyed by name."""
    test = summary[(summary["source"] == "gold") & (summary["space"] == "head") & (summary["split"] == "test")]
    test = test.assign(pct=100 * test["eps_argmaxable"] / test["total"])
    datasets = sorted(summary["dataset"].unique())
    return {"fig_4_3": _fig_4_3(test, datasets), "fig_5_6a": _fig_5_6a(test, datasets),
            "fig_5_6b": _fig_5_6b(runs, datasets), "fig_5_7": _fig_5_7(curves, datasets, loss_curve_d),
            "fig_5_8": _fig_5_8(runs, datasets)}


def _per_dataset(datasets: list[str], title: str):
    """A figure with one panel per dataset (a grid: :func:`~argmaxable.provenance.panel_grid`), and its axes."""
    fig, axes = panel_grid(len(datasets), 4.5, 3.2)
    fig.suptitle(title, y=1.04)
    return fig, list(axes.flat)[:len(datasets)]


def _fig_4_3(test: pd.DataFrame, datasets: list[str]):
    """BSL: share of argmaxable test assignments against d, one line per dataset."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for ds in datasets:
        _band(ax, test[(test["dataset"] == ds) & (test["head"] == "bsl")], "d", "pct", ds)
    ax.set(xscale="log", xlabel="d (BSL bottleneck width)", ylabel="% test assignments argmaxable",
           title="thesis Fig. 4.3: BSL, argmaxable test assignments")
    _d_ticks(ax, test["d"])
    ax.legend()
    return fig


def _fig_5_6a(test: pd.DataFrame, datasets: list[str]):
    """Share of argmaxable test assignments against d, BSL beside DFT, one panel per dataset."""
    fig, axes = _per_dataset(datasets, "thesis Fig. 5.6(a): argmaxable test assignments")
    for ax, ds in zip(axes, datasets, strict=True):
        for head, c in COLOURS.items():
            _band(ax, test[(test["dataset"] == ds) & (test["head"] == head)], "d", "pct", head.upper(), color=c)
        ax.set(xscale="log", title=ds, xlabel="d", ylabel="% eps-argmaxable")
        _d_ticks(ax, test.loc[test["dataset"] == ds, "d"])
        ax.legend()
    return fig


def _fig_5_6b(runs: pd.DataFrame, datasets: list[str]):
    """Test F1@k and trainable head parameters against d, one panel per dataset."""
    fig, axes = _per_dataset(datasets, "thesis Fig. 5.6(b): F1@k and trainable parameters")
    for ax, ds in zip(axes, datasets, strict=True):
        twin = ax.twinx()
        for head, c in COLOURS.items():
            r = runs[(runs["dataset"] == ds) & (runs["head"] == head)]
            _band(ax, r, "d", "test_f1@k", head.upper(), color=c)
            p = r.groupby("d")["trainable_head"].median()
            twin.plot(p.index, p.values, ls="--", color=c)
        ax.set(xscale="log", title=ds, xlabel="d", ylabel="test F1@k")
        _d_ticks(ax, runs.loc[runs["dataset"] == ds, "d"])
        twin.set_ylabel("trainable head parameters (dashed)")
        ax.legend()
    return fig


def _fig_5_7(curves: pd.DataFrame, datasets: list[str], loss_curve_d: int | None):
    """Training loss against wall time at one d (``loss_curve_d``, else the middle of the sweep) per dataset."""
    fig, axes = _per_dataset(datasets, "thesis Fig. 5.7: training loss")
    for ax, ds in zip(axes, datasets, strict=True):
        c_ds = curves[curves["dataset"] == ds]
        ds_d = sorted(c_ds["d"].unique())
        d = loss_curve_d if loss_curve_d in ds_d else ds_d[len(ds_d) // 2]
        labelled = set()
        for (head, _seed), g in c_ds[c_ds["d"] == d].groupby(["head", "seed"]):
            ax.plot(g["elapsed_s"], g["train_loss"], color=COLOURS.get(head), alpha=0.8,
                    label=None if head in labelled else head.upper())
            labelled.add(head)
        ax.set(yscale="log", title=f"{ds}, d={d}", xlabel="wall time (s)", ylabel="training BCE")
        ax.legend()
    return fig


SPEEDUP_CLAIM = 0.75  # thesis Fig. 5.8 and its text: "the DFT converges about 25% faster", drawn as a marker


def _fig_5_8(runs: pd.DataFrame, datasets: list[str]):
    """Time to the best dev criterion per d (mean and std over seeds), BSL beside DFT, one panel per dataset; a
    black tick at three quarters of the BSL's mean marks the thesis's claim (the DFT about 25% faster); the
    title gives the DFT's mean time over all runs as a share of the BSL's."""
    ratio = runs.loc[runs["head"] == "dft", "time_to_best_s"].mean() / \
        runs.loc[runs["head"] == "bsl", "time_to_best_s"].mean()
    fig, axes = panel_grid(len(datasets), 6.4, 4.0)
    fig.suptitle(f"thesis Fig. 5.8: time to the best dev criterion per d (mean, std over seeds)\nmean DFT time / "
                 f"mean BSL time over all runs: {ratio:.2f} (thesis: DFT about 25% faster, 0.75)", fontsize=9)
    minutes = runs["time_to_best_s"].max() > 600
    for ax, ds in zip(axes.flat, datasets, strict=False):
        r = runs[runs["dataset"] == ds]
        ds_d = sorted(r["d"].unique())
        pos = np.arange(len(ds_d))
        width = 0.8 / len(COLOURS)
        for j, (head, c) in enumerate(COLOURS.items()):
            g = r[r["head"] == head].groupby("d")["time_to_best_s"].agg(["mean", "std"]).reindex(ds_d)
            g = g / 60 if minutes else g
            ax.bar(pos + (j - 0.5) * width, g["mean"], width, yerr=g["std"].fillna(0), color=c, label=head.upper())
            if head == "bsl":
                ax.hlines(SPEEDUP_CLAIM * g["mean"], pos + 0.5 * width - width / 2, pos + 1.5 * width - width / 2,
                          color="black", lw=1.5, label="thesis: DFT about 25% faster than BSL")
        ax.set_xticks(pos, [str(d) for d in ds_d])
        ax.set(xlabel="d (BSL width; DFT slack columns)", ylabel=f"{'minutes' if minutes else 'seconds'} to best "
               "dev criterion", title=ds)
        ax.margins(y=0.25)
        ax.legend(fontsize=7, ncol=3, loc="upper center")
    fig.tight_layout()
    return fig


def aggregate(run_dirs: Iterable[str | Path], tables_dir: str | Path, figures_dir: str | Path, *,
              loss_curve_d: int | None = None, config: Any = None) -> dict[str, pd.DataFrame]:
    """Write every table (.csv and .md) and figure (.png and .pdf) of the sweep.

    Parameters
    ----------
    run_dirs : iterable of path
        Run directories, each holding ``train.json``, ``curve.csv`` and ``verify.parquet``.
    tables_dir, figures_dir : path
    loss_curve_d : int, optional
        The d whose loss curves Fig. 5.7 shows (default: the middle of each dataset's sweep).
    """
    import matplotlib.pyplot as plt

    run_dirs = [Path(p) for p in run_dirs]
    if not run_dirs:
        raise ValueError("aggregate needs at least one run directory")
    summary = summarise(p / "verify.parquet" for p in run_dirs)
    runs = load_runs(p / "train.json" for p in run_dirs)
    curves = pd.concat([pd.read_csv(p / "curve.csv").assign(**run_key(p)) for p in run_dirs], ignore_index=True)
    inputs = [p / name for p in run_dirs for name in ("train.json", "verify.parquet")]
    tables = {"summary": summary, **make_tables(summary, runs)}
    for name, table in tables.items():
        for suffix in (".csv", ".md"):
            write_table(table, Path(tables_dir) / f"{name}{suffix}", config=config, inputs=inputs)
    for name, fig in make_figures(summary, runs, curves, loss_curve_d).items():
        for suffix in (".png", ".pdf"):
            save_figure(fig, Path(figures_dir) / f"{name}{suffix}", config=config, inputs=inputs)
        plt.close(fig)
    return tables


def load_tables(tables_dir: str | Path) -> dict[str, pd.DataFrame]:
    """Read back the tables :func:`aggregate` wrote (for notebooks)."""
    return {name: pd.read_csv(Path(tables_dir) / f"{name}.csv") for name in ("summary", *TABLES, *SETUP_TABLES)
            if (Path(tables_dir) / f"{name}.csv").exists()}
