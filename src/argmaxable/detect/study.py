"""The LM study (beyond the papers, beside ACL Table 4 / thesis Fig. A.2): what real heads' unargmaxable tokens are.

ACL Table 4 found no unargmaxable token in the LMs of 2019-2020. This study takes every real head the detection
family checked (LLMs, the translation model, the OCR recognisers, the LMs trained here) and says of each
unargmaxable token whether it is a *tie* or *strictly inside*:

- a tie: its row of W and its bias equal another row's exactly (:func:`tie_groups`), and the group, one row
  kept, is argmaxable. No row of the group can win strictly, but greedy decoding that breaks ties by the first
  index (``numpy.argmax``, ``torch.argmax``) still emits the group's lowest id: the table names it;
- strictly inside: unargmaxable even with every group of equal rows merged into one (its row lies inside the
  hull of the others, or a row equal to it has a higher bias).

The group check reruns the core (:func:`argmaxable.check_categories`) on W with each group's higher ids
removed, for the groups' lowest ids only, in the same box.

Per model (:func:`study_model`): n, d, n/d, tied (the head shares its weights with an input embedding, where
the loader knows), the stored precision, and per box the unargmaxable count split into ties and strictly
inside; per unargmaxable token its tie group, the id greedy decoding can emit, its row norm and that norm's
percentile among all rows, and its token type where the categories table has a ``token_type`` column (GGUF:
normal, control, user-defined, unused, byte). :func:`make_study` gathers the models into one table (Markdown
and parquet), the token list, the share of each token type that is unargmaxable, and a figure of the
unargmaxable share against n/d. The token list names each token's model group (its config's ``group``) and, for a
single CJK character, whether the character-set standards count it among the most frequently used
(:func:`argmaxable.detect.frequency.cjk_frequency`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.core import check_categories
from argmaxable.detect.frequency import cjk_frequency
from argmaxable.detect.loaders import Layer, load_model
from argmaxable.provenance import FIGURE_WIDTH, atomic_path, save_figure, write_json, write_table
from argmaxable.text import markdown_table

# Unargmaxable tokens listed per model in the Markdown, paper's box (all of them, every box, in the parquet): a
# model whose tokens have types (the GGUF LLMs) lists up to LISTED_TYPED, any other up to LISTED.
LISTED, LISTED_TYPED = 10, 100
NEAR_ULPS = 8  # a near-tie: within this many float32 units in the last place (at the row's largest entry) of a row


def tie_groups(W: np.ndarray, b: np.ndarray | None = None) -> list[np.ndarray]:
    """Groups of rows whose weights and bias are exactly equal (two or more rows each), ids ascending.

    Rows are first bucketed by the float64 sum and sum of squares of their entries (and their bias), then
    compared exactly within a bucket, so the cost is one pass over W plus the buckets' sizes.

    Examples
    --------
    >>> W = np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0], [1.0, 2.0], [0.0, 1.0]])
    >>> [g.tolist() for g in tie_groups(W)]
    [[0, 2, 3], [1, 4]]
    >>> [g.tolist() for g in tie_groups(W, np.array([0.0, 0.0, 1.0, 0.0, 0.0]))]
    [[0, 3], [1, 4]]
    """
    n = W.shape[0]
    bias = np.zeros(n) if b is None else np.asarray(b, dtype=np.float64).reshape(-1)
    keys = np.empty((n, 3))
    for start in range(0, n, 4096):  # float64 copies a block at a time
        block = np.asarray(W[start:start + 4096], dtype=np.float64)
        keys[start:start + len(block), 0] = block.sum(axis=1)
        keys[start:start + len(block), 1] = np.einsum("ij,ij->i", block, block)
    keys[:, 2] = bias
    _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    groups = []
    for bucket in np.flatnonzero(counts > 1):
        ids = np.flatnonzero(inverse.reshape(-1) == bucket)
        rows = np.column_stack([np.asarray(W[ids], dtype=np.float64), bias[ids]]) + 0.0  # -0.0 equals 0.0
        _, which, sizes = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
        groups += [ids[which.reshape(-1) == k] for k in np.flatnonzero(sizes > 1)]
    return sorted(groups, key=lambda g: int(g[0]))


def norm_percentiles(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's Euclidean norm (float64) and its percentile: the share of rows with a norm at most as large."""
    norms = np.concatenate([np.linalg.norm(np.asarray(W[s:s + 4096], dtype=np.float64), axis=1)
                            for s in range(0, W.shape[0], 4096)])
    order = np.sort(norms)
    return norms, 100.0 * np.searchsorted(order, norms, side="right") / len(norms)


def nearest_rows(W: np.ndarray, b: np.ndarray | None, ids: np.ndarray, candidates: int = 3
                 ) -> tuple[np.ndarray, np.ndarray]:
    """For each row in ``ids``, the other row closest to it and their distance: the largest absolute difference
    of weights or bias, computed exactly in float64 against the ``candidates`` rows nearest in Euclidean distance
    (found by one Gram product). A distance of 0 is an exact tie; a few units in the last place of the stored
    type is a near-tie, a row whose region can be thinner than the check's eps."""
    ids = np.asarray(ids, dtype=np.int64)
    n = W.shape[0]
    bias = np.zeros(n) if b is None else np.asarray(b, dtype=np.float64).reshape(-1)
    nearest, distance = np.empty(len(ids), dtype=np.int64), np.empty(len(ids))
    if not len(ids):
        return nearest, distance
    sq = np.empty(n)
    for s in range(0, n, 4096):
        block = np.asarray(W[s:s + 4096], dtype=np.float64)
        sq[s:s + len(block)] = np.einsum("ij,ij->i", block, block) + bias[s:s + len(block)] ** 2
    k = max(1, min(candidates, n - 1))
    for s in range(0, len(ids), 512):
        rows = ids[s:s + 512]
        A = np.column_stack([np.asarray(W[rows], dtype=np.float64), bias[rows]])
        d2 = np.empty((len(rows), n))
        for c in range(0, n, 8192):
            block = np.column_stack([np.asarray(W[c:c + 8192], dtype=np.float64), bias[c:c + 8192]])
            d2[:, c:c + len(block)] = sq[rows, None] + sq[None, c:c + len(block)] - 2 * A @ block.T
        d2[np.arange(len(rows)), rows] = np.inf
        near = np.argpartition(d2, k - 1, axis=1)[:, :k]
        for r, (i, cand) in enumerate(zip(rows, near, strict=True)):
            gaps = np.maximum(np.abs(np.asarray(W[cand], dtype=np.float64) - A[r, :-1]).max(axis=1),
                              np.abs(bias[cand] - bias[i]))
            best = int(np.argmin(gaps))
            nearest[s + r], distance[s + r] = cand[best], gaps[best]
    return nearest, distance


def split_unargmaxable(layer: Layer, frame: pd.DataFrame, settings: Mapping[str, Mapping], detect: Mapping,
                       groups: list[np.ndarray] | None = None) -> pd.DataFrame:
    """One row per unargmaxable category and box of a model's categories table, each a tie or strictly inside.

    Parameters
    ----------
    layer : Layer
        The head the table was made from.
    frame : DataFrame
        The per-category table of :func:`argmaxable.detect.check.check_model`: box, category, status, and
        optionally token and token_type.
    settings : mapping
        Per box, its ``lower`` and ``upper`` ends (the summary's ``settings``).
    detect : mapping
        bound, patience, eps, solver, workers.
    groups : list of arrays, optional
        :func:`tie_groups` of the layer, when already computed.

    Returns
    -------
    DataFrame
        box, category, token, token_type, kind ("tie"; "near-tie": strictly inside, but within
        :data:`NEAR_ULPS` float32 units in the last place of another row; else "strictly inside"), group (the
        group's lowest id, -1 for a row in no group), group_size, emitted (whether greedy decoding with
        first-index tie-break can emit this id: the lowest id of an argmaxable group), nearest (the closest other row,
        :func:`nearest_rows`), distance (to it), norm, norm_percentile.
    """
    groups = tie_groups(layer.W, layer.b) if groups is None else groups
    lowest, size, keep = _merged_groups(groups, layer.W.shape[0])
    norms, percentiles = norm_percentiles(layer.W)
    out = []
    for box, rows in frame.groupby("box", sort=False):
        unarg = rows[rows["status"] == "unargmaxable"]
        heads = sorted({int(lowest[c]) for c in unarg["category"] if lowest[c] >= 0})
        argmaxable_group = _argmaxable_heads(layer, keep, heads, settings[box], detect)
        cats = unarg["category"].to_numpy()
        tie = np.array([lowest[c] in argmaxable_group for c in cats], dtype=bool)
        nearest, distance = nearest_rows(layer.W, layer.b, cats)
        near = ~tie & (distance > 0) & (distance <= NEAR_ULPS * np.spacing(_row_scale(layer, cats)))
        out.append(pd.DataFrame({
            "box": box, "category": cats,
            "token": unarg["token"].to_numpy() if "token" in unarg else "",
            "token_type": unarg["token_type"].to_numpy() if "token_type" in unarg else "",
            "kind": np.where(tie, "tie", np.where(near, "near-tie", "strictly inside")), "group": lowest[cats],
            "group_size": size[cats],
            "emitted": tie & (lowest[cats] == cats), "nearest": nearest, "distance": distance, "norm": norms[cats],
            "norm_percentile": percentiles[cats]}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _merged_groups(groups: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``n``, its group's lowest id (-1 in no group) and the group's size (1 in none); and the rows kept
    when each group of equal rows is merged into its lowest id."""
    lowest = np.full(n, -1)
    size = np.ones(n, dtype=np.int64)
    for g in groups:
        lowest[g], size[g] = g[0], len(g)
    drop = np.concatenate([g[1:] for g in groups]) if groups else np.array([], dtype=np.int64)
    return lowest, size, np.setdiff1d(np.arange(n), drop)


def _argmaxable_heads(layer: Layer, keep: np.ndarray, heads: list[int], box: Mapping, detect: Mapping) -> set[int]:
    """The groups' lowest ids ``heads`` that are argmaxable with every group merged into one row (only the rows
    ``keep``), in ``box`` (its ``lower`` and ``upper`` ends)."""
    if not heads:
        return set()
    res = check_categories(layer.W[keep], np.searchsorted(keep, heads),
                           b=None if layer.b is None else layer.b[keep], bound=detect["bound"],
                           lower=box.get("lower"), upper=box.get("upper"),
                           patience=detect["patience"], eps=detect["eps"], solver=detect["solver"],
                           workers=detect["workers"])
    return {h for h, s in zip(heads, res.status, strict=True) if s == "argmaxable"}


def _row_scale(layer: Layer, cats: np.ndarray) -> np.ndarray:
    """Per row ``cats``, the largest magnitude among its entries and its bias, in float32: the scale of its last
    place (:data:`NEAR_ULPS`)."""
    scale = np.abs(np.asarray(layer.W[cats], dtype=np.float64)).max(axis=1)
    if layer.b is not None:
        scale = np.maximum(scale, np.abs(np.asarray(layer.b, dtype=np.float64)[cats]))
    return scale.astype(np.float32)


def study_model(model: Mapping, detect: Mapping, table_path: str | os.PathLike, summary_path: str | os.PathLike,
                out_json: str | os.PathLike, out_tokens: str | os.PathLike, *, root: str | os.PathLike | None = None,
                key: str = "", config: Any = None) -> dict[str, Any]:
    """The study's record of one checked model (written to ``out_json``) and its unargmaxable tokens
    (``out_tokens``, parquet): see the module docstring."""
    summary = json.loads(Path(summary_path).read_text())
    frame = pd.read_parquet(table_path)
    if "box" not in frame:
        frame = frame.assign(box="paper")
    layer = load_model(model, root=root)
    groups = tie_groups(layer.W, layer.b)
    tokens = split_unargmaxable(layer, frame, summary["settings"], detect, groups)
    n, d = layer.W.shape
    boxes = []
    for box, rows in frame.groupby("box", sort=False):
        mine = tokens[tokens["box"] == box] if len(tokens) else tokens
        record = {"box": box, "lower": summary["settings"][box].get("lower"),
                  "upper": summary["settings"][box].get("upper"),
                  "unargmaxable": int((rows["status"] == "unargmaxable").sum()),
                  "ties": int((mine["kind"] == "tie").sum()) if len(mine) else 0,
                  "strictly_inside": int((mine["kind"] != "tie").sum()) if len(mine) else 0,
                  "near_ties": int((mine["kind"] == "near-tie").sum()) if len(mine) else 0,
                  "emitted": mine.loc[mine["emitted"], "category"].astype(int).tolist() if len(mine) else [],
                  "undecided": int((rows["status"] == "undecided").sum())}
        if "token_type" in rows:
            record["token_types"] = {
                str(t): {"tokens": len(r), "unargmaxable": int((r["status"] == "unargmaxable").sum())}
                for t, r in rows.groupby("token_type", sort=True)}
        boxes.append(record)
    result = {"key": key, "model": model["name"], "group": model.get("group") or "", "n": int(n), "d": int(d),
              "n_over_d": n / d, "tied": getattr(layer, "tied", None),
              "precision": layer.precision or str(layer.W.dtype), "bias": layer.b is not None,
              "tie_groups": len(groups), "rows_in_tie_groups": int(sum(len(g) for g in groups)),
              "boxes": boxes}
    write_table(tokens.assign(model=model["name"]), out_tokens, config=config, inputs=[table_path, summary_path])
    write_json(result, out_json)
    return result


def _yes_no(value) -> str:
    return "—" if value is None else ("yes" if value else "no")


def study_tables(records: list[Mapping], tokens: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The study table (one row per model and box) and the token-type table (per model, box and type)."""
    rows, types = [], []
    for r in records:
        for box in r["boxes"]:
            share = box["unargmaxable"] / r["n"]
            rows.append({"model": r["model"], "model group": r.get("group", ""), "box": box["box"], "n": r["n"],
                         "d": r["d"],
                         "n/d": round(r["n_over_d"], 1), "tied": _yes_no(r["tied"]), "precision": r["precision"],
                         "bias": _yes_no(r["bias"]), "# unargmaxable": box["unargmaxable"], "# ties": box["ties"],
                         "# strictly inside": box["strictly_inside"], "of which near-ties": box["near_ties"],
                         "ids greedy decoding emits": ", ".join(map(str, box["emitted"])) or "—",
                         "% unargmaxable": round(100 * share, 4), "# undecided": box["undecided"]})
            for t, c in (box.get("token_types") or {}).items():
                types.append({"model": r["model"], "box": box["box"], "token type": t, "tokens": c["tokens"],
                              "unargmaxable": c["unargmaxable"],
                              "% unargmaxable": round(100 * c["unargmaxable"] / c["tokens"], 2)})
    return pd.DataFrame(rows), pd.DataFrame(types, columns=["model", "box", "token type", "tokens", "unargmaxable",
                                                            "% unargmaxable"])


KINDS = {"tie": "tab:green", "near-tie": "tab:orange", "strictly inside": "tab:red"}  # kinds and their colours


def plot_share(table: pd.DataFrame, path: str | os.PathLike, *, config: Any = None, inputs: Iterable = ()) -> None:
    """Top: unargmaxable share (%) against n/d (log x), one numbered point per model: filled in the paper's box,
    hollow in the activation's box, a line joining a model's two; a symlog y axis keeps the models with none on
    the axis. Below: per model (the same numbers), its unargmaxable tokens in the paper's box split into ties,
    near-ties and rows strictly inside (shares of its count, the count written beside)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paper = table[table["box"] == "paper"].sort_values(["n/d", "% unargmaxable"], kind="stable")
    bars = 1.0 + 0.22 * len(paper)  # the lower panel's height: a readable bar per model
    fig, (ax, kx) = plt.subplots(2, 1, figsize=(FIGURE_WIDTH, 6.0 + bars), gridspec_kw={"height_ratios": [6.0, bars]})
    other = table[table["box"] != "paper"]
    for _, row in other.iterrows():
        mine = paper[paper["model"] == row["model"]]
        ax.plot([row["n/d"]] * 2, [mine["% unargmaxable"].iloc[0], row["% unargmaxable"]], color="0.7", lw=0.8,
                zorder=1)
    ax.scatter(paper["n/d"], paper["% unargmaxable"], s=36, color="tab:blue", label="paper's box |x_j| <= B",
               zorder=3)
    ax.scatter(other["n/d"], other["% unargmaxable"], s=70, facecolors="none", edgecolors="tab:red",
               label="activation's box", zorder=2)
    for k, (_, row) in enumerate(paper.iterrows(), start=1):
        ax.annotate(str(k), (row["n/d"], row["% unargmaxable"]), textcoords="offset points",
                    xytext=(4, 4 if k % 2 else -10), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_ylim(-0.004, 300)
    ax.set_xlim(table["n/d"].min() / 1.5, table["n/d"].max() * 1.5)
    ax.set_xlabel("n / d (categories per feature, log scale)")
    ax.set_ylabel("% of categories unargmaxable (symlog)")
    ax.set_title("Unargmaxable share of real and trained heads against n/d", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    _plot_kinds(kx, paper)
    fig.tight_layout()
    save_figure(fig, path, config=config, inputs=inputs)
    plt.close(fig)


def _plot_kinds(ax, paper: pd.DataFrame) -> None:
    """The lower panel of :func:`plot_share`: one bar per model (numbered as above), its unargmaxable tokens
    in the paper's box as shares of ties, near-ties and strictly inside."""
    total = paper["# unargmaxable"].to_numpy()
    parts = {"tie": paper["# ties"].to_numpy(), "near-tie": paper["of which near-ties"].to_numpy(),
             "strictly inside": (paper["# strictly inside"] - paper["of which near-ties"]).to_numpy()}
    y = np.arange(len(paper))[::-1]
    left = np.zeros(len(paper))
    for kind, count in parts.items():
        share = np.divide(100.0 * count, total, out=np.zeros(len(total)), where=total > 0)
        ax.barh(y, share, left=left, color=KINDS[kind], label=kind)
        left += share
    for yy, n in zip(y, total, strict=True):
        ax.text(101, yy, f"{n}" if n else "none", va="center", fontsize=7)
    ax.set_yticks(y, [f"{k} {m}" for k, m in enumerate(paper["model"], start=1)], fontsize=7)
    ax.set_xlim(0, 112)
    ax.set_xlabel("% of the model's unargmaxable tokens (count at the right), paper's box")
    ax.set_title("Unargmaxable tokens by kind: ties, near-ties, strictly inside", fontsize=10)
    ax.figure.legend(*ax.get_legend_handles_labels(), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3,
                     fontsize=7, frameon=False)  # under the figure: the counts at the bars' right stay clear


def _markdown(table: pd.DataFrame, tokens: pd.DataFrame, types: pd.DataFrame) -> str:
    lines = ["# LM study: unargmaxable tokens of real heads (beyond the papers, beside ACL Table 4)", "",
             "A *tie* is a row exactly equal (weights and bias) to another, in a group that is argmaxable once "
             "merged: greedy decoding with first-index tie-break can still emit the group's lowest id (listed). "
             "*Strictly inside*: unargmaxable even with equal rows merged; of those, a *near-tie* is within "
             f"{NEAR_ULPS} float32 units in the last place of another row (at the row's largest entry).", "",
             markdown_table(table), ""]
    if len(types):
        lines += ["## Share of each token type that is unargmaxable", "", markdown_table(types), ""]
    if len(tokens):
        lines += ["## Unargmaxable tokens", "",
                  "Nearest: the closest other row and the largest absolute difference of weights or bias to it (0: a "
                  "tie; a few units in the last place: a near-tie whose region can be thinner than eps). Norm "
                  "percentile: share of the model's rows with a norm at most this row's. The paper's box only, at "
                  f"most {LISTED} per model ({LISTED_TYPED} for a model with token types); all of them, every box, in "
                  "lm_study_tokens.parquet.", ""]
        paper = tokens[tokens["box"] == "paper"]
        typed = paper.groupby("model", sort=False)["token_type"].transform(lambda t: (t.astype(str) != "").any())
        shown = pd.concat([paper[typed].groupby("model", sort=False).head(LISTED_TYPED),
                           paper[~typed].groupby("model", sort=False).head(LISTED)]).sort_index()
        cols = ["model", "box", "category", "token", "token_type", "kind", "group", "group_size", "emitted", "nearest",
                "distance", "norm", "norm_percentile"]
        lines += [markdown_table(shown[cols].round({"norm": 4, "norm_percentile": 1}), floatfmt="g"), ""]
    return "\n".join(lines)


def make_study(record_paths: Iterable[str | os.PathLike], token_paths: Iterable[str | os.PathLike],
               out_md: str | os.PathLike, out_parquet: str | os.PathLike, out_tokens: str | os.PathLike,
               out_png: str | os.PathLike, *, config: Any = None) -> pd.DataFrame:
    """Gather the per-model records of :func:`study_model` into the study's table, token list and figure."""
    record_paths, token_paths = list(record_paths), list(token_paths)
    records = [json.loads(Path(p).read_text()) for p in record_paths]
    frames = [pd.read_parquet(p) for p in token_paths]
    tokens = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else \
        pd.DataFrame(columns=["model", "box", "category", "token", "token_type", "kind", "group", "group_size",
                              "emitted", "nearest", "distance", "norm", "norm_percentile"])
    groups = {r["model"]: r.get("group", "") for r in records}  # the model's config group (e.g. the LLM heads)
    tokens["model group"] = tokens["model"].map(groups).fillna("")
    tokens["CJK frequency"] = tokens["token"].astype(str).map(cjk_frequency)  # common / rare single ideographs
    tokens = tokens[["model", "model group", *(c for c in tokens if c not in ("model", "model group"))]]
    table, types = study_tables(records, tokens)
    write_table(table, out_parquet, config=config, inputs=record_paths)
    write_table(tokens, out_tokens, config=config, inputs=token_paths)
    with atomic_path(Path(out_md)) as tmp:
        tmp.write_text(_markdown(table, tokens, types) + "\n")
    plot_share(table, out_png, config=config, inputs=record_paths)
    return table
