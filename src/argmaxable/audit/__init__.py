"""A token audit of one model's softmax head: every token's verdict and certified reachability, its ties, and the
under-training signals of its weights, on one card (:mod:`argmaxable.audit.card`).

:func:`audit_layer` runs, in order:

1. the check of the whole vocabulary (:func:`argmaxable.check_categories`), whose ``radius`` is a certified lower
   bound on each argmaxable token's region, from its witness; a head without bias has cones for regions, so each
   witness is moved out by a power of two (exact) as far as the box allows, and its bound with it;
2. tie groups of equal rows, which ids greedy decoding (first index on ties) still emits, near-ties
   (:mod:`argmaxable.audit.signals`), and each unargmaxable token's kind (:func:`argmaxable.detect.study
   .split_unargmaxable`);
3. the hardest tokens (:func:`argmaxable.audit.reach.hardest`): the bounds of the ``refine`` smallest tightened at
   their witnesses, both bounds of the ``hardest`` smallest from the Chebyshev LP (at most ``lp_rounds`` rounds
   each: the bounds it reached if it stops before the optimum);
4. the indicators of Land & Bartolo (2024) and the row norm, each flagging :data:`~argmaxable.audit.signals.FLAG_SHARE`
   of the vocabulary, compared with the verdicts and radii;
5. with the model's tokenizer, the round trip of every token (:mod:`argmaxable.audit.roundtrip`); with the model
   itself, the prompting test of the candidates, and every position it computes held to the certificate
   (:mod:`argmaxable.audit.prompting`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from argmaxable.audit.prompting import CONTROLS
from argmaxable.audit.reach import hardest as hardest_tokens
from argmaxable.audit.signals import FLAG_SHARE, flagged, near_ties, reference_tokens, unembedding_indicator
from argmaxable.core import CheckResult, check_categories
from argmaxable.core.box import make_box
from argmaxable.core.result import ARGMAXABLE, UNARGMAXABLE
from argmaxable.core.settings import BOUND, EPS, PATIENCE, SOLVER, WORKERS
from argmaxable.detect.study import norm_percentiles, split_unargmaxable, tie_groups

HARDEST = 6  # tokens whose radius the LP bounds from both sides (one LP over the whole head each)
REFINE = 128  # tokens whose lower bound is tightened at its witness first
# constraint-generation rounds of each hardest token's LP, at most: SmolLM2's and Gemma-3's converge within them,
# Qwen2.5-Coder's need 24-26 and minutes (benchmarks/RESULTS.md, "The audit's LPs capped")
LP_ROUNDS = 10
NAMED = 10  # tokens named per signal among those only it flags


@dataclass
class Audit:
    """What :func:`audit_layer` found: the card's data (plain values), the whole vocabulary's result (refined radii,
    witnesses moved into the box), the LP's result for the hardest tokens, per token its signals, and per
    unargmaxable token its kind (:func:`argmaxable.detect.study.split_unargmaxable`)."""

    card: dict
    result: CheckResult
    hardest: CheckResult
    tokens: pd.DataFrame = field(repr=False)
    unargmaxable: pd.DataFrame = field(repr=False)


def scale_witnesses(result: CheckResult, box) -> np.ndarray:
    """For a head without bias (regions are cones): multiply each argmaxable witness, in place, by the largest power
    of two that keeps it in the box, and its radius with it (both exactly: distances to hyperplanes through the
    origin scale with the point). Returns the factors (1 where a witness did not move)."""
    lo, hi = box
    X = result.witness
    factor = np.ones(len(result.items))
    arg = np.flatnonzero((result.status == ARGMAXABLE) & np.isfinite(result.radius))
    for s in range(0, len(arg), 8192):
        k = arg[s : s + 8192]
        x = np.asarray(X[k], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(x > 0, hi / x, np.where(x < 0, lo / x, np.inf)).min(axis=1)
        exp = np.floor(np.log2(room * (1 - 2.0**-40)))
        f = np.where(np.isfinite(exp) & (exp > 0), np.ldexp(1.0, np.clip(exp, 0, 1000).astype(int)), 1.0)
        moved = X[k] * f[:, None].astype(X.dtype)
        fits = ((moved >= lo) & (moved <= hi)).all(axis=1)
        f = np.where(fits, f, 1.0)
        X[k[fits]] = moved[fits]
        factor[k] = f
    result.radius[arg] *= factor[arg]
    return factor


def audit_layer(layer, *, name: str | None = None, bound: float = BOUND, lower=None, upper=None, eps: float = EPS,
                patience: int = PATIENCE, solver: str = SOLVER, workers: int = WORKERS, hardest: int = HARDEST,
                refine: int = REFINE, lp_rounds: int | None = LP_ROUNDS, unused: str | None = None,
                share: float = FLAG_SHARE, progress: bool = False, result: CheckResult | None = None,
                tokenizer=None, model=None, controls: int = CONTROLS, steps: int | None = None,
                batch: int | None = None, state=None, seed: int = 0, prompts=None) -> Audit:
    """Audit the head ``layer`` (:class:`argmaxable.detect.loaders.Layer`): see the module docstring.

    Parameters
    ----------
    layer : Layer
        W (n, d), b, tokens, token types, and what the file says of the head (``info``, ``tied``, ``precision``).
    bound, lower, upper, eps, patience, solver, workers, progress
        As in :func:`argmaxable.check_categories`.
    hardest, refine : int
        Tokens the LP bounds from both sides; tokens whose bound is tightened at the witness first.
    lp_rounds : int or None
        The most constraint-generation rounds of each of those LPs (None: to the optimum). On a wide head whose
        hardest tokens have hundreds of active rows (Qwen2.5-Coder's, d = 896) each round re-solves a dense basis,
        so the LP to its optimum costs minutes a token; one stopped earlier keeps both certified bounds it reached.
    unused : str, optional
        The reference tokens of the unembedding indicator (:func:`~argmaxable.audit.signals.reference_tokens`).
    share : float
        The share of the vocabulary each signal flags.
    result : CheckResult, optional
        A check of the whole vocabulary in this box (the pipeline's, from its evidence): not run again; its witnesses
        and radii are moved in place (:func:`scale_witnesses`).
    tokenizer : transformers tokenizer, optional
        The model's own: every token's round trip (:func:`~argmaxable.audit.roundtrip.round_trip`), and the
        prompts' ids where ``model`` is given.
    model : transformers causal LM, optional
        The whole model: the prompting test of the candidates (:func:`~argmaxable.audit.prompting
        .select_candidates`, ``controls`` random ordinary tokens drawn with ``seed``), ``steps`` greedy steps,
        ``batch`` candidates at once, resumable from ``state``, with the ``prompts`` named (default
        :data:`~argmaxable.audit.prompting.DEFAULT_PROMPTS`); a :class:`~argmaxable.audit.prompting.Contradiction`
        stops the audit.
    """
    W, b = layer.W, layer.b
    n, d = W.shape
    seconds = {}
    t0 = time.perf_counter()
    if result is None:
        result = check_categories(W, b=b, bound=bound, lower=lower, upper=upper, eps=eps, patience=patience,
                                  solver=solver, workers=workers, progress=progress)
    seconds["check"] = time.perf_counter() - t0
    settings = {**result.settings, "patience": patience, "solver": solver, "workers": workers, "refine": refine,
                "lp_rounds": lp_rounds}
    box = make_box(d, bound, lower, upper)
    if b is None or not np.any(b):
        scale_witnesses(result, box)
    t0 = time.perf_counter()
    refined, lp = hardest_tokens(result, W, b, hardest, refine=refine, settings=settings, progress=progress)
    seconds["hardest"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    groups = tie_groups(W, b)
    frame = pd.DataFrame({"box": "paper", "category": result.items, "status": result.status,
                          "token": _names(layer.tokens, n), "token_type": _names(layer.token_types, n)})
    unarg = split_unargmaxable(layer, frame, {"paper": {"lower": lower, "upper": upper}},
                               {"bound": bound, "patience": patience, "eps": eps, "solver": solver,
                                "workers": workers}, groups)
    tokens = signals(layer, refined, groups, unused=unused, share=share)
    seconds["signals"] = time.perf_counter() - t0
    trip = prompting = scores = None
    if tokenizer is not None:
        from argmaxable.audit.roundtrip import round_trip

        t0 = time.perf_counter()
        trip = round_trip(tokenizer, n, layer.token_types)
        tokens["round_trip"], tokens["returned"] = trip["round_trip"].to_numpy(), trip["returned"].to_numpy()
        seconds["round trip"] = time.perf_counter() - t0
    if model is not None:
        prompting, scores = _prompting(layer, model, tokenizer, tokens, unarg, trip, controls=controls, steps=steps,
                                       batch=batch, state=state, seed=seed, progress=progress, prompts=prompts)
        seconds["prompting"] = prompting.seconds
    from argmaxable.audit.card import build_card

    card = build_card(layer, name or layer.origin, refined, lp, unarg, groups, tokens, settings=settings,
                      seconds=seconds, share=share, trip=trip, prompting=prompting, scores=scores)
    return Audit(card, refined, lp, tokens, unarg)


def _prompting(layer, model, tokenizer, tokens: pd.DataFrame, unarg: pd.DataFrame, trip, *, controls: int,
               steps: int | None, batch: int | None, state, seed: int, progress: bool, prompts=None):
    """The prompting test of the audit's candidates, its results merged into ``tokens`` (``max_prob``,
    ``p_<prompt>``, ``greedy_emitted``, ``under_trained``; NaN where a token was not tested), and each signal's
    precision and recall against the verified set."""
    from argmaxable.audit import prompting as pt
    from argmaxable.text import shown

    if tokenizer is None:
        raise ValueError("the prompting test needs the model's tokenizer for its prompts")
    emits = unarg.loc[unarg["emitted"], "category"].astype(int).tolist() if len(unarg) else []
    forbidden = pt.forbidden_tokens(tokens["status"].to_numpy(), emits)
    candidates = pt.select_candidates(tokens, controls=controls, seed=seed, trip=trip)
    names = tokens["token"].astype(str).to_numpy()
    chosen = pt.chosen_prompts(prompts)
    run = pt.prompt_test(model, pt.prompt_ids(tokenizer, chosen), candidates, forbidden, steps=steps or pt.STEPS,
                         batch=batch or pt.BATCH, state=state, progress=progress,
                         names=lambda i: shown(names[i]) if 0 <= i < len(names) else "", W=layer.W)
    run.prompts = {k: f"{request} / reply begun with {reply}" for k, (request, reply) in chosen.items()}
    merged = tokens[["category"]].merge(run.table.drop(columns="reason"), on="category", how="left")
    for col in merged.columns[1:]:
        tokens[col] = merged[col].to_numpy()
    tokens["prompt_reason"] = tokens[["category"]].merge(run.table[["category", "reason"]], on="category",
                                                         how="left")["reason"].fillna("").to_numpy()
    return run, pt.signal_scores(tokens, run.table)


def _names(values, n: int) -> list[str]:
    return [""] * n if values is None else [str(v) for v in values]


def signals(layer, result: CheckResult, groups: list[np.ndarray], *, unused: str | None = None,
            share: float = FLAG_SHARE) -> pd.DataFrame:
    """One row per token: its verdict and certified radius bound, norm and norm percentile, tie group, nearest
    near-tie, the unembedding indicator (NaN without reference tokens) and the flags of each signal:
    ``flag_indicator`` (the ``share`` most like the unused tokens), ``flag_norm`` (the ``share`` of smallest norms),
    ``flag_tie`` (in a tie group or a near-tie), ``flag_unargmaxable`` and ``flag_radius`` (the ``share`` of
    argmaxable tokens with the smallest certified bound)."""
    W, b = layer.W, layer.b
    n = W.shape[0]
    norms, pct = norm_percentiles(W)
    group = np.full(n, -1)
    for g in groups:
        group[g] = g[0]
    pairs, _ = near_ties(W, b)
    near = np.full(n, -1)
    near[pairs[:, 0]], near[pairs[:, 1]] = pairs[:, 1], pairs[:, 0]
    reference, _ = reference_tokens(n, layer.tokens, layer.token_types, unused)
    indicator = unembedding_indicator(W, reference) if reference.size else np.full(n, np.nan)
    status = np.asarray(result.status)
    radius = np.where(status == ARGMAXABLE, result.radius, np.nan)
    out = pd.DataFrame({
        "category": np.arange(n), "token": _names(layer.tokens, n), "token_type": _names(layer.token_types, n),
        "status": status, "radius": radius, "norm": norms, "norm_percentile": pct, "tie_group": group,
        "near_tie": near, "indicator": indicator, "reference": np.isin(np.arange(n), reference)})
    out["flag_indicator"] = flagged(indicator, share) if reference.size else False
    out["flag_norm"] = flagged(norms, share, largest=False)
    out["flag_tie"] = (group >= 0) | (near >= 0)
    out["flag_unargmaxable"] = status == UNARGMAXABLE
    out["flag_radius"] = flagged(radius, share, largest=False)
    return out


EVIDENCE = ("compact", "full", "none")  # how much of the evidence an audit or a check keeps


def outputs(prefix) -> dict:
    """The files an audit writes beside ``prefix``: the card (Markdown, HTML, JSON), the per-token table, and the
    evidence of the whole vocabulary and of the hardest tokens."""
    from pathlib import Path

    prefix = Path(prefix)
    return {key: prefix.with_name(prefix.name + suffix) for key, suffix in (
        ("md", ".md"), ("html", ".html"), ("json", ".json"), ("tokens", ".tokens.parquet"),
        ("evidence", ".evidence.npz"), ("hardest", ".hardest.evidence.npz"))}


def write_audit(audit: Audit, prefix, W, *, evidence: str = "compact", model: str = "MODEL", config=None,
                inputs=()) -> dict:
    """Write the card (``.md``, ``.html``, ``.json``), the per-token table (``.tokens.parquet``) and the evidence
    (``.evidence.npz``: the whole vocabulary's, compact (start-point witnesses made again from the layer) or full, or
    none; ``.hardest.evidence.npz``: the hardest tokens' LP bounds) as one unit (renamed together). ``model`` is how
    the card's re-check commands name the model. Returns the paths written."""
    import json

    from argmaxable.audit.card import html_page, markdown
    from argmaxable.provenance import write_table

    if evidence not in EVIDENCE:
        raise ValueError(f"evidence must be one of {', '.join(EVIDENCE)}; got {evidence!r}")
    from argmaxable.audit.card import shell_quote

    paths = outputs(prefix)
    card = audit.card
    card["evidence"] = {"hardest": f"argmaxable verify {shell_quote(paths['hardest'])} {shell_quote(model)}"}
    if evidence != "none":
        card["evidence"]["whole"] = f"argmaxable verify {shell_quote(paths['evidence'])} {shell_quote(model)}"
    text = {"md": markdown(card) + "\n", "html": html_page(card) + "\n", "json": json.dumps(card, indent=1) + "\n"}
    companions = [(paths[k], lambda tmp, k=k: tmp.write_text(text[k], encoding="utf-8")) for k in text]
    companions.append((paths["hardest"], audit.hardest.write_npz))
    if evidence != "none":
        companions.append((paths["evidence"], lambda tmp: audit.result.write_npz(
            tmp, W=W if evidence == "compact" and audit.result.kind == "categories" else None)))
    write_table(audit.tokens, paths["tokens"], config=config, inputs=inputs, companions=companions,
                check=audit.result.settings)
    return {k: v for k, v in paths.items() if k != "evidence" or evidence != "none"}
