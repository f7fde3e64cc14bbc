"""The replication report: every table and figure of the three seed papers, ours beside theirs.

Inputs are plain YAML files in ``workflow/report/``:

- ``papers.yaml``, the catalogue: each paper's tables and figures in the paper's order, and the method
  differences (:func:`method_differences`) with the lines of the paper's text that state its method;
- ``<family>.yaml``, one per experiment family, next to its rules: the items that family makes. The fields
  are documented in one place, the header of ``workflow/report/papers.yaml``; in short: ``paper`` and ``item``
  (as the paper numbers it) or ``beyond: true`` (an item the papers do not have), ``outputs``, ``relation`` per
  experiment, ``compare`` (our column beside the paper's: ``cite`` names the lines of the paper's text that print
  its values, ``self_check`` says what the project computed instead), ``values`` (numbers read from this run's
  files), ``claim`` (the paper's claim, the line that states it and the check that says whether ours agrees),
  ``needs`` and ``differences``. A citation reads as the paper and its place (:func:`citation`), the line key
  into its plain-text copy after it.

Prose never carries a number typed by hand: notes, differences and causes are templates whose ``{name}``
placeholders are filled from the item's ``values`` (read from this run's files) or ``{cfg:dotted.key}`` (the
composed config). :func:`assess` turns one declaration into a status (:data:`STATUSES`); :func:`make_report`
writes the Markdown and the self-contained HTML report (figures embedded as base64 PNG).

The package, in the order its modules import each other: :mod:`.declarations` (the catalogue and the families'
declarations, read and checked), :mod:`.query` (values read from a run's files: the small query language of
``values``, placeholders filled), :mod:`.assess` (an item's status, comparisons and claims; coverage),
:mod:`.readme` (the run's summary and the README's generated blocks), :mod:`.render` (Markdown and HTML);
:func:`make_report` here runs them in that order. A declared output that does not exist makes the item
"missing" (or "not run" when the declaration says what it needs); it never fails the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from argmaxable.provenance import atomic_path, code_version, metadata, sidecar, write_json
from argmaxable.report.assess import (
    STATUSES,
    Assessment,
    assess,
    assess_all,
    check_claim,
    coverage,
    coverage_counts,
    mark_shared,
    method_differences,
)
from argmaxable.report.declarations import (
    PLACEHOLDER,
    DeclarationError,
    bare_numbers,
    citation,
    load_catalogue,
    load_declarations,
    load_methods,
    place,
)
from argmaxable.report.query import fill, read_value
from argmaxable.report.readme import (
    README_BLOCKS,
    documents,
    readme_blocks,
    run_summary,
    update_documents,
    update_readme,
)
from argmaxable.report.render import render_html, render_markdown

__all__ = [
    "PLACEHOLDER",
    "README_BLOCKS",
    "STATUSES",
    "Assessment",
    "DeclarationError",
    "assess",
    "assess_all",
    "bare_numbers",
    "check_claim",
    "citation",
    "coverage",
    "coverage_counts",
    "documents",
    "fill",
    "load_catalogue",
    "load_declarations",
    "load_methods",
    "make_report",
    "mark_shared",
    "method_differences",
    "place",
    "read_value",
    "readme_blocks",
    "render_html",
    "render_markdown",
    "run_summary",
    "update_documents",
    "update_readme",
]


def make_report(report_dir: str | Path, results_dir: str | Path, out_md: str | Path, out_html: str | Path, *,
                experiment: str, families: list[str] | None = None, config: Any = None,
                out_summary: str | Path | None = None, fonts: list | None = None) -> list[Assessment]:
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
        The composed config, recorded in the sidecars and read by ``{cfg:...}`` placeholders.
    out_summary : path, optional
        JSON of :func:`run_summary` with its provenance (``argmaxable report readme`` fills the README from it).
    fonts : list of paths, optional
        Font files the page's glyphs beyond Latin are taken from (default: the machine's, :mod:`argmaxable.glyphs`).
    """
    report_dir, results_dir = Path(report_dir), Path(results_dir)
    catalogue = load_catalogue(report_dir / "papers.yaml")
    methods = method_differences(load_methods(report_dir / "papers.yaml"), catalogue, results_dir, config)
    items = assess_all(catalogue, load_declarations(report_dir, catalogue), results_dir, experiment, families,
                       config=config, methods=methods)
    header = {
        "what this is": "every table, figure and stated claim of the three papers, in each paper's order, with what "
                        "this run made for it and how it relates to the paper's; then the items beyond the papers",
        "how to read": "each item states its relation: exact match / within tolerance (of numbers printed in the "
                       "paper) / self-check (against values the project computes where the paper prints none) / "
                       "unresolved (ours too uncertain to hold the paper's to) / same inputs / differs / substitute "
                       "data / not run / out of scope (with why) / missing; a paper's claim is tested on this run's "
                       "files (each value's file and rows named): ours agrees, differs, or this run cannot decide "
                       "(inconclusive, with why); a check several items share is counted once",
        "citations": "by paper and place (section, table or figure, as the published paper numbers them, and the "
                     "thesis's page); the line key after the dash points into the paper's plain-text copy, for those "
                     "who hold it",
        "experiment": experiment, "code version": code_version(),
        "families run": ", ".join(families) if families is not None else "all"}
    for path, text in ((out_md, render_markdown(catalogue, items, header, results_dir, methods)),
                       (out_html, render_html(catalogue, items, header, methods, fonts=fonts))):
        with atomic_path(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
        write_json(metadata(config, [*report_dir.glob("*.yaml")]), sidecar(path))
    if out_summary is not None:
        write_json({**run_summary(items, results_dir), **metadata(config, [])}, out_summary)
    return items
