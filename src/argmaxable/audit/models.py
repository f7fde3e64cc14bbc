"""The pipeline's audits: a card for every real head the detection family checked (rule ``audit_model``), from the
check's own evidence (no second check), and the index of the cards (rule ``make_audit_index``), which the report's
LM study links and which compares the under-training signals with the verdicts and radii across the models."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from argmaxable.audit import audit_layer, write_audit
from argmaxable.core import CheckResult
from argmaxable.detect.loaders import load_model
from argmaxable.provenance import atomic_path, write_table
from argmaxable.text import markdown_cell, shown


def audit_model(model: Mapping, detect: Mapping, evidence_path: str | os.PathLike, prefix: str | os.PathLike, *,
                root: str | os.PathLike | None = None, config: Any = None, prompt: bool = False) -> dict:
    """Audit one checked model in the paper's box from the evidence its check wrote (rule ``check_model``), and write
    the card, the per-token table and the evidence beside ``prefix`` (:func:`~argmaxable.audit.write_audit`).
    ``detect`` holds the check's settings and ``audit`` (hardest, refine, lp_rounds, share, and the prompting
    test's controls, steps and batch). ``prompt``: run the model's tokenizer round trip and the prompting test,
    resumable from ``<prefix>.prompting.parquet``."""
    layer = load_model(model, root=root)
    result = CheckResult.load(evidence_path, W=layer.W)
    opts = detect["audit"]
    tokenizer = lm = None
    if prompt and not layer.files:
        raise ValueError(f"model {model['name']!r}: the prompting test needs the model's file; its head has none")
    if prompt:
        from argmaxable.audit.prompting import load_causal_lm
        from argmaxable.audit.roundtrip import load_tokenizer

        tokenizer = load_tokenizer(layer.files[0])
        lm = load_causal_lm(layer.files[0], (layer.info or {}).get("architecture"))
    audit = audit_layer(layer, name=model["name"], bound=detect["bound"], eps=detect["eps"],
                        patience=detect["patience"], solver=detect["solver"], workers=detect["workers"],
                        hardest=opts["hardest"], refine=opts["refine"], lp_rounds=opts["lp_rounds"],
                        unused=model.get("unused") or None, share=opts["share"], result=result,
                        tokenizer=tokenizer, model=lm, controls=opts.get("controls", 200), steps=opts.get("steps"),
                        batch=opts.get("batch"), prompts=opts.get("prompts"),
                        state=Path(f"{prefix}.prompting.parquet") if lm is not None else None)
    write_audit(audit, prefix, layer.W, model=str(layer.files[0]) if layer.files else "MODEL", config=config,
                inputs=[evidence_path, *layer.files])
    return audit.card


def index_table(cards: list[dict], links: list[str]) -> pd.DataFrame:
    """One row per card: the head, its verdicts, ties, the smallest LP upper bound among its hardest tokens, the
    certified floor of the others, and per signal the tokens it flags and those only it flags; the rank correlations
    of the indicator and the norm with the radius bound; the card's path (``links``, relative to the results)."""
    rows = []
    for card, link in zip(cards, links, strict=True):
        s = card["signals"]
        row = {"model": card["model"], "n": card["n"], "d": card["d"], **card["counts"],
               "tie groups": len(card["tie_groups"]), "greedy decoding emits": len(card["greedy_emits"]),
               "smallest LP radius at most": min((h["radius_at_most"] for h in card["hardest"]), default=None),
               "others' radius at least": card["others_at_least"], "unused tokens named": s["reference_tokens"]}
        for r in s["rows"]:
            row[f"{r['signal']}: flags"] = r["flagged"]
            row[f"{r['signal']}: only it"] = r["only_this"]
        p = card.get("prompting")
        if p:
            for group in ("candidates", "controls"):
                row[f"{group} under-trained (verified)"] = f"{p[group]['under_trained']}/{p[group]['tested']}"
        row["Spearman indicator vs radius"] = s["spearman_with_radius"]["indicator"]
        row["Spearman norm vs radius"] = s["spearman_with_radius"]["norm"]
        row["card"] = link
        rows.append(row)
    return pd.DataFrame(rows)


def make_audit_index(card_paths: Iterable[str | os.PathLike], results_dir: str | os.PathLike,
                     out_parquet: str | os.PathLike, out_md: str | os.PathLike, *, config: Any = None) -> pd.DataFrame:
    """The index of the audit cards (``<prefix>.json``), as parquet and Markdown; the Markdown also names, per model,
    the tokens each signal alone flags."""
    card_paths = [Path(p) for p in card_paths]
    cards = [json.loads(p.read_text()) for p in card_paths]
    links = [p.with_suffix(".html").relative_to(results_dir).as_posix() for p in card_paths]
    table = index_table(cards, links)
    write_table(table, out_parquet, config=config, inputs=card_paths)
    lines = ["# Token audits: one card per real head", "",
             "Each card (HTML and Markdown beside its JSON) lists the unargmaxable tokens in their tie groups, the ids "
             "greedy decoding still emits, the tokens with the smallest certified regions (both bounds from the LP), "
             "and the under-training signals of Land & Bartolo (2024) beside the certified verdicts and radius "
             "bounds.", "", table.map(lambda v: markdown_cell(str(v))).to_markdown(index=False), ""]
    for card in cards:
        named = [f"- {markdown_cell(r['signal'])}: " + ", ".join(markdown_cell(f"{t['id']} {shown(t['token'])}")
                                                                 for t in r["named"])
                 for r in card["signals"]["rows"] if r["named"]]
        if named:
            lines += [f"## {markdown_cell(card['model'])}: tokens only one signal flags (strongest first)", "", *named,
                      ""]
        p = card.get("prompting")
        if p and p["signals_at_share"]:
            lines += [f"## {markdown_cell(card['model'])}: each signal against the prompting test's verified set", "",
                      *(f"- {r['signal']}: precision {r['precision']}, recall {r['recall']} "
                        f"({r['verified_among_them']} of {r['flagged_and_tested']} verified)"
                        for r in p["signals_at_share"]), ""]
    with atomic_path(Path(out_md)) as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    return table
