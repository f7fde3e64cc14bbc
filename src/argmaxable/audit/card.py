"""The audit card of one model: plain data (:func:`build_card`, JSON-ready) rendered as Markdown and as a
self-contained HTML page (:func:`markdown`, :func:`html_page`), with the same sections in the same order.

Token names come from the model's vocabulary and may hold anything (``|``, ``<script>``, newlines, control
characters): every cell is escaped for its format (:func:`argmaxable.text.markdown_cell`, :func:`html.escape`).
"""

from __future__ import annotations

import html
import json

import numpy as np
import pandas as pd

from argmaxable.core.result import ARGMAXABLE, STATUSES, UNARGMAXABLE
from argmaxable.provenance import code_version
from argmaxable.text import markdown_cell, shown

SIGNALS = {  # flag column -> what the card calls it
    "flag_indicator": "unembedding indicator (Land & Bartolo)",
    "flag_norm": "low row norm",
    "flag_tie": "tie or near-tie",
    "flag_unargmaxable": "unargmaxable (certified)",
    "flag_radius": "smallest certified radius bound",
}
LISTED = 50  # unargmaxable tokens listed on the card outside tie groups (all of them in the JSON)


def _token(tokens: pd.DataFrame, i: int) -> list:
    """[id, token, type] of row i."""
    row = tokens.iloc[int(i)]
    return [int(i), str(row["token"]), str(row["token_type"])]


def _box_text(settings: dict) -> str:
    lo = np.unique(np.asarray(settings.get("lower", []), dtype=np.float64))
    hi = np.unique(np.asarray(settings.get("upper", []), dtype=np.float64))
    if lo.size == 1 and hi.size == 1:
        if lo[0] == -hi[0]:
            return f"|x_j| <= {hi[0]:g}"
        return f"{lo[0]:g} <= x_j <= {hi[0]:g}"
    return f"per coordinate: lower in [{lo.min():g}, {lo.max():g}], upper in [{hi.min():g}, {hi.max():g}]"


def build_card(layer, name: str, result, lp, unarg: pd.DataFrame, groups: list, tokens: pd.DataFrame, *,
               settings: dict, seconds: dict, share: float) -> dict:
    """The card's data: the model and its head, counts by verdict, the unargmaxable tokens in their tie groups and
    which ids greedy decoding still emits, the hardest tokens with both bounds, the signals compared, the ids for
    tools that reset untrained rows, and how it was computed (box, eps, code version, seconds)."""
    from scipy.stats import spearmanr

    n, d = layer.W.shape
    info = layer.info or {}
    status = np.asarray(result.status)
    unarg_ids = np.flatnonzero(status == UNARGMAXABLE)
    kind = dict(zip(unarg["category"].astype(int), unarg["kind"], strict=True)) if len(unarg) else {}
    emitted = set(unarg.loc[unarg["emitted"], "category"].astype(int)) if len(unarg) else set()
    tie_rows = []
    for g in groups:
        if not np.isin(g, unarg_ids).any():
            continue  # equal rows that one of them still wins for (a bias breaks the tie): not a verdict's concern
        emits = [int(i) for i in g if int(i) in emitted]
        tie_rows.append({"members": [_token(tokens, i) for i in g], "greedy_emits": emits[0] if emits else None})
    in_groups = {int(i) for g in groups for i in g}
    inside = [[*_token(tokens, i), kind.get(int(i), "strictly inside"),
               int(unarg.loc[unarg["category"] == i, "nearest"].iloc[0]),
               float(unarg.loc[unarg["category"] == i, "distance"].iloc[0])]
              for i in unarg_ids if int(i) not in in_groups or kind.get(int(i)) != "tie"]
    hard = []
    for j in range(len(lp.items)):
        t = int(lp.items[j])
        row = tokens.iloc[t]
        hard.append([*_token(tokens, t), str(lp.status[j]), float(lp.radius[j]), float(lp.radius_upper[j]),
                     None if np.isnan(row["indicator"]) else float(row["indicator"]), float(row["norm_percentile"]),
                     [SIGNALS[c] for c in SIGNALS if c not in ("flag_radius",) and bool(row[c])],
                     float(row["radius"]), int(result.steps[np.flatnonzero(result.items == t)[0]]),
                     int(lp.lp_rounds[j]), bool(lp.radius_exact[j])])
    arg = np.flatnonzero(status == ARGMAXABLE)
    others = np.setdiff1d(result.items[arg], lp.items)
    others_floor = float(np.nanmin(result.radius[others])) if others.size else None
    compare = _compare(tokens, spearmanr)
    never = sorted(set(unarg_ids.tolist()) - emitted)
    card = {
        "title": f"Token audit: {name}",
        "model": name, "origin": layer.origin, "n": int(n), "d": int(d),
        "tied": getattr(layer, "tied", None), "stored_type": layer.precision or str(layer.W.dtype),
        "bias": layer.b is not None, "tensor": info.get("tensor"),
        "box": _box_text(settings), "eps": settings.get("eps"), "numeric_path": settings.get("numeric_path"),
        "code": code_version(), "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "counts": {s: int((status == s).sum()) for s in STATUSES},
        "tie_groups": tie_rows, "unargmaxable_not_tied": inside,
        "greedy_emits": sorted(emitted), "never_emitted": never,
        "hardest": hard, "others_at_least": others_floor, "share": share,
        "refined": int(settings.get("refine", 0)), "lp_rounds": settings.get("lp_rounds"),
        "signals": compare,
        "ids": {"unargmaxable": unarg_ids.tolist(), "never_emitted_by_greedy_decoding": never,
                "flagged_by_indicator": np.flatnonzero(tokens["flag_indicator"]).tolist()},
        "evidence": {},
    }
    return card


def _compare(tokens: pd.DataFrame, spearmanr) -> dict:
    """How the signals relate: the tokens each flags, its overlap with the certified verdicts, the tokens only it
    flags (named, strongest first), and rank correlations of the indicator and the norm with the radius bound."""
    flags = tokens[list(SIGNALS)].to_numpy(dtype=bool)
    only = flags & (flags.sum(axis=1, keepdims=True) == 1)
    strength = {"flag_indicator": -tokens["indicator"], "flag_norm": tokens["norm"], "flag_radius": tokens["radius"],
                "flag_tie": tokens["category"], "flag_unargmaxable": tokens["category"]}
    rows = []
    for j, col in enumerate(SIGNALS):
        mine = np.flatnonzero(only[:, j])
        mine = mine[np.argsort(strength[col].to_numpy()[mine], kind="stable")]
        rows.append({"signal": SIGNALS[col], "flagged": int(flags[:, j].sum()),
                     "also_unargmaxable": int((flags[:, j] & tokens["flag_unargmaxable"].to_numpy()).sum()),
                     "only_this": len(mine),
                     "named": [_token(tokens, i) for i in mine[:10]]})
    arg = tokens["status"].to_numpy() == ARGMAXABLE
    rho = {}
    for col in ("indicator", "norm"):
        v, r = tokens[col].to_numpy(), tokens["radius"].to_numpy()
        ok = arg & np.isfinite(v) & np.isfinite(r)
        rho[col] = None if ok.sum() < 3 else float(spearmanr(v[ok], r[ok]).statistic)
    ref = tokens["reference"].to_numpy(dtype=bool)
    return {"rows": rows, "spearman_with_radius": rho, "reference_tokens": int(ref.sum()),
            "reference_named": [_token(tokens, i) for i in np.flatnonzero(ref)[:5]]}


def _fmt(v) -> str:
    """A number as the card prints it."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def sections(card: dict) -> list[tuple[str, list]]:
    """The card as (heading, blocks) in order; a block is ("p", text), ("table", DataFrame) or ("code", text)."""
    c = card
    facts = (f"{c['origin']} — head {c['n']} x {c['d']}"
             + (f" ({c['tensor']})" if c.get("tensor") else "")
             + f", tied: {'yes' if c['tied'] else 'no' if c['tied'] is not None else 'not known'}"
             + f", stored {c['stored_type']}, {'with' if c['bias'] else 'no'} bias. "
             f"Checked in the box {c['box']} with eps {c['eps']:g} ({c['numeric_path']}); argmaxable {c['code']}; "
             + ", ".join(f"{k} {v:.1f} s" for k, v in c["seconds"].items()) + ".")
    out = [("", [("p", facts)])]
    counts = pd.DataFrame([c["counts"]])
    out.append(("Verdicts", [("p", "Every token of the vocabulary: argmaxable (a witness input where it wins, "
                                   "verifiable), unargmaxable (a certificate that it never wins strictly), or "
                                   "undecided (numerical trouble, never folded into either)."), ("table", counts)]))
    blocks = []
    if c["tie_groups"]:
        rows = [{"group": i + 1, "tokens": ", ".join(f"{t[0]} {shown(t[1])} ({t[2] or 'no type'})"
                                                   for t in g["members"]),
                 "greedy decoding emits": _fmt(g["greedy_emits"]) if g["greedy_emits"] is not None else "none"}
                for i, g in enumerate(c["tie_groups"])]
        blocks += [("p", f"{sum(len(g['members']) for g in c['tie_groups'])} tokens in {len(c['tie_groups'])} groups "
                         "of exactly equal rows: none wins strictly, but greedy decoding that breaks ties by the "
                         "first index (numpy.argmax, torch.argmax) still emits the lowest id of a group that is "
                         "argmaxable once merged."), ("table", pd.DataFrame(rows))]
    if c["unargmaxable_not_tied"]:
        shown_rows = c["unargmaxable_not_tied"][:LISTED]
        blocks += [("p", f"{len(c['unargmaxable_not_tied'])} unargmaxable tokens in no tie (inside the hull of the "
                         "others; a near-tie is within a few float32 units in the last place of its nearest row)"
                         + (f"; the first {LISTED} here, all of them in the JSON" if len(shown_rows) < len(
                             c["unargmaxable_not_tied"]) else "") + "."),
                   ("table", pd.DataFrame([[r[0], shown(r[1]), r[2], r[3], r[4], _fmt(r[5])] for r in shown_rows],
                                          columns=["id", "token", "type", "kind", "nearest row",
                                                   "largest difference"]))]
    if not blocks:
        blocks = [("p", "None: every token can be the argmax somewhere in the box.")]
    blocks.append(("p", "Ids greedy decoding can still emit though they never win strictly: "
                        + (", ".join(map(str, c["greedy_emits"])) or "none")
                        + ". Ids it can never emit: " + (", ".join(map(str, c["never_emitted"][:LISTED])) or "none")
                        + (" ..." if len(c["never_emitted"]) > LISTED else "") + "."))
    out.append(("Unargmaxable tokens", blocks))
    def rounds(h) -> str:  # the LP's rounds, and whether it stopped before its optimum
        return f"{h[11]}" + ("" if h[12] else " (limit)" if h[11] == c["lp_rounds"] else " (not converged)")

    hard = pd.DataFrame([[h[0], shown(h[1]), h[2], h[3], _fmt(h[4]), _fmt(h[5]), _fmt(h[9]), h[10], rounds(h),
                          _fmt(h[6]), _fmt(h[7]), "; ".join(h[8]) or "—"] for h in c["hardest"]],
                        columns=["id", "token", "type", "verdict", "radius >=", "radius <=", "witness's bound",
                                 "reflection steps", "LP rounds", "indicator", "norm percentile", "also flagged by"])
    stopped = sum(not h[12] and h[11] == c["lp_rounds"] for h in c["hardest"])
    limit = (f" {stopped} of these LPs stopped at the limit of {c['lp_rounds']} rounds before their optimum: the "
             "radius lies between their two bounds." if stopped else "")
    floor = c["others_at_least"]
    ratios = [h[4] / h[9] for h in c["hardest"] if h[9] and h[9] > 0 and np.isfinite(h[4])]
    gap = (f" Here the LP's radii are {min(ratios):.3g} to {max(ratios):.3g} times the witnesses' bounds: a witness "
           "found by reflection barely wins, so its bound can sit far below the radius. The list holds the tokens "
           "these two rules picked, each with both bounds, not a ranking of every radius." if ratios else "")
    cone = "" if c["bias"] else (" Without a bias every region is a cone, so its radius grows with the box.")
    out.append(("Hardest to reach", [
        ("p", "The radius of a token's region is that of the largest ball, centred in the box, where the token is "
              "the argmax (the Chebyshev radius)." + cone + " Every argmaxable token's radius is bounded from below "
              f"at its witness; the {c['refined']} smallest bounds were tightened there, and the Chebyshev LP bounded "
              f"from both sides the radii of {len(c['hardest'])} tokens: half with the smallest of those bounds, half "
              "those reflection needed most steps to reach. The LP's lower bound is a point whose distance to every "
              "other token's hyperplane is at least that, its upper bound dual weights over the other rows (LP "
              "duality)." + limit + gap),
        ("table", hard),
        ("p", "Every other argmaxable token's region holds a ball of radius at least "
              f"{_fmt(floor)} (certified at its witness)." if floor is not None else "No other argmaxable token.")]))
    s = c["signals"]
    rows = pd.DataFrame([{"signal": r["signal"], "tokens flagged": r["flagged"],
                          "of them unargmaxable": r["also_unargmaxable"], "flagged by this signal only": r["only_this"],
                          "named (strongest first)": ", ".join(f"{t[0]} {shown(t[1])}" for t in r["named"]) or "—"}
                         for r in s["rows"]])
    rho = s["spearman_with_radius"]
    ref = (f"{s['reference_tokens']} reference tokens ("
           + ", ".join(shown(t[1]) for t in s["reference_named"]) + (", ..." if s["reference_tokens"] > 5 else "")
           + ")" if s["reference_tokens"] else
           "no reference tokens (no token of GGUF type 'unused' or with a reserved name; name them with --unused): "
           "the unembedding indicator is not computed")
    out.append(("Under-training signals", [
        ("p", "Land & Bartolo (2024, 'Fishing for Magikarp') rank tokens by how close their unembedding row is to the "
              "mean row of known unused tokens once the first principal component is removed (cosine), and by row "
              f"norm; each ranking here flags its {100 * c['share']:g}% most suspicious tokens, as they verify theirs. "
              f"Reference: {ref}. Beside them: tie groups and near-ties, our certified verdicts, and the "
              f"{100 * c['share']:g}% smallest certified radius bounds."),
        ("table", rows),
        ("p", "Spearman rank correlation with the certified radius bound over the argmaxable tokens: indicator "
              f"{_fmt(rho['indicator'])}, row norm {_fmt(rho['norm'])}. The bound is the witness's, not the radius "
              "itself: a ranking by it is a ranking of what is certified.")]))
    out.append(("Token ids for tools that reset untrained rows", [
        ("p", "Unargmaxable ids can never be the strict argmax of the head, whatever the model computes before it; "
              "the ids greedy decoding never emits are those minus each tie group's emitted id."),
        ("code", json.dumps(c["ids"]))]))
    ev = c.get("evidence") or {}
    if ev:
        out.append(("Re-check it", [("code", "\n".join(ev.values()))]))
    return out


EXCERPT = ("", "Unargmaxable tokens", "Hardest to reach")  # the sections of the card an excerpt keeps


def markdown(card: dict, only: tuple[str, ...] | None = None, level: int = 1) -> str:
    """The card as Markdown; ``only`` keeps those sections (headings one level down from ``level``)."""
    lines = [f"{'#' * level} {markdown_cell(card['title'])}", ""]
    for heading, blocks in sections(card):
        if only is not None and heading not in only:
            continue
        if heading:
            lines += [f"{'#' * (level + 1)} {heading}", ""]
        for kind, value in blocks:
            if kind == "p":
                lines += [markdown_cell(value), ""]
            elif kind == "table":
                frame = value.map(lambda v: markdown_cell(str(v)))
                frame.columns = [markdown_cell(str(col)) for col in frame.columns]
                lines += [frame.to_markdown(index=False, disable_numparse=True), ""]
            else:
                lines += ["```", value, "```", ""]
    return "\n".join(lines)


STYLE = ("body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;line-height:1.45}"
         "table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ccc;padding:.2rem .5rem;"
         "text-align:left;vertical-align:top}th{background:#f3f3f3}pre{background:#f6f6f6;padding:.6rem;"
         "overflow-x:auto;white-space:pre-wrap;word-break:break-all}")


def html_page(card: dict) -> str:
    """The card as one self-contained HTML page (no script, no external resource)."""
    esc = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{esc(card['title'])}</title>",
             f"<style>{STYLE}</style></head><body>", f"<h1>{esc(card['title'])}</h1>"]
    for heading, blocks in sections(card):
        if heading:
            parts.append(f"<h2>{esc(heading)}</h2>")
        for kind, value in blocks:
            if kind == "p":
                parts.append(f"<p>{esc(value)}</p>")
            elif kind == "table":
                head = "".join(f"<th>{esc(str(col))}</th>" for col in value.columns)
                body = "".join("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in row) + "</tr>"
                               for row in value.itertuples(index=False))
                parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
            else:
                parts.append(f"<pre>{esc(value)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
