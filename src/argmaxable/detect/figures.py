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
from argmaxable.provenance import atomic_path, metadata, panel_grid, save_figure, sidecar, write_json, write_table
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
    sections = ["# Detection results per paper table (ACL 2022 Tables 4-8, thesis Figs. A.1-A.5)", ""]
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


KIND_COLOURS = {"ties": "tab:green", "near_ties": "tab:orange", "strictly_inside": "tab:blue"}
KIND_LABELS = {"ties": "ties (rows equal to another's)", "near_ties": "near-ties (a few float32 ulps apart)",
               "strictly_inside": "strictly inside the others' hull"}


def _kinds(study_paths: Iterable[str | os.PathLike]) -> dict[str, dict[str, int]]:
    """Per model name, its unargmaxable tokens in the paper's box split into ties, near-ties and strictly inside
    (near-ties apart), from the LM study's records (:func:`argmaxable.detect.study.study_model`)."""
    out = {}
    for record in _read(study_paths):
        box = next(b for b in record["boxes"] if b["box"] == "paper")
        out[record["model"]] = {"ties": box["ties"], "near_ties": box["near_ties"],
                                "strictly_inside": box["strictly_inside"] - box["near_ties"]}
    return out


def plot_unargmaxable_per_model(summary_paths: Iterable[str | os.PathLike], out_path: str | os.PathLike, *,
                                study_paths: Iterable[str | os.PathLike] = (), config: Any = None):
    """ACL Fig. 6 / thesis Fig. 4.5: unargmaxable tokens per model, sorted in decreasing order, in the paper's box
    split into ties, near-ties and rows strictly inside where the LM study ran on the model (``study_paths``; grey
    where it did not, e.g. the synthetic layers); a hatched bar for the activation-aware box, and the paper's count
    as a marker where the paper reports one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary_paths, study_paths = list(summary_paths), list(study_paths)
    summaries = sorted(_read(summary_paths), key=lambda s: -s["unargmaxable"])
    kinds = _kinds(study_paths)
    names = [s["model"] for s in summaries]
    pos = np.arange(len(summaries))
    act = [s["activation_box"]["unargmaxable"] if s.get("activation_box") else np.nan for s in summaries]
    paper = [(s.get("paper") or {}).get("unargmaxable") for s in summaries]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(summaries) + 2), 4.8))
    width = 0.4 if not np.all(np.isnan(act)) else 0.8
    x = pos - (width / 2 if width < 0.8 else 0)
    bottom = np.zeros(len(summaries))
    for kind, colour in KIND_COLOURS.items():
        part = np.array([kinds.get(s["model"], {}).get(kind, 0) for s in summaries], dtype=float)
        ax.bar(x, part, width, bottom=bottom, color=colour, label=f"paper's box |x_j| <= 100: {KIND_LABELS[kind]}")
        bottom += part
    unsplit = np.array([0 if s["model"] in kinds else s["unargmaxable"] for s in summaries], dtype=float)
    if unsplit.any():
        ax.bar(x, unsplit, width, bottom=bottom, color="0.6", label="paper's box, not split (no LM study record)")
    for xx, s in zip(x, summaries, strict=True):  # the counts, readable however small the bar
        k = kinds.get(s["model"])
        text = f"{s['unargmaxable']}" + (f"\n{k['ties']}/{k['near_ties']}/{k['strictly_inside']}" if k else "")
        ax.annotate(text, (xx, s["unargmaxable"]), textcoords="offset points", xytext=(0, 2), ha="center",
                    va="bottom", fontsize=6)
    if width < 0.8:
        ax.bar(pos + width / 2, act, width, label="activation-aware box (all kinds)", color="white",
               edgecolor="tab:purple", hatch="///")
    shown = [(p, v) for p, v in zip(pos, paper, strict=True) if v is not None]
    if shown:
        ax.scatter([p for p, _ in shown], [v for _, v in shown], marker="_", s=200, color="black", zorder=3,
                   label="paper")
    ax.set_xticks(pos, names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("unargmaxable tokens")
    ax.margins(y=0.12)
    ax.set_xlabel("model")
    ax.set_title(f"ACL 2022 Fig. 6 / thesis Fig. 4.5: unargmaxable tokens per model, by kind "
                 f"({sum(s['unargmaxable'] > 0 for s in summaries)}/{len(summaries)} models have some)\nabove each "
                 "bar: all of the paper's box, then ties / near-ties / strictly inside", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out_path, config=config, inputs=[*summary_paths, *study_paths])
    plt.close(fig)


STEPS_TITLES = {  # what each steps figure draws (the claims they bear on are the report's: ACL l. 671, 681)
    "fig11": "ACL 2022 Fig. 11 / thesis Fig. 4.6: approximate-stage steps per token, one panel per model",
    "fig12": "ACL 2022 Fig. 12 / thesis Fig. 4.7: approximate-stage steps per token, one panel per model, "
             "narrowest d first",
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

    A blue dot is the number of braid-reflect steps that proved a token argmaxable; above the highest of them, a
    purple band marks the tokens the approximate stage could not prove that the exact LP found argmaxable and,
    higher still, a red band (crosses) those the LP proved unargmaxable, so neither hides the other. Fig. 11
    orders the panels as given, Fig. 12 by width d (its claim compares narrow and wide heads); the title says
    what is drawn and the numbers each panel shows. The x axis is the vocabulary's own order (the papers sort it
    by frequency; the LMs trained here are ordered by frequency, OCR character lists are not). The per-model
    numbers (:func:`steps_summary`) go to ``summary_path`` (CSV) when given; they are returned.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = steps_summary(table_paths, names, widths)
    order = list(range(len(table_paths)))
    if figure == "fig12":
        order.sort(key=lambda i: widths[i])
    fig, axes = panel_grid(len(table_paths), 5, 3.6, top=1.0)
    for ax, i in zip(axes.flat, order, strict=False):
        row = summary.iloc[i]
        _plot_steps_panel(ax, _paper_box(table_paths[i]),
                          f"{names[i]} (d = {widths[i]})\nargmaxable, approximate stage failed: "
                          f"{row.argmaxable_approximate_failed}; unargmaxable: {row.unargmaxable}\n"
                          f"mean steps of the proven: {row.mean_steps:.3g}")
    _steps_legend(fig)
    fig.suptitle(f"{STEPS_TITLES[figure]}\n{_steps_ours(figure, summary)}\nx: the vocabulary's own order (the "
                 "papers': by frequency; the LMs trained here: by frequency; OCR character lists: none)", fontsize=9)
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
    ax.scatter(cat[exact], np.full(exact.sum(), top), s=14, color="tab:purple", marker="o")
    ax.scatter(cat[unarg], np.full(unarg.sum(), top * 1.1), s=18, color="tab:red", marker="x", linewidths=1)
    ax.set_ylim(0, top * 1.2)
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("vocabulary token (index in the vocabulary's own order)")
    ax.set_ylabel("approximate-stage steps")


def _steps_legend(fig) -> None:
    """The legend of :func:`plot_steps`' three kinds of dot, under the panels."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="", marker=".", color="tab:blue",
                      label="argmaxable: steps the approximate stage took"),
               Line2D([], [], ls="", marker="o", color="tab:purple",
                      label="argmaxable, approximate stage failed (band above the steps; the exact LP decided)"),
               Line2D([], [], ls="", marker="x", color="tab:red",
                      label="unargmaxable (exact LP; the highest band)")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7, frameon=False)


def _steps_ours(figure: str, summary: pd.DataFrame) -> str:
    """The numbers of :func:`steps_summary` the figure's claim reads (ACL l. 671 for Fig. 12: narrow against wide
    heads; l. 681 for Fig. 11: tokens the approximate stage could not prove, per panel)."""
    if figure == "fig12":
        narrow, wide = summary.loc[summary["d"].idxmin()], summary.loc[summary["d"].idxmax()]
        return (f"mean steps of the proven tokens: {narrow.mean_steps:.3g} at d = {narrow.d} (narrowest), "
                f"{wide.mean_steps:.3g} at d = {wide.d} (widest)")
    return ("argmaxable tokens the approximate stage could not prove: "
            + ", ".join(f"{m} {n}" for m, n in zip(summary["model"], summary["argmaxable_approximate_failed"],
                                                   strict=True)))
