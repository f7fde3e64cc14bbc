"""The replication report: every table and figure of the three seed papers, ours beside theirs.

Inputs are plain YAML files in ``workflow/report/``:

- ``papers.yaml``, the catalogue: each paper's tables and figures in the paper's order;
- ``<family>.yaml``, one per experiment family, next to its rules: the items that family makes. Each item
  names ``paper`` and ``item`` (as the paper numbers it), ``outputs`` (paths under the results directory),
  ``relation`` per experiment (``{offline: {kind, note}, paper: {kind, note}}``, kind one of :data:`KINDS`;
  a relation may name its own ``outputs``, ``compare`` and ``differences``),
  optionally ``compare`` (which columns of our table hold our and the paper's values, and a tolerance),
  ``needs`` (what a run needs to make it, shown when its outputs are absent) and ``differences`` (known
  differences, stated beside the item).

:func:`assess` turns one declaration into a status (:data:`STATUSES`); :func:`make_report` writes the
Markdown and the self-contained HTML report (figures embedded as base64 PNG). A declared output that does not
exist makes the item "missing" (or "not run" when the declaration says what it needs); it never fails the run.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from argmaxable.provenance import code_version, sidecar

# How an item relates to the paper's, per experiment (declared).
KINDS = ("same", "substitute", "not_run")
# What the report concludes (computed), in the coverage table's order.
STATUSES = ("exact match", "within tolerance", "same inputs", "differs", "substitute data", "not run", "missing")
COMPARED = ("exact match", "within tolerance", "differs")  # outcomes of a comparison, best first
TABLE_ROWS = 25  # rows of a table shown inline; the file holds the rest
TABLE_SUFFIXES = (".parquet", ".csv")


class DeclarationError(ValueError):
    """A report declaration is malformed (names the file, the item and the fix)."""


@dataclass
class Assessment:
    """One catalogue item with what we made for it."""

    paper: str
    item: str
    title: str
    status: str
    line: str  # the one-line relation
    family: str | None = None
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    comparison: pd.DataFrame | None = None
    differences: list[str] = field(default_factory=list)
    provenance: list[dict] = field(default_factory=list)


def load_catalogue(path: str | Path) -> dict[str, dict]:
    """``{paper: {title, seed, items: [{item, title}, ...]}}`` from ``papers.yaml``."""
    return yaml.safe_load(Path(path).read_text())["papers"]


def load_declarations(report_dir: str | Path, catalogue: dict[str, dict]) -> dict[tuple[str, str], dict]:
    """Every family's declarations keyed by (paper, item), validated against the catalogue.

    Raises
    ------
    DeclarationError
        An unknown paper or item, a relation kind outside :data:`KINDS`, or an item declared twice.
    """
    known = {(p, it["item"]) for p, spec in catalogue.items() for it in spec["items"]}
    out: dict[tuple[str, str], dict] = {}
    for path in sorted(Path(report_dir).glob("*.yaml")):
        if path.name == "papers.yaml":
            continue
        doc = yaml.safe_load(path.read_text()) or {}
        for decl in doc.get("items", []):
            key = (decl.get("paper"), str(decl.get("item")))
            where = f"{path}: {key[0]} {key[1]}"
            if key not in known:
                raise DeclarationError(f"{where} is not in the catalogue papers.yaml; use a paper key "
                                       f"({', '.join(catalogue)}) and the item as the paper numbers it")
            if key in out:
                raise DeclarationError(f"{where} is declared twice (also in {out[key]['family']}.yaml)")
            for exp, rel in decl.get("relation", {}).items():
                if rel.get("kind") not in KINDS:
                    raise DeclarationError(f"{where}: relation.{exp}.kind must be one of {KINDS}; "
                                           f"got {rel.get('kind')!r}")
            out[key] = {**decl, "family": doc.get("family", path.stem)}
    return out


def _relation(decl: dict, experiment: str) -> dict:
    """The declared relation for this experiment (the offline one when the experiment has none)."""
    rel = decl.get("relation", {})
    return rel.get(experiment) or rel.get("offline") or {"kind": "not_run", "note": "no relation declared"}


def _read_table(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def compare(spec: dict, results_dir: Path) -> tuple[str, str, pd.DataFrame]:
    """Compare our column with the paper's column of one table, cell by cell.

    ``spec``: ``table`` (path under results), ``key`` (columns naming a cell), ``ours`` (column name),
    ``paper`` (a column of the same table, or the paper's numbers as records ``[{<key>: ..., paper: ...}]``),
    optional ``tolerance`` (absolute) and ``where`` (a pandas query selecting rows).

    Returns
    -------
    status : {"exact match", "within tolerance", "differs"}
    summary : str
    cells : DataFrame
        key columns, ours, paper, diff (rows where the paper has no value are dropped).
    """
    df = _read_table(results_dir / spec["table"])
    named = [*spec["key"], spec["ours"], *([] if isinstance(spec["paper"], list) else [spec["paper"]])]
    if absent := [c for c in named if c not in df.columns]:
        raise KeyError(", ".join(map(repr, absent)))
    if spec.get("where"):
        df = df.query(spec["where"])
    if isinstance(spec["paper"], list):  # the paper's numbers, given in the declaration
        ours = df[[*spec["key"], spec["ours"]]].rename(columns={spec["ours"]: "ours"})
        paper = pd.DataFrame(spec["paper"])
        as_text = {k: str for k in spec["key"]}  # keys compare as text (a CSV column may mix numbers and labels)
        cells = ours.astype(as_text).merge(paper.astype(as_text), on=spec["key"], how="inner")
    else:
        cells = df[[*spec["key"], spec["ours"], spec["paper"]]].rename(
            columns={spec["ours"]: "ours", spec["paper"]: "paper"})
    cells = cells.dropna(subset=["paper"]).reset_index(drop=True)
    ours = pd.to_numeric(cells["ours"], errors="coerce")
    paper = pd.to_numeric(cells["paper"], errors="coerce")
    numeric = ours.notna().all() and paper.notna().all()
    tol = float(spec.get("tolerance", 0))
    if numeric:
        cells["diff"] = ours - paper
        equal, within = cells["diff"] == 0, cells["diff"].abs() <= tol
    else:  # verdicts and other labels: equal or not
        equal = within = cells["ours"].astype(str) == cells["paper"].astype(str)
    n = len(cells)
    if n == 0:
        return "differs", "no cell of ours has a paper value to compare with", cells
    if equal.all():
        return "exact match", f"{n}/{n} cells equal", cells
    if within.all():
        return "within tolerance", f"{n}/{n} cells within ±{tol:g} ({int(equal.sum())} equal)", cells
    worst = f", largest |diff| {cells['diff'].abs().max():g}" if numeric else ""
    return "differs", f"{int((~within).sum())}/{n} cells outside ±{tol:g}{worst}", cells


def provenance(path: Path) -> dict | None:
    """Code version, creation time, config hash and input hashes from a result's ``.meta.json`` sidecar."""
    meta_path = sidecar(path)
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    cfg = meta.get("config")
    config = json.dumps(cfg, sort_keys=True, default=str)
    return {"file": path.name, "experiment": cfg.get("experiment") if isinstance(cfg, dict) else None,
            "code_version": meta.get("code_version"), "created": meta.get("created"),
            "config_sha256": hashlib.sha256(config.encode()).hexdigest()[:12],
            "inputs": {Path(k).name: v[:12] for k, v in (meta.get("inputs") or {}).items()}}


def assess(paper: str, entry: dict, decl: dict | None, results_dir: Path, experiment: str,
           families: list[str] | None = None) -> Assessment:
    """Status and one-line relation of one catalogue item for this run.

    ``families``: the families whose rules ran (None: all); an item of another family is "not run".
    """
    a = Assessment(paper=paper, item=entry["item"], title=entry["title"], status="missing",
                   line="no family declares this item")
    if decl is None:
        return a
    a.family = decl["family"]
    rel = _relation(decl, experiment)
    a.differences = list(rel.get("differences", decl.get("differences", [])))
    if rel["kind"] == "not_run":
        a.status, a.line = "not run", f"not run in this experiment: {rel.get('note', '')}".rstrip(": ")
        return a
    if families is not None and a.family not in families:
        a.status = "not run"
        a.line = f"not run: needs {decl['needs']}" if decl.get("needs") else \
            f"not run: the {a.family} family is disabled in this run"
        return a
    outputs = [results_dir / p for p in rel.get("outputs", decl.get("outputs", []))]
    specs = rel.get("compare", decl.get("compare")) or []
    specs = specs if isinstance(specs, list) else [specs]
    needed = dict.fromkeys([*outputs, *(results_dir / spec["table"] for spec in specs)])  # compared tables too
    a.missing = [str(p.relative_to(results_dir)) for p in needed if not p.exists()]
    if a.missing or not outputs:
        needs = decl.get("needs")
        a.status = "not run" if needs else "missing"
        a.line = f"not run: needs {needs}" if needs else f"missing: {', '.join(a.missing) or 'no outputs declared'}"
        return a
    a.figures = [p for p in outputs if p.suffix == ".png"]
    a.tables = [p for p in outputs if p.suffix in TABLE_SUFFIXES]
    a.provenance = [rec for p in outputs if (rec := provenance(p))]
    note = rel.get("note", "")
    if rel["kind"] == "substitute":
        a.status, a.line = "substitute data", f"substitute data: {note}"
        return a
    if specs:
        try:
            done = [compare(spec, results_dir) for spec in specs]
        except KeyError as err:
            raise DeclarationError(f"{a.family}.yaml: {paper} {a.item}: compare names column {err.args[0]} that "
                                   "its table does not have; fix the declaration's key/ours/paper") from None
        a.status = max((status for status, _, _ in done), key=COMPARED.index)  # the worst of the comparisons
        summary = "; ".join(f"{spec['ours']}: {text}" if len(done) > 1 else text
                            for spec, (_, text, _) in zip(specs, done, strict=True))
        a.comparison = pd.concat([cells.assign(column=spec["ours"]) if len(done) > 1 else cells
                                  for spec, (_, _, cells) in zip(specs, done, strict=True)], ignore_index=True)
        a.line = f"{a.status} ({summary}){': ' + note if note else ''}"
    else:
        a.status, a.line = "same inputs", f"same inputs: {note}" if note else "same inputs"
    return a


def assess_all(catalogue: dict[str, dict], decls: dict[tuple[str, str], dict], results_dir: str | Path,
               experiment: str, families: list[str] | None = None) -> list[Assessment]:
    """Every catalogue item, in each paper's order."""
    return [assess(paper, entry, decls.get((paper, entry["item"])), Path(results_dir), experiment, families)
            for paper, spec in catalogue.items() for entry in spec["items"]]


def coverage(items: list[Assessment]) -> pd.DataFrame:
    """Counts per paper and status (columns in :data:`STATUSES` order, plus a total row)."""
    counts = Counter((a.paper, a.status) for a in items)
    papers = list(dict.fromkeys(a.paper for a in items))
    df = pd.DataFrame([{"paper": p, **{s: counts[(p, s)] for s in STATUSES}} for p in papers])
    total = {"paper": "all", **{s: int(df[s].sum()) for s in STATUSES}}
    df = pd.concat([df, pd.DataFrame([total])], ignore_index=True)
    df["total"] = df[list(STATUSES)].sum(axis=1)
    return df


def coverage_line(items: list[Assessment]) -> str:
    """One sentence: reproduced with the same inputs (and how closely), substitute data, not run, missing."""
    c = Counter(a.status for a in items)
    same = sum(c[s] for s in ("exact match", "within tolerance", "same inputs", "differs"))
    return (f"{len(items)} items: {same} reproduced with the same inputs ({c['exact match']} exact matches of "
            f"the paper's numbers, {c['within tolerance']} within tolerance, {c['differs']} differing, "
            f"{c['same inputs']} with nothing numeric to compare); {c['substitute data']} with substitute data; "
            f"{c['not run']} not run in this experiment; {c['missing']} missing.")


def _detail(a: Assessment) -> str:
    """The relation line without its leading status, for a section headed by the status."""
    return a.line[len(a.status):].lstrip(" :") if a.line.startswith(a.status) else a.line


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def _anchor(paper: str, item: str) -> str:
    return f"{paper}-{item}".lower().replace(" ", "-").replace(".", "")


def _table_preview(path: Path) -> tuple[pd.DataFrame, int]:
    df = _read_table(path)
    return df.head(TABLE_ROWS), len(df)


def render_markdown(catalogue: dict, items: list[Assessment], header: dict, results_dir: Path) -> str:
    """The report as Markdown; figures are linked relative to the results directory."""
    lines = ["# Replication report", "", *(f"- {k}: {v}" for k, v in header.items()), "",
             "## Coverage", "", coverage_line(items), "", coverage(items).to_markdown(index=False), "",
             "| paper | item | title | status | relation |", "|---|---|---|---|---|"]
    lines += [f"| {a.paper} | [{a.item}](#{_anchor(a.paper, a.item)}) | {_cell(a.title)} | {a.status} | "
              f"{_cell(a.line)} |" for a in items]
    for paper, spec in catalogue.items():
        lines += ["", f"## {spec['title']}", "", f"Seed: `{spec['seed']}`"]
        for a in (x for x in items if x.paper == paper):
            lines += ["", f'<a id="{_anchor(a.paper, a.item)}"></a>', f"### {a.item}: {a.title}", "",
                      f"**{a.status}** {_detail(a)}", ""]
            lines += [f"- known difference: {d}" for d in a.differences]
            for fig in a.figures:
                lines += ["", f"![{a.item}]({fig.relative_to(results_dir).as_posix()})"]
            if a.comparison is not None:
                lines += ["", "Ours beside the paper's values:", "",
                          a.comparison.head(TABLE_ROWS).to_markdown(index=False)]
            for tab in a.tables:
                df, n = _table_preview(tab)
                shown = f" (first {len(df)} of {n} rows)" if n > len(df) else ""
                lines += ["", f"`{tab.relative_to(results_dir).as_posix()}`{shown}:", "", df.to_markdown(index=False)]
            for rec in a.provenance:
                lines += [f"- provenance `{rec['file']}`: experiment {rec['experiment']}, {rec['code_version']}, "
                          f"{rec['created']}, config "
                          f"{rec['config_sha256']}, inputs {json.dumps(rec['inputs']) if rec['inputs'] else 'none'}"]
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em;line-height:1.4}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px}
img{max-width:100%;border:1px solid #eee}.s{font-weight:bold}.exact-match,.within-tolerance{color:#17692b}
.same-inputs{color:#1a4f8b}.differs{color:#b35c00}.substitute-data{color:#6b4ca8}.not-run{color:#777}
.missing{color:#b00020}details{font-size:12px;color:#444}section{border-top:1px solid #ddd;margin-top:1em}"""


def _html_table(df: pd.DataFrame) -> str:
    return df.to_html(index=False, border=0, na_rep="", float_format=lambda v: f"{v:.6g}")


def _status_span(status: str) -> str:
    return f'<span class="s {status.replace(" ", "-")}">{html.escape(status)}</span>'


def render_html(catalogue: dict, items: list[Assessment], header: dict) -> str:
    """The report as one self-contained HTML file: figures embedded as base64 PNG, no external resource."""
    esc = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Replication report</title>"
             f"<style>{_CSS}</style></head><body><h1>Replication report</h1><ul>"]
    parts += [f"<li>{esc(k)}: {esc(str(v))}</li>" for k, v in header.items()]
    parts += [f"</ul><h2>Coverage</h2><p>{esc(coverage_line(items))}</p>", _html_table(coverage(items)),
              "<table><tr><th>paper</th><th>item</th><th>title</th><th>status</th><th>relation</th></tr>"]
    parts += [f"<tr><td>{esc(a.paper)}</td><td><a href='#{_anchor(a.paper, a.item)}'>{esc(a.item)}</a></td>"
              f"<td>{esc(a.title)}</td><td>{_status_span(a.status)}</td><td>{esc(a.line)}</td></tr>" for a in items]
    parts.append("</table>")
    for paper, spec in catalogue.items():
        parts.append(f"<h2>{esc(spec['title'])}</h2><p>Seed: <code>{esc(spec['seed'])}</code></p>")
        for a in (x for x in items if x.paper == paper):
            parts.append(f"<section id='{_anchor(a.paper, a.item)}'><h3>{esc(a.item)}: {esc(a.title)}</h3>"
                         f"<p>{_status_span(a.status)} {esc(_detail(a))}</p>")
            parts += [f"<p><b>Known difference:</b> {esc(d)}</p>" for d in a.differences]
            for fig in a.figures:
                data = base64.b64encode(fig.read_bytes()).decode("ascii")
                parts.append(f"<figure><img class='report-figure' alt='{esc(a.item)}' "
                             f"src='data:image/png;base64,{data}'><figcaption>{esc(fig.name)}</figcaption></figure>")
            if a.comparison is not None:
                parts += ["<p>Ours beside the paper's values:</p>", _html_table(a.comparison.head(TABLE_ROWS))]
            for tab in a.tables:
                df, n = _table_preview(tab)
                shown = f" (first {len(df)} of {n} rows)" if n > len(df) else ""
                parts += [f"<p><code>{esc(tab.name)}</code>{shown}</p>", _html_table(df)]
            if a.provenance:
                parts.append("<details><summary>provenance</summary><ul>")
                parts += [f"<li><code>{esc(r['file'])}</code>: experiment {esc(str(r['experiment']))}, "
                          f"{esc(str(r['code_version']))}, "
                          f"{esc(str(r['created']))}, config {r['config_sha256']}, inputs "
                          f"{esc(json.dumps(r['inputs']) if r['inputs'] else 'none')}</li>" for r in a.provenance]
                parts.append("</ul></details>")
            parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def make_report(report_dir: str | Path, results_dir: str | Path, out_md: str | Path, out_html: str | Path, *,
                experiment: str, families: list[str] | None = None, config: Any = None) -> list[Assessment]:
    """Rule ``make_report``: write ``report.md`` and ``report.html`` (each with a provenance sidecar).

    Parameters
    ----------
    report_dir : path
        Holds ``papers.yaml`` and the families' declarations.
    results_dir : path
        Where the declared outputs live.
    out_md, out_html : path
    experiment : str
        The composed ``experiment`` (selects each item's declared relation).
    families : list of str, optional
        Families whose rules ran in this run (None: all); the others' items are "not run".
    config : dict, optional
        The composed config, recorded in the sidecars.
    """
    from argmaxable.provenance import atomic_path, metadata, write_json

    report_dir, results_dir = Path(report_dir), Path(results_dir)
    catalogue = load_catalogue(report_dir / "papers.yaml")
    items = assess_all(catalogue, load_declarations(report_dir, catalogue), results_dir, experiment, families)
    header = {"experiment": experiment, "code version": code_version(),
              "families run": ", ".join(families) if families is not None else "all",
              "how to read": "one section per paper, items in the paper's order; each states how ours relates "
                             "to the paper's (exact match / within tolerance / same inputs / differs / "
                             "substitute data / not run / missing)"}
    for path, text in ((out_md, render_markdown(catalogue, items, header, results_dir)),
                       (out_html, render_html(catalogue, items, header))):
        with atomic_path(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
        write_json(metadata(config, [*report_dir.glob("*.yaml")]), sidecar(path))
    return items
