"""The run's summary (``report_summary.json``) and the blocks generated from it (``argmaxable report readme``):
coverage, models, prevention and the quantisation study, each between its ``<!-- generated:... -->`` markers in the
README or the page of ``docs/`` that holds them (:func:`update_documents`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from argmaxable.report.assess import Assessment, coverage_counts, coverage_line
from argmaxable.report.declarations import DeclarationError
from argmaxable.report.query import _json_cell, _read_table


def _study_split(results_dir: Path, model: str) -> dict[str, int | None]:
    """A model's unargmaxable tokens in the paper's box split into ties, near-ties and rows strictly inside
    (the LM study's record ``detect/study/<model>.json``; None where the study did not run on it)."""
    path = results_dir / "detect" / "study" / f"{model}.json"
    if not path.exists():
        return {"ties": None, "near_ties": None, "strictly_inside": None}
    box = next(b for b in json.loads(path.read_text())["boxes"] if b["box"] == "paper")
    return {"ties": box["ties"], "near_ties": box["near_ties"],
            "strictly_inside": box["strictly_inside"] - box["near_ties"]}

def _summary_rows(path: Path, columns: dict[str, str]) -> list[dict[str, Any]]:
    """The rows of a run's table (absent: none), the given columns renamed (``{column: key}``)."""
    if not path.exists():
        return []
    df = _read_table(path)
    return [{key: _json_cell(row[col]) if col in row else None for col, key in columns.items()}
            for _, row in df.iterrows()]

def run_summary(items: list[Assessment], results_dir: Path) -> dict[str, Any]:
    """What the README states about a run: coverage counts; per checked model its unargmaxable tokens (paper's
    box split into ties, near-ties and strictly inside where the LM study ran, activation box) and the check's
    seconds (``detect/<model>/summary.json``); the prevention runs (``lm/tables/lm_prevention.parquet``) and the
    quantisation study (``detect/tables/quant.parquet``) where the run made them."""
    models = []
    for path in sorted(results_dir.glob("detect/*/summary.json")):
        s = json.loads(path.read_text())
        box = s.get("activation_box") or {}
        models.append({"model": path.parent.name, "n": s.get("n"), "d": s.get("d"),
                       "unargmaxable": s.get("unargmaxable"), **_study_split(results_dir, path.parent.name),
                       "unargmaxable_activation_box": box.get("unargmaxable"), "seconds": s.get("seconds")})
    prevention = _summary_rows(results_dir / "lm" / "tables" / "lm_prevention.parquet", {
        "head": "head", "d": "d", "held-out perplexity": "perplexity", "tokens unargmaxable": "lost",
        "rankings argmaxable": "rankings_proven", "rankings sampled": "rankings_sampled",
        "train cpu seconds": "train_cpu_s", "check seconds": "check_s"})
    quant = _summary_rows(results_dir / "detect" / "tables" / "quant.parquet", {
        "model": "model", "type": "type", "bits per weight": "bits", "identical": "identical",
        "source # unargmaxable": "source_unargmaxable", "# unargmaxable": "unargmaxable",
        "became unargmaxable": "became_unargmaxable", "became argmaxable": "became_argmaxable",
        "seconds": "seconds"})
    return {"coverage": coverage_counts(items), "coverage_line": coverage_line(items), "models": models,
            "prevention": prevention, "quant": quant}

# <!-- generated:NAME --> ... <!-- /generated:NAME --> in README.md or one page of docs/
README_BLOCKS = ("coverage", "models", "prevention", "quant")

def _blank(value: Any, fmt: str = "") -> str:
    return "" if value is None else format(value, fmt)

def readme_blocks(summary: dict[str, Any]) -> dict[str, str]:
    """The README's generated blocks from a run's ``report_summary.json`` (see :func:`update_readme`); a block
    whose part the run did not make says so."""
    stamp = f"(generated from the run of {summary.get('created', '?')}, code {summary.get('code_version', '?')})"
    rows = [f"| `{m['model']}` | {m['n']} x {m['d']} | {m['unargmaxable']} | "
            + ("not studied |" if m.get("ties") is None else
               f"{m['ties']} / {m['near_ties']} / {m['strictly_inside']} |")
            + f" {_blank(m['unargmaxable_activation_box'])} | {m['seconds']:.1f} |" for m in summary["models"]]
    table = ["| model | head | unargmaxable, \\|x_j\\| <= 100 | of which ties / near-ties / strictly inside | "
             "in the activation's box | check, s |", "|---|---|---|---|---|---|", *rows]
    prevention = ["| head | d | held-out perplexity | tokens lost | top-k rankings proven / sampled | training "
                  "CPU s | check, s |", "|---|---|---|---|---|---|---|"]
    prevention += [f"| {r['head']} | {r['d']} | {r['perplexity']} | {r['lost']} | "
                   + (f"{_blank(r['rankings_proven'], '.0f')} / {r['rankings_sampled']:.0f}"
                      if r.get("rankings_sampled") else "")
                   + f" | {_blank(r['train_cpu_s'], '.0f')} | {_blank(r.get('check_s'), '.1f')} |"
                   for r in summary.get("prevention", [])]
    quant = ["| model | type | bits per weight | identical to the source | unargmaxable, source -> requantised | "
             "became unargmaxable | became argmaxable | s |", "|---|---|---|---|---|---|---|---|"]
    quant += [f"| {q['model']} | {q['type']} | {q['bits']} | {q['identical']} | {q['source_unargmaxable']} -> "
              f"{q['unargmaxable']} | {q['became_unargmaxable']} | {q['became_argmaxable']} | "
              f"{_blank(q['seconds'], '.1f')} |" for q in summary.get("quant", [])]
    none = f"Not made by this run {stamp}."
    return {"coverage": f"{summary['coverage_line']} {stamp}",
            "models": "\n".join([*table, "", f"Check times are one job's wall time on a shared machine {stamp}."]),
            "prevention": "\n".join([*prevention, "", f"Seconds on a shared machine; a plain head's check is in the "
                                      f"models table {stamp}."])
            if summary.get("prevention") else none,
            "quant": "\n".join([*quant, "", f"Seconds are one job's wall time on a shared machine, the requantising "
                                 f"and the check together (an identical head is not checked) {stamp}."])
            if summary.get("quant") else none}

def update_readme(text: str, blocks: dict[str, str]) -> str:
    """``text`` with each generated block replaced; a block whose markers are absent is an error."""
    for name, body in blocks.items():
        begin, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
        if begin not in text or end not in text:
            raise DeclarationError(f"README has no {begin} ... {end} block")
        head, rest = text.split(begin, 1)
        text = f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"
    return text


def documents(readme: Path) -> list[Path]:
    """The pages that hold generated blocks: the README and the Markdown pages of the ``docs/`` beside it."""
    return [readme, *sorted((readme.parent / "docs").glob("*.md"))]


def update_documents(readme: Path, blocks: dict[str, str]) -> list[Path]:
    """Write each block into the one page of :func:`documents` that holds its markers; return the pages changed.
    A block that no page holds, or that two hold, is an error, and then nothing is written."""
    texts = {page: page.read_text() for page in documents(readme)}
    new = dict(texts)
    for name, body in blocks.items():
        holders = [page for page, text in new.items() if f"<!-- generated:{name} -->" in text]
        if len(holders) != 1:
            where = ", ".join(str(p) for p in holders) or f"neither {readme} nor a page of {readme.parent / 'docs'}"
            raise DeclarationError(f"the generated block {name!r} must be in exactly one page; it is in {where}")
        new[holders[0]] = update_readme(new[holders[0]], {name: body})
    changed = [page for page in new if new[page] != texts[page]]
    for page in changed:
        page.write_text(new[page])
    return changed
