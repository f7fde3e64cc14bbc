"""The papers' model tables and figures, drawn from whatever models the detection family checked.

- :func:`make_source_table`: ACL Table 1 / thesis Table 4.3, models with unargmaxable tokens per source;
- :func:`make_paper_tables`: ACL Tables 4-8 / thesis A.1-A.5, one section per paper table with the paper's
  numbers beside ours (models in no paper table get a section of their own);
- :func:`plot_unargmaxable_per_model`: ACL Fig. 6 / thesis Fig. 4.5, unargmaxable tokens per model;
- :func:`plot_steps`: ACL Figs. 11/12 / thesis Figs. 4.6/4.7, approximate-stage steps per token in
  vocabulary order (a token the approximate stage could not prove is drawn at the top, in another colour).

Offline these show the OCR heads and the small LM; with ``experiment=paper``, the papers' 149 models.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.detect.check import detect_table
from argmaxable.provenance import atomic_path, metadata, save_figure, sidecar, write_json, write_table
from argmaxable.text import markdown_table

# Where the papers report each group of models (the `paper.table` of a model config) and its source's name
# in ACL Table 1 / thesis Table 4.3.
PAPER_SOURCES = {
    "002 Table 4": "LMs (Hugging Face)",
    "002 Table 5": "Helsinki NLP OPUS",
    "002 Table 6": "FAIR WMT'19",
    "002 Table 7": "Bergamot",
    "002 Table 8": "Edinburgh WMT'17",
}
OTHER = "not in the papers"


def _read(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    return [json.loads(Path(p).read_text()) for p in paths]


def source_of(summary: Mapping) -> str:
    """A model's source: its config's ``group``, else the paper table it is reported in."""
    table = (summary.get("paper") or {}).get("table", "")
    return summary.get("group") or PAPER_SOURCES.get(table, table or OTHER)


def source_table(summaries: Sequence[Mapping]) -> pd.DataFrame:
    """ACL Table 1 / thesis 4.3: per source, models with unargmaxable tokens out of those checked (ours in
    the paper's box and, where models name their activation, in its box), feature dims, bias, and the
    papers' ratio (models whose config reports unargmaxable tokens)."""
    rows = []
    for source in dict.fromkeys(source_of(s) for s in summaries):
        group = [s for s in summaries if source_of(s) == source]
        with_box = [s for s in group if s.get("activation_box")]
        reported = [s for s in group if (s.get("paper") or {}).get("unargmaxable") is not None]
        rows.append({
            "source": source,
            "unargmaxable": f"{sum(s['unargmaxable'] > 0 for s in group)}/{len(group)}",
            "unargmaxable (activation box)": (f"{sum(s['activation_box']['unargmaxable'] > 0 for s in with_box)}/"
                                              f"{len(with_box)}") if with_box else "",
            "feature dim d": ",".join(str(d) for d in sorted({s["d"] for s in group})),
            "softmax bias": "/".join(sorted({"yes" if s["bias"] else "no" for s in group})),
            "paper unargmaxable": (f"{sum(s['paper']['unargmaxable'] > 0 for s in reported)}/{len(reported)}"
                                   if reported else ""),
        })
    return pd.DataFrame(rows)


def make_source_table(summary_paths: Iterable[str | os.PathLike], out_paths: Iterable[str | os.PathLike], *,
                      config: Any = None) -> pd.DataFrame:
    """Write :func:`source_table` of the given per-model summaries to each path (.parquet/.csv/.md)."""
    summary_paths = list(summary_paths)
    table = source_table(_read(summary_paths))
    for path in out_paths:
        write_table(table, path, config=config, inputs=summary_paths)
    return table


def make_paper_tables(summary_paths: Iterable[str | os.PathLike], out_path: str | os.PathLike, *,
                      config: Any = None) -> str:
    """ACL Tables 4-8 / thesis A.1-A.5 as one markdown file: a section per paper table (models in none: one
    section of their own), each the detection table of its models with the paper's numbers beside ours."""
    summary_paths = list(summary_paths)
    summaries = _read(summary_paths)
    order = [*PAPER_SOURCES, OTHER]
    key = {id(s): (s.get("paper") or {}).get("table") or OTHER for s in summaries}
    sections = ["# Detection results per paper table (002 Tables 4-8, thesis Tables A.1-A.5)", ""]
    for table in sorted(set(key.values()), key=lambda t: order.index(t) if t in order else len(order)):
        group = [s for s in summaries if key[id(s)] == table]
        frame = detect_table(group).round({"mean steps": 2, "seconds": 1})
        title = f"{table}: {PAPER_SOURCES[table]}" if table in PAPER_SOURCES else table
        sections += [f"## {title}", "", markdown_table(frame), ""]
    text = "\n".join(sections)
    with atomic_path(Path(out_path)) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    write_json(metadata(config, summary_paths), sidecar(out_path))
    return text


def plot_unargmaxable_per_model(summary_paths: Iterable[str | os.PathLike], out_path: str | os.PathLike, *,
                                config: Any = None):
    """ACL Fig. 6 / thesis Fig. 4.5: unargmaxable tokens per model, sorted in decreasing order; a second bar
    for the activation-aware box, and the paper's count as a marker where the paper reports one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary_paths = list(summary_paths)
    summaries = sorted(_read(summary_paths), key=lambda s: -s["unargmaxable"])
    names = [s["model"] for s in summaries]
    pos = np.arange(len(summaries))
    act = [s["activation_box"]["unargmaxable"] if s.get("activation_box") else np.nan for s in summaries]
    paper = [(s.get("paper") or {}).get("unargmaxable") for s in summaries]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(summaries) + 2), 4.5))
    width = 0.4 if not np.all(np.isnan(act)) else 0.8
    ax.bar(pos - (width / 2 if width < 0.8 else 0), [s["unargmaxable"] for s in summaries], width,
           label="ours, -100 <= x_j <= 100 (paper's box)", color="tab:blue")
    if width < 0.8:
        ax.bar(pos + width / 2, act, width, label="ours, activation-aware box", color="tab:orange")
    shown = [(p, v) for p, v in zip(pos, paper, strict=True) if v is not None]
    if shown:
        ax.scatter([p for p, _ in shown], [v for _, v in shown], marker="_", s=200, color="black", zorder=3,
                   label="paper")
    ax.set_xticks(pos, names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("unargmaxable tokens")
    ax.set_xlabel("model")
    ax.set_title(f"ACL 2022 Fig. 6 / thesis Fig. 4.5: unargmaxable tokens per model "
                 f"({sum(s['unargmaxable'] > 0 for s in summaries)}/{len(summaries)} models have some)")
    ax.legend(fontsize=8)
    save_figure(fig, out_path, config=config, inputs=summary_paths)
    plt.close(fig)


STEPS_CLAIMS = {  # the claim each steps figure tests, by the paper's figure (ACL 2022 line 681; thesis 2732)
    "fig11": "ACL 2022 Fig. 11 / thesis Fig. 4.6: members of one ensemble differ a lot in how many argmaxable "
             "tokens the approximate stage cannot prove (paper: 366 vs 8 and 3)",
    "fig12": "ACL 2022 Fig. 12 / thesis Fig. 4.7: the narrower (student) heads need fewer approximate-stage steps "
             "than the wider (teacher) ones",
}


def _paper_box(path: str | os.PathLike) -> pd.DataFrame:
    """A model's per-category table (``check_model``), the paper's box only."""
    frame = pd.read_parquet(path)
    if "box" in frame:
        frame = frame[frame["box"] == "paper"]
    return frame


def steps_summary(table_paths: Sequence[str | os.PathLike], names: Sequence[str],
                  widths: Sequence[int]) -> pd.DataFrame:
    """Per model (the paper's box): tokens, width d, tokens the approximate stage proved, could not prove (all, and
    those the LP then found argmaxable: the paper's Fig. 11 count), found unargmaxable, and the mean and median
    steps of the proven ones (the numbers Figs. 11/12 show)."""
    rows = []
    for path, name, d in zip(table_paths, names, widths, strict=True):
        frame = _paper_box(path)
        steps = frame["steps"].to_numpy()
        proven = steps[steps >= 0]
        rows.append({"model": name, "d": int(d), "tokens": len(frame), "proven_approximate": len(proven),
                     "approximate_failed": int((steps < 0).sum()),
                     "argmaxable_approximate_failed": int(((steps < 0) & (frame["status"] == "argmaxable")).sum()),
                     "unargmaxable": int((frame["status"] == "unargmaxable").sum()),
                     "mean_steps": float(proven.mean()) if len(proven) else float("nan"),
                     "median_steps": float(np.median(proven)) if len(proven) else float("nan")})
    return pd.DataFrame(rows)


def plot_steps(table_paths: Sequence[str | os.PathLike], names: Sequence[str], out_path: str | os.PathLike, *,
               figure: str, widths: Sequence[int], summary_path: str | os.PathLike | None = None,
               config: Any = None) -> pd.DataFrame:
    """ACL Figs. 11/12 / thesis Figs. 4.6/4.7: approximate-stage steps per token, tokens in vocabulary order
    (for the papers' BPE vocabularies: most to least frequent), one panel per model, the paper's box.

    A blue dot is the number of braid-reflect steps that proved a token argmaxable; a purple dot at the
    top marks a token the approximate stage could not prove that the exact LP found argmaxable, a red one
    a token the LP proved unargmaxable. Fig. 11 orders the panels as given, Fig. 12 by width d (its claim
    compares narrow and wide heads); each title states the claim the figure tests and ours. The per-model
    numbers (:func:`steps_summary`) go to ``summary_path`` (CSV) when given; they are returned.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = steps_summary(table_paths, names, widths)
    order = list(range(len(table_paths)))
    if figure == "fig12":
        order.sort(key=lambda i: widths[i])
    cols = min(3, len(table_paths))
    rows = -(-len(table_paths) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows + 1.0), squeeze=False)
    for ax, i in zip(axes.flat, order, strict=False):
        row = summary.iloc[i]
        _plot_steps_panel(ax, _paper_box(table_paths[i]),
                          f"{names[i]} (d = {widths[i]})\nargmaxable, approximate stage failed: "
                          f"{row.argmaxable_approximate_failed}; unargmaxable: {row.unargmaxable}\n"
                          f"mean steps of the proven: {row.mean_steps:.3g}")
    for ax in list(axes.flat)[len(table_paths):]:
        ax.set_visible(False)
    _steps_legend(fig)
    fig.suptitle(f"{STEPS_CLAIMS[figure]}\n{_steps_ours(figure, summary)}", fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    save_figure(fig, out_path, config=config, inputs=list(table_paths))
    plt.close(fig)
    if summary_path is not None:
        write_table(summary, summary_path, config=config, inputs=list(table_paths))
    return summary


def _plot_steps_panel(ax, frame: pd.DataFrame, title: str) -> None:
    """One model's panel of :func:`plot_steps`: the steps of each token the approximate stage proved, and the
    tokens the exact LP decided drawn at the top."""
    steps = frame["steps"].to_numpy()
    cat = frame["category"].to_numpy()
    proven = steps >= 0
    top = max(int(steps.max()), 1) * 1.1 if len(steps) else 1
    ax.scatter(cat[proven], steps[proven], s=2, color="tab:blue")
    exact = (~proven) & (frame["status"].to_numpy() == "argmaxable")
    unarg = frame["status"].to_numpy() == "unargmaxable"
    ax.scatter(cat[exact], np.full(exact.sum(), top), s=4, color="tab:purple")
    ax.scatter(cat[unarg], np.full(unarg.sum(), top), s=4, color="tab:red", marker="x")
    ax.set_ylim(0, top * 1.08)
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("vocabulary token (index)")
    ax.set_ylabel("approximate-stage steps")


def _steps_legend(fig) -> None:
    """The legend of :func:`plot_steps`' three kinds of dot, under the panels."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="", marker=".", color="tab:blue",
                      label="argmaxable: steps the approximate stage took"),
               Line2D([], [], ls="", marker=".", color="tab:purple",
                      label="argmaxable, approximate stage failed (drawn at the top; the exact LP decided)"),
               Line2D([], [], ls="", marker="x", color="tab:red", label="unargmaxable (exact LP; drawn at the top)")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7, frameon=False)


def _steps_ours(figure: str, summary: pd.DataFrame) -> str:
    """What our run shows for the claim of ``figure`` (:data:`STEPS_CLAIMS`), from :func:`steps_summary`."""
    if figure == "fig12":
        narrow, wide = summary.loc[summary["d"].idxmin()], summary.loc[summary["d"].idxmax()]
        return (f"ours: mean steps {narrow.mean_steps:.3g} at d = {narrow.d} vs {wide.mean_steps:.3g} at "
                f"d = {wide.d}")
    return ("ours: argmaxable tokens the approximate stage failed on "
            + ", ".join(map(str, summary["argmaxable_approximate_failed"])))
