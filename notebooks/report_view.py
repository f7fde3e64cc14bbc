"""What each notebook shows: its family's items as the replication report shows them, from the same declarations
(``workflow/report/<family>.yaml``) and the same files under the results directory, in the papers' order; then
the figures and tables under ``results/<family>/`` that no item of the report declares.

A figure is shown as its rule drew it (the PNG); a table whole (parquet or CSV), a Markdown output where no table
of the same name stands for it, each with the code version and time its provenance sidecar records; a file two
items declare is shown under the first and named under the second.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from IPython.display import Image, Markdown, display

from argmaxable.config import CONFIG_DIR, load_config, results_root
from argmaxable.report import load_catalogue, load_declarations
from argmaxable.report.assess import FIGURE_SUFFIXES, TABLE_SUFFIXES, TEXT_SUFFIXES, provenance

REPORT_DIR = CONFIG_DIR.parent / "workflow" / "report"


def report_items(results: Path, experiment: str) -> list[tuple[str, str, list[Path]]]:
    """(family, heading, declared outputs under ``results``) of every item the report declares for
    ``experiment``, in the catalogue's order (each paper's items as the paper numbers them, then the items beyond
    the papers)."""
    catalogue = load_catalogue(REPORT_DIR / "papers.yaml")
    entries = [(paper, spec, entry) for paper, spec in catalogue.items() for entry in spec["items"]]
    order = {(paper, entry["item"]): (n, f"{spec.get('short', paper)} {entry['item']}: {entry['title']}")
             for n, (paper, spec, entry) in enumerate(entries)}
    out = []
    for key, decl in load_declarations(REPORT_DIR, catalogue).items():
        relations = decl.get("relation", {})
        rel = relations.get(experiment) or relations.get("offline") or {}
        rank, heading = order.get(key, (len(order), f"{decl.get('item')}: {decl.get('title')} (beyond the papers)"))
        out.append((rank, decl["family"], heading, [results / p for p in rel.get("outputs", decl.get("outputs", []))]))
    return [(family, heading, outputs) for _, family, heading, outputs in sorted(out, key=lambda item: item[0])]


def _show_file(path: Path, results: Path) -> str:
    """Display one output: its name and provenance, then the figure, table or text; return which of the three."""
    if path.suffix in FIGURE_SUFFIXES:
        kind, shown = "figures", Image(filename=str(path))
    elif path.suffix in TABLE_SUFFIXES:
        kind, shown = "tables", pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    else:
        kind, shown = "texts", Markdown(path.read_text())
    record = provenance(path)
    made = f" <small>code {record['code_version']}, {record['created']}</small>" if record else ""
    display(Markdown(f"`{path.relative_to(results).as_posix()}`{made}"), shown)
    return kind


def show_family(family: str) -> None:
    """Display every item of ``family`` this run made: a heading, its figures, tables and texts, and the declared
    outputs the run has not written; then the family's figures and tables in no item; then how many were shown."""
    results = results_root()
    items = report_items(results, load_config().experiment)
    shown: dict[Path, str] = {}
    counts = {"items": 0, "figures": 0, "tables": 0, "texts": 0}
    for heading, outputs in [(heading, outputs) for fam, heading, outputs in items if fam == family]:
        present = [p for p in outputs if p.is_file()]
        if not present:
            continue
        counts["items"] += 1
        display(Markdown(f"### {heading}"))
        stems = {p.stem for p in present if p.suffix in TABLE_SUFFIXES}
        for path in present:
            if path in shown:
                display(Markdown(f"`{path.relative_to(results).as_posix()}`: shown above under {shown[path]}"))
            elif path.suffix in TEXT_SUFFIXES and path.stem in stems:
                continue
            else:
                shown[path] = heading.split(":")[0]
                counts[_show_file(path, results)] += 1
        if absent := [p.relative_to(results).as_posix() for p in outputs if not p.is_file()]:
            display(Markdown("Not in this run: " + ", ".join(f"`{p}`" for p in absent)))
    declared = {p for _, _, outputs in items for p in outputs}
    others = [p for kind in ("figures", "tables") for p in sorted((results / family / kind).glob("*"))
              if p.suffix in (*FIGURE_SUFFIXES, *TABLE_SUFFIXES) and p not in declared]
    if others:
        display(Markdown(f"### Under `{family}/`, in no item of the report"))
    for path in others:
        counts[_show_file(path, results)] += 1
    if not counts["items"] and not others:
        print(f"No {family} results under {results}; run: make run")
    print(f"{family}: {counts['items']} items, {counts['figures']} figures, {counts['tables']} tables, "
          f"{counts['texts']} texts shown")
