"""The audit card of one model: plain data (:func:`build_card`, JSON-ready, every field by name) rendered as
Markdown and as a self-contained HTML page (:func:`markdown`, :func:`html_page`), with the same sections in the same
order.

Token and model names come from the model's files and may hold anything (``|``, ``<script>``, newlines, control
characters, URLs, ``**``): every cell and paragraph is escaped for its format (:func:`md`, :func:`html.escape`), and
the re-check commands quote the paths as a shell needs (:func:`shell_quote`). A card stays readable whatever the
head: no Markdown line grows with the vocabulary (long lists are cut to a sample there, whole in the JSON, the
tokens table and the HTML page, which pages them).
"""

from __future__ import annotations

import html
import re
import shlex
import textwrap

import numpy as np
import pandas as pd

from argmaxable.core.result import ARGMAXABLE, STATUSES, UNARGMAXABLE
from argmaxable.provenance import code_version
from argmaxable.text import printable, shown

SIGNALS = {  # flag column -> what the card calls it
    "flag_indicator": "unembedding indicator (Land & Bartolo)",
    "flag_norm": "low row norm",
    "flag_tie": "tie or near-tie",
    "flag_unargmaxable": "unargmaxable (certified)",
    "flag_radius": "smallest certified radius bound",
}
SHORT = {"flag_indicator": "indicator", "flag_norm": "norm", "flag_tie": "tie", "flag_unargmaxable": "unargmaxable",
         "flag_radius": "radius"}
LISTED = 50  # rows of a long list the Markdown card shows (all of them in the JSON, the tokens table, the HTML page)
SAMPLE = 5  # tokens named per tie group on the Markdown card
NAME = 40  # characters a token's name takes in a Markdown cell (escaped), at most
WIDTH = 110  # characters of a Markdown paragraph line
PAGE = 200  # rows per page of a long HTML table
DECODING = ("An unargmaxable token is never the strict argmax of the head for any hidden state in the box: greedy "
            "decoding never emits it, except a tie group's lowest id, which greedy decoding (first index on ties: "
            "numpy.argmax, torch.argmax) emits on a tie; sampling still can emit every token, with the probability "
            "the softmax gives it.")


def _token(tokens: pd.DataFrame, i: int) -> dict:
    """A token by name: its id, its text and its type."""
    row = tokens.iloc[int(i)]
    return {"id": int(i), "token": str(row["token"]), "type": str(row["token_type"])}


def _box_text(settings: dict) -> str:
    lo = np.unique(np.asarray(settings.get("lower", []), dtype=np.float64))
    hi = np.unique(np.asarray(settings.get("upper", []), dtype=np.float64))
    if lo.size == 1 and hi.size == 1:
        if lo[0] == -hi[0]:
            return f"|x_j| <= {hi[0]:g}"
        return f"{lo[0]:g} <= x_j <= {hi[0]:g}"
    return f"per coordinate: lower in [{lo.min():g}, {lo.max():g}], upper in [{hi.min():g}, {hi.max():g}]"


def _number(v):
    """A JSON number (None for NaN)."""
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else v


def build_card(layer, name: str, result, lp, unarg: pd.DataFrame, groups: list, tokens: pd.DataFrame, *,
               settings: dict, seconds: dict, share: float, trip: pd.DataFrame | None = None,
               prompting=None, scores: list | None = None) -> dict:
    """The card's data: the model and its head, counts by verdict, the unargmaxable tokens in their tie groups and
    which ids greedy decoding still emits, the hardest tokens with both bounds, the signals compared, the round
    trip's classes crossed with the verdicts, the prompting test (``prompting``: :class:`~argmaxable.audit
    .prompting.Prompting`) with each signal's precision and recall (``scores``), one row per flagged token, the ids
    for the generation stacks, and how it was computed (box, eps, code version, seconds)."""
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
        tie_rows.append({"size": len(g), "members": [_token(tokens, i) for i in g],
                         "greedy_emits": emits[0] if emits else None})
    in_groups = {int(i) for g in groups for i in g}
    by_id = unarg.set_index("category") if len(unarg) else None
    inside = [{**_token(tokens, i), "kind": kind.get(int(i), "strictly inside"),
               "nearest": int(by_id.loc[i, "nearest"]), "largest_difference": float(by_id.loc[i, "distance"])}
              for i in unarg_ids if int(i) not in in_groups or kind.get(int(i)) != "tie"]
    hard = []
    for j in range(len(lp.items)):
        t = int(lp.items[j])
        row = tokens.iloc[t]
        hard.append({**_token(tokens, t), "verdict": str(lp.status[j]), "radius_at_least": float(lp.radius[j]),
                     "radius_at_most": float(lp.radius_upper[j]),
                     "indicator": _number(float(row["indicator"])), "norm_percentile": float(row["norm_percentile"]),
                     "also_flagged_by": [SIGNALS[c] for c in SIGNALS if c != "flag_radius" and bool(row[c])],
                     "witness_bound": float(row["radius"]),
                     "reflection_steps": int(result.steps[np.flatnonzero(result.items == t)[0]]),
                     "lp_rounds": int(lp.lp_rounds[j]), "lp_exact": bool(lp.radius_exact[j])})
    arg = np.flatnonzero(status == ARGMAXABLE)
    others = np.setdiff1d(result.items[arg], lp.items)
    others_floor = float(np.nanmin(result.radius[others])) if others.size else None
    never = sorted(set(unarg_ids.tolist()) - emitted)
    tie_never = sorted({int(m["id"]) for g in tie_rows for m in g["members"]} - emitted)
    card = {
        "title": f"Token audit: {name}",
        "model": name, "origin": layer.origin, "n": int(n), "d": int(d),
        "tied": getattr(layer, "tied", None), "stored_type": layer.precision or str(layer.W.dtype),
        "bias": layer.b is not None, "tensor": info.get("tensor"),
        "box": _box_text(settings), "eps": settings.get("eps"), "numeric_path": settings.get("numeric_path"),
        "decoding": DECODING,
        "code": code_version(), "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "counts": {s: int((status == s).sum()) for s in STATUSES},
        "tie_groups": tie_rows, "unargmaxable_not_tied": inside,
        "greedy_emits": sorted(emitted), "never_emitted": never,
        "hardest": hard, "others_at_least": others_floor, "share": share,
        "refined": int(settings.get("refine", 0)), "lp_rounds": settings.get("lp_rounds"),
        "signals": _compare(tokens, spearmanr),
        "round_trip": _round_trip(trip, status, tokens, {h["id"] for h in hard}) if trip is not None else None,
        "prompting": _prompting(prompting, scores) if prompting is not None else None,
        "flagged": _flagged(tokens, {h["id"]: h for h in hard}),
        "ids": {"unargmaxable": unarg_ids.tolist(), "never_emitted_by_greedy_decoding": never,
                "emitted_by_greedy_decoding_on_a_tie": sorted(emitted), "tie_never_emitted": tie_never,
                "flagged_by_indicator": np.flatnonzero(tokens["flag_indicator"]).tolist(),
                "under_trained_verified": (np.flatnonzero(tokens["under_trained"].fillna(False).to_numpy(dtype=bool))
                                           .tolist() if "under_trained" in tokens else [])},
        "evidence": {},
    }
    return card


def _round_trip(trip: pd.DataFrame, status: np.ndarray, tokens: pd.DataFrame, hardest: set) -> dict:
    """Tokens per round-trip class, and per class how many are unargmaxable, in a tie group, among the hardest
    tokens the LP bounded, or flagged by the smallest certified radius bounds."""
    from argmaxable.audit.roundtrip import CLASSES

    cls = trip["round_trip"].to_numpy()
    tie = tokens["tie_group"].to_numpy() >= 0
    small = tokens["flag_radius"].to_numpy(dtype=bool)
    hard = np.isin(np.arange(len(cls)), sorted(hardest))
    crossed = {c: {"tokens": int((cls == c).sum()), "unargmaxable": int(((cls == c) & (status == UNARGMAXABLE)).sum()),
                   "in_a_tie_group": int(((cls == c) & tie).sum()), "hardest_lp": int(((cls == c) & hard).sum()),
                   "smallest_radius_bounds": int(((cls == c) & small).sum())} for c in CLASSES}
    examples = {c: [{"id": int(i), "token": str(tokens.iloc[int(i)]["token"]),
                     "returned": str(trip.iloc[int(i)]["returned"])} for i in np.flatnonzero(cls == c)[:SAMPLE]]
                for c in CLASSES if c != "round-trips"}
    return {"classes": crossed, "examples": examples}


def _prompting(prompting, scores) -> dict:
    """The prompting test's summary: the run, the candidates' and the controls' rates, and the signals' scores."""
    from argmaxable.audit.prompting import UNDER_TRAINED

    table = prompting.table
    control = table["reason"].str.contains("control")
    cand = ~table["reason"].eq("control")

    def rate(mask) -> dict:
        k, m = int(mask.sum()), int((mask & table["under_trained"]).sum())
        return {"tested": k, "under_trained": m, "rate": m / k if k else None}

    by_reason = {r: rate(table["reason"].str.split(",").apply(lambda v, r=r: r in v))
                 for r in ("indicator", "norm", "radius", "unargmaxable", "control")}
    return {**prompting.summary(), "threshold": UNDER_TRAINED, "steps": prompting.steps, "prompts": prompting.prompts,
            "candidates": rate(cand), "controls": rate(control), "by_list": by_reason, "signals_at_share": scores or []}


def _flagged(tokens: pd.DataFrame, hardest: dict) -> list[dict]:
    """One record per flagged token (by any signal, or tested by the prompting test and verified under-trained):
    its verdict and radius bounds, tie group, signals, round-trip class and prompting probability."""
    flags = tokens[list(SIGNALS)].to_numpy(dtype=bool)
    mark = flags.any(axis=1)
    if "under_trained" in tokens:
        mark |= tokens["under_trained"].fillna(False).to_numpy(dtype=bool)
    rows = []
    for i in np.flatnonzero(mark):
        r = tokens.iloc[int(i)]
        h = hardest.get(int(i))
        prob = r.get("max_prob", np.nan)
        rows.append({
            "id": int(i), "token": str(r["token"]), "type": str(r["token_type"]), "verdict": str(r["status"]),
            "radius_at_least": _number(float(h["radius_at_least"] if h else r["radius"])),
            "radius_at_most": h["radius_at_most"] if h else None,
            "tie_group": int(r["tie_group"]) if r["tie_group"] >= 0 else None,
            "near_tie": int(r["near_tie"]) if r["near_tie"] >= 0 else None,
            "signals": [SHORT[c] for c, f in zip(SIGNALS, flags[i], strict=True) if f],
            "indicator": _number(float(r["indicator"])), "norm_percentile": float(r["norm_percentile"]),
            "round_trip": r.get("round_trip") if isinstance(r.get("round_trip"), str) else None,
            "returned": r.get("returned") if isinstance(r.get("returned"), str) and r.get("returned") else None,
            "max_prob": _number(float(prob)) if prob is not None else None,
            "under_trained": bool(r["under_trained"]) if "under_trained" in tokens and r["under_trained"] is not None
            and not pd.isna(r["under_trained"]) else None})
    return rows


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
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _cut(text: str, limit: int = NAME) -> str:
    """A name shown whole where it takes at most ``limit`` characters on the Markdown card (escaped, :func:`md`),
    else cut there with an ellipsis."""
    text = shown(text)
    used = 0
    for k, ch in enumerate(text):
        used += len(md(ch))
        if used > limit - 1 and k < len(text) - 1:
            return text[:k] + "…"
    return text


def _named(t: dict) -> str:
    return f"{t['id']} {_cut(t['token'])}"


def _names(items: list[dict], total: int | None = None) -> str:
    """A few tokens by id and name, and how many more."""
    total = len(items) if total is None else total
    shown_items = items[:SAMPLE]
    more = total - len(shown_items)
    return ", ".join(_named(t) for t in shown_items) + (f" and {more} more" if more > 0 else "")


def shell_quote(text: str) -> str:
    """``text`` as one shell word: :func:`shlex.quote`, or where it holds control characters (a newline would end
    the command) bash's ``$'...'`` with every such character as ``\\xNN``."""
    text = str(text)
    if not re.search(r"[\x00-\x1f\x7f]", text):
        return shlex.quote(text)
    body = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7f else "\\\\" if c == "\\" else "\\'" if c == "'"
                   else c for c in text)
    return f"$'{body}'"


def sections(card: dict, whole: bool = False) -> list[tuple[str, list]]:
    """The card as (heading, blocks) in order; a block is ("p", text), ("table", DataFrame) or ("code", text).
    ``whole``: long lists whole (the HTML page, which pages them), else cut to :data:`LISTED` rows."""
    c = card
    facts = (f"{c['origin']} — head {c['n']} x {c['d']}"
             + (f" ({c['tensor']})" if c.get("tensor") else "")
             + f", tied: {'yes' if c['tied'] else 'no' if c['tied'] is not None else 'not known'}"
             + f", stored {c['stored_type']}, {'with' if c['bias'] else 'no'} bias. "
             f"Checked in the box {c['box']} with eps {c['eps']:g} ({c['numeric_path']}); argmaxable {c['code']}; "
             + ", ".join(f"{k} {v:.1f} s" for k, v in c["seconds"].items()) + ".")
    decoding = c.get("decoding", DECODING)
    out = [("", [("p", facts), ("p", f"What the verdicts mean for decoding, in the box {c['box']}: "
                                     + decoding[0].lower() + decoding[1:])])]
    counts = pd.DataFrame([c["counts"]])
    out.append(("Verdicts", [("p", "Every token of the vocabulary: argmaxable (a witness input where it wins, "
                                   "verifiable), unargmaxable (a certificate that it never wins strictly), or "
                                   "undecided (numerical trouble, never folded into either)."), ("table", counts)]))
    limit = None if whole else LISTED
    blocks = []
    if c["tie_groups"]:
        groups = c["tie_groups"]
        rows = [{"group": i + 1, "size": g["size"], "tokens": _names(g["members"]),
                 "greedy decoding emits on a tie": (_named(next(m for m in g["members"]
                                                                if m["id"] == g["greedy_emits"]))
                                                    if g["greedy_emits"] is not None else "none")}
                for i, g in enumerate(groups[:limit])]
        blocks += [("p", f"{sum(g['size'] for g in groups)} tokens in {len(groups)} groups of exactly equal rows: "
                         "none wins strictly, but greedy decoding that breaks ties by the first index "
                         "(numpy.argmax, torch.argmax) still emits the lowest id of a group that is argmaxable once "
                         "merged. Each group is named by a sample of its tokens here; every member is listed in the "
                         "JSON card (tie_groups), the tokens table (tie_group) and the HTML card"
                         + (f"; the first {LISTED} groups here" if len(rows) < len(groups) else "") + "."),
                   ("table", pd.DataFrame(rows))]
        if whole:
            members = pd.DataFrame([{"group": i + 1, "id": m["id"], "token": shown(m["token"]), "type": m["type"],
                                     "greedy decoding emits it on a tie": m["id"] == g["greedy_emits"]}
                                    for i, g in enumerate(groups) for m in g["members"]])
            blocks += [("p", "Every member of every tie group:"), ("table", members)]
    if c["unargmaxable_not_tied"]:
        inside = c["unargmaxable_not_tied"]
        rows = inside[:limit]
        blocks += [("p", f"{len(inside)} unargmaxable tokens in no tie (inside the hull of the others; a near-tie is "
                         "within a few float32 units in the last place of its nearest row)"
                         + (f"; the first {LISTED} here, all of them in the JSON" if len(rows) < len(inside) else "")
                         + "."),
                   ("table", pd.DataFrame([[r["id"], _cut(r["token"]), r["type"], r["kind"], r["nearest"],
                                            _fmt(r["largest_difference"])] for r in rows],
                                          columns=["id", "token", "type", "kind", "nearest row",
                                                   "largest difference"]))]
    if not blocks:
        blocks = [("p", "None: every token can be the argmax somewhere in the box.")]

    def ids(values: list) -> str:
        cut = values if whole else values[:LISTED]
        return (", ".join(map(str, cut)) or "none") + (f" ... ({len(values)} in all, every one in the JSON)"
                                                       if len(cut) < len(values) else "")

    blocks.append(("p", "Emitted by greedy decoding on a tie (they never win strictly): "
                        + ids(c["greedy_emits"]) + ". Never emitted by greedy decoding: " + ids(c["never_emitted"])
                        + "."))
    out.append(("Unargmaxable tokens", blocks))

    def rounds(h) -> str:  # the LP's rounds, and whether it stopped before its optimum
        return f"{h['lp_rounds']}" + ("" if h["lp_exact"] else " (limit)" if h["lp_rounds"] == c["lp_rounds"]
                                      else " (not converged)")

    hard = pd.DataFrame([[h["id"], _cut(h["token"]), h["type"], h["verdict"], _fmt(h["radius_at_least"]),
                          _fmt(h["radius_at_most"]), _fmt(h["witness_bound"]), h["reflection_steps"], rounds(h),
                          _fmt(h["indicator"]), _fmt(h["norm_percentile"]), "; ".join(h["also_flagged_by"]) or "—"]
                         for h in c["hardest"]],
                        columns=["id", "token", "type", "verdict", "radius >=", "radius <=", "witness's bound",
                                 "reflection steps", "LP rounds", "indicator", "norm percentile", "also flagged by"])
    stopped = sum(not h["lp_exact"] and h["lp_rounds"] == c["lp_rounds"] for h in c["hardest"])
    limit_text = (f" {stopped} of these LPs stopped at the limit of {c['lp_rounds']} rounds before their optimum: "
                  "the radius lies between their two bounds." if stopped else "")
    floor = c["others_at_least"]
    ratios = [h["radius_at_least"] / h["witness_bound"] for h in c["hardest"]
              if h["witness_bound"] and h["witness_bound"] > 0 and np.isfinite(h["radius_at_least"])]
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
              "duality)." + limit_text + gap),
        ("table", hard),
        ("p", "Every other argmaxable token's region holds a ball of radius at least "
              f"{_fmt(floor)} (certified at its witness)." if floor is not None else "No other argmaxable token.")]))
    s = c["signals"]
    rows = pd.DataFrame([{"signal": r["signal"], "tokens flagged": r["flagged"],
                          "of them unargmaxable": r["also_unargmaxable"], "flagged by this signal only": r["only_this"],
                          "named (strongest first)": _names(r["named"], r["only_this"]) or "—"}
                         for r in s["rows"]])
    rho = s["spearman_with_radius"]
    ref = (f"{s['reference_tokens']} reference tokens ("
           + ", ".join(_cut(t["token"]) for t in s["reference_named"]) + (", ..." if s["reference_tokens"] > 5 else "")
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
    if c.get("round_trip"):
        out.append(("Tokenizer round trip", _round_trip_blocks(c["round_trip"])))
    if c.get("prompting"):
        out.append(("Prompting test", _prompting_blocks(c["prompting"], c["share"])))
    if c.get("flagged"):
        out.append(("Flagged tokens", _flagged_blocks(c["flagged"], limit)))
    idtext = ("Unargmaxable ids can never be the strict argmax of the head, whatever the model computes before it; "
              "the ids greedy decoding never emits are those minus each tie group's emitted id. `argmaxable audit "
              "--export transformers|llama.cpp|vllm` writes the verified under-trained ids and the tie members "
              "greedy decoding never emits in each generation stack's form.")
    out.append(("Token ids for generation stacks", [("p", idtext), ("code", _wrapped_ids(c["ids"], whole))]))
    ev = c.get("evidence") or {}
    if ev:
        out.append(("Re-check it", [("code", "\n".join(ev.values()))]))
    return out


def _round_trip_blocks(trip: dict) -> list:
    rows = pd.DataFrame([{"class": k, **v} for k, v in trip["classes"].items()]).rename(columns={
        "in_a_tie_group": "in a tie group", "hardest_lp": "among the hardest (LP)",
        "smallest_radius_bounds": "smallest radius bounds"})
    examples = "; ".join(f"{k}: " + ", ".join(f"{_named(t)}" + (f" (comes back as {t['returned']})"
                                                                 if k == "unreachable" and t["returned"] else "")
                                              for t in v)
                         for k, v in trip["examples"].items() if v)
    return [("p", "Each token decoded on its own and encoded again (Land & Bartolo 2024, §2.3): it round-trips (the "
                  "same id comes back, alone or after an anchor text), is unreachable from text (other ids come "
                  "back), is a partial UTF-8 sequence or a single byte (only part of a longer text produces it), or "
                  "is a special or control token. Crossed with the certified verdicts:"),
            ("table", rows),
            ("p", ("Examples: " + examples + ".") if examples else "Every ordinary token round-trips.")]


def _prompting_blocks(p: dict, share: float) -> list:
    prompts = "; ".join(f"{k}: {v}" for k, v in (p.get("prompts") or {}).items())
    lists = pd.DataFrame([{"list": k, "tested": v["tested"], "under-trained (verified)": v["under_trained"],
                           "rate": _fmt(v["rate"])} for k, v in p["by_list"].items()])
    scores = pd.DataFrame([{"signal": r["signal"], "flagged and tested": r["flagged_and_tested"],
                            "verified among them": r["verified_among_them"], "precision": _fmt(r["precision"]),
                            "recall": _fmt(r["recall"])} for r in p["signals_at_share"]])
    cand, ctrl = p["candidates"], p["controls"]
    return [
        ("p", f"The model itself, run by transformers on the CPU in float32: each candidate put by its id (never "
              f"through the tokenizer) into prompts that ask the model to copy, repeat or explain it (here "
              f"{prompts}), "
              f"{p['steps']} greedy steps each; a token whose largest probability over prompts and generated "
              f"positions stays below {p['threshold']:g} is under-trained (verified). Candidates: the "
              f"{100 * share:g}% each signal flags and every unargmaxable token outside a tie group; controls: "
              "ordinary tokens drawn at random. "
              f"{cand['under_trained']} of {cand['tested']} candidates under-trained ({_fmt(cand['rate'])}), "
              f"{ctrl['under_trained']} of {ctrl['tested']} controls ({_fmt(ctrl['rate'])}). "
              f"Cost: {_fmt(p['seconds_per_token'])} s a token, as each was computed; this run {p['seconds']:.1f} s "
              f"for {p['runs']} prompt runs ({p['resumed']} tokens read back from an earlier run)."),
        ("table", lists),
        ("p", f"The certificate held against the model: {p['positions_checked']} positions' greedy argmax checked, "
              "no certified-unargmaxable token the strict argmax at any of them (a contradiction stops the audit)"
              + (f"; at {p['rounding_ties']} a certified-unargmaxable token came first with another row at least "
                 "as high in float64 (an exact tie, or float32 rounding)" if p["rounding_ties"] else "")
              + f". The model's head against the audited one: largest difference {_fmt(p['head_difference'])}."),
        ("p", f"How each signal's {100 * share:g}% finds the verified set (tested tokens under-trained): precision "
              "(verified among those it flags) and recall (of the verified, the share it flags)."),
        ("table", scores)]


def _flagged_blocks(rows: list[dict], limit: int | None) -> list:
    order = sorted(rows, key=lambda r: (not r["under_trained"], r["max_prob"] if r["max_prob"] is not None else 2,
                                        r["radius_at_least"] if r["radius_at_least"] is not None else -1))
    cut = order[:limit]
    frame = pd.DataFrame([{"id": r["id"], "token": _cut(r["token"]), "type": r["type"], "verdict": r["verdict"],
                           "radius >=": _fmt(r["radius_at_least"]), "radius <=": _fmt(r["radius_at_most"]),
                           "tie group": _fmt(r["tie_group"]), "signals": " ".join(r["signals"]) or "—",
                           "round trip": r["round_trip"] or "—", "largest probability": _fmt(r["max_prob"]),
                           "under-trained (verified)": _fmt(r["under_trained"])} for r in cut])
    return [("p", f"{len(rows)} tokens flagged by a signal or verified under-trained, verified ones first"
                  + (f"; the first {len(cut)} here, every one in the JSON card (flagged), the tokens table and "
                     "the HTML card" if len(cut) < len(rows) else "") + "."), ("table", frame)]


def _wrapped_ids(ids: dict, whole: bool) -> str:
    """The id lists as JSON, 20 ids a line (cut to :data:`LISTED` on the Markdown card)."""
    lines = ["{"]
    for k, (key, values) in enumerate(ids.items()):
        cut = values if whole else values[:LISTED]
        body = [", ".join(map(str, cut[s : s + 20])) for s in range(0, len(cut), 20)]
        end = "," if k < len(ids) - 1 else ""
        note = "" if len(cut) == len(values) else f"  (first {len(cut)} of {len(values)}: every one in the JSON)"
        lines.append(f' "{key}": [' + ("" if body else "]" + end + note))
        if body:
            lines += [f"  {b}," for b in body[:-1]] + [f"  {body[-1]}", f" ]{end}{note}"]
    lines.append("}")
    return "\n".join(lines)


EXCERPT = ("", "Unargmaxable tokens", "Hardest to reach")  # the sections of the card an excerpt keeps
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;", "\\": "&#92;", "[": "&#91;", "]": "&#93;",
            "`": "&#96;", "*": "&#42;", "_": "&#95;", "~": "&#126;", "@": "&#64;", "#": "&#35;"}
_ESCAPED = re.compile("[" + re.escape("".join(_ESCAPES)) + "]")
_LINE_START = re.compile(r"^(\s*)([-+=>]|\d+[.)])")


def md(text) -> str:
    """``text`` for the Markdown card: escaped as :func:`argmaxable.text.markdown_cell` escapes it, and beyond it
    what makes emphasis, strikethrough, headings and autolinks (``* _ ~ # @``, ``://``, ``www.``) as character
    references: a token such as ``**x**`` or ``http://a.b`` shows as the text it is."""
    out = printable(_ESCAPED.sub(lambda m: _ESCAPES[m.group()], str(text)))
    return out.replace("://", ":&#47;&#47;").replace("www.", "www&#46;")


def _paragraph(text: str) -> list[str]:
    """A paragraph as lines of at most :data:`WIDTH` characters (words longer than that stay whole), none starting
    with what would make it a list, a quote or a heading's underline."""
    lines = textwrap.wrap(md(text), WIDTH, break_long_words=False, break_on_hyphens=False) or [""]
    return [_LINE_START.sub(lambda m: m.group(1) + "".join(f"&#{ord(ch)};" for ch in m.group(2)), line)
            for line in lines]


def _md_table(frame: pd.DataFrame) -> str:
    """A GitHub table, unpadded: a row is as long as its cells, never as the longest cell of its column."""
    head = "| " + " | ".join(md(str(col)) for col in frame.columns) + " |"
    rule = "|" + "|".join(" --- " for _ in frame.columns) + "|"
    body = ["| " + " | ".join(md(str(v)) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def _fence(value: str) -> str:
    """A code fence longer than any run of backticks in ``value``."""
    longest = max((len(m) for m in re.findall(r"`+", value)), default=0)
    return "`" * max(3, longest + 1)


def markdown(card: dict, only: tuple[str, ...] | None = None, level: int = 1) -> str:
    """The card as Markdown; ``only`` keeps those sections (headings one level down from ``level``)."""
    title = card["title"] if len(card["title"]) <= 200 else card["title"][:199] + "…"
    lines = [f"{'#' * level} {md(title)}", ""]
    for heading, blocks in sections(card):
        if only is not None and heading not in only:
            continue
        if heading:
            lines += [f"{'#' * (level + 1)} {heading}", ""]
        for kind, value in blocks:
            if kind == "p":
                lines += [*_paragraph(value), ""]
            elif kind == "table":
                lines += [_md_table(value), ""]
            else:
                value = "\n".join(printable(line) for line in value.split("\n"))
                fence = _fence(value)
                lines += [fence, value, fence, ""]
    return "\n".join(lines)


STYLE = ("body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;line-height:1.45}"
         "table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ccc;padding:.2rem .5rem;"
         "text-align:left;vertical-align:top}th{background:#f3f3f3}pre{background:#f6f6f6;padding:.6rem;"
         "overflow-x:auto;white-space:pre-wrap;word-break:break-all}details{margin:.2rem 0}")


def _html_table(frame: pd.DataFrame) -> str:
    """A table; one of more than :data:`PAGE` rows as pages, each folded (details) but the first."""
    esc = html.escape
    head = "<thead><tr>" + "".join(f"<th>{esc(str(col))}</th>" for col in frame.columns) + "</tr></thead>"
    rows = ["<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in row) + "</tr>" for row in frame.itertuples(index=False)]
    if len(rows) <= PAGE:
        return f"<table>{head}<tbody>{''.join(rows)}</tbody></table>"
    pages = []
    for s in range(0, len(rows), PAGE):
        table = f"<table>{head}<tbody>{''.join(rows[s : s + PAGE])}</tbody></table>"
        label = f"rows {s + 1}-{min(s + PAGE, len(rows))} of {len(rows)}"
        pages.append(f"<details{' open' if s == 0 else ''}><summary>{label}</summary>{table}</details>")
    return "\n".join(pages)


def html_page(card: dict) -> str:
    """The card as one self-contained HTML page (no script, no external resource), long lists whole and paged."""
    esc = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{esc(card['title'])}</title>",
             f"<style>{STYLE}</style></head><body>", f"<h1>{esc(card['title'])}</h1>"]
    for heading, blocks in sections(card, whole=True):
        if heading:
            parts.append(f"<h2>{esc(heading)}</h2>")
        for kind, value in blocks:
            if kind == "p":
                parts.append(f"<p>{esc(value)}</p>")
            elif kind == "table":
                parts.append(_html_table(value))
            else:
                parts.append(f"<pre>{esc(value)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
