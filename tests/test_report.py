"""The replication report: declarations cover the catalogue, statuses follow the files, the HTML renders."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from argmaxable.report import (
    DeclarationError,
    assess,
    assess_all,
    coverage,
    load_catalogue,
    load_declarations,
    make_report,
)

REPORT_DIR = Path(__file__).resolve().parents[1] / "workflow" / "report"


def test_catalogue_lists_every_item_once_and_every_item_is_declared():
    catalogue = load_catalogue(REPORT_DIR / "papers.yaml")
    keys = [(p, it["item"]) for p, spec in catalogue.items() for it in spec["items"]]
    assert len(keys) == len(set(keys)) == 61  # 21 (ACL 2022) + 32 (thesis ch. 4-5, app. A, 2 beyond) + 8 (Basri-Jacobs)
    decls = load_declarations(REPORT_DIR, catalogue)
    assert set(keys) - set(decls) == set(), "catalogue items without a family declaration"


def _catalogue(tmp_path: Path, items: list[dict]) -> Path:
    d = tmp_path / "report"
    d.mkdir()
    (d / "papers.yaml").write_text(yaml.safe_dump({"papers": {"p": {"title": "Paper", "seed": "s.txt", "items": [
        {"item": f"Fig. {i}", "title": f"figure {i}"} for i in range(1, 8)]}}}))
    (d / "fam.yaml").write_text(yaml.safe_dump({"family": "fam", "items": items}))
    return d


def _figure(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [1, 0])
    fig.savefig(path)
    plt.close(fig)


@pytest.fixture
def small_run(tmp_path):
    """A results directory with two figures and one table, and declarations of every status."""
    results = tmp_path / "results"
    _figure(results / "fam" / "a.png")
    _figure(results / "fam" / "b.png")
    table = pd.DataFrame({"k": [1, 2, 3], "ours": [10, 20, 31], "paper": [10, 20, 30]})
    table.to_parquet(results / "fam" / "t.parquet")
    same = {"offline": {"kind": "same", "note": "n"}}
    items = [
        {"paper": "p", "item": "Fig. 1", "outputs": ["fam/a.png", "fam/t.parquet"], "relation": same,
         "compare": {"table": "fam/t.parquet", "key": ["k"], "ours": "ours", "paper": "paper", "where": "k < 3"}},
        {"paper": "p", "item": "Fig. 2", "outputs": ["fam/t.parquet"], "relation": same,
         "compare": {"table": "fam/t.parquet", "key": ["k"], "ours": "ours", "paper": "paper", "tolerance": 1}},
        {"paper": "p", "item": "Fig. 3", "outputs": ["fam/t.parquet"], "relation": same,
         "compare": {"table": "fam/t.parquet", "key": ["k"], "ours": "ours", "paper": "paper"}},
        {"paper": "p", "item": "Fig. 4", "outputs": ["fam/b.png"],
         "relation": {"offline": {"kind": "substitute", "note": "other data"}}},
        {"paper": "p", "item": "Fig. 5", "outputs": ["fam/gone.png"], "needs": "another family's rule",
         "relation": same},
        {"paper": "p", "item": "Fig. 6", "outputs": ["fam/gone.png"], "relation": same},
    ]  # Fig. 7 is not declared
    return _catalogue(tmp_path, items), results


def test_statuses_follow_the_declarations_and_the_files(small_run):
    report_dir, results = small_run
    catalogue = load_catalogue(report_dir / "papers.yaml")
    items = assess_all(catalogue, load_declarations(report_dir, catalogue), results, "offline")
    assert [a.status for a in items] == ["exact match", "within tolerance", "differs", "substitute data",
                                         "not run", "missing", "missing"]
    assert "needs another family's rule" in items[4].line
    assert items[5].missing == ["fam/gone.png"]
    assert items[2].comparison["diff"].tolist() == [0, 0, 1]
    cov = coverage(items).set_index("paper")
    assert cov.loc["all", "missing"] == 2 and cov.loc["all", "total"] == 7


def test_relation_per_experiment_and_not_run():
    entry = {"item": "Fig. 1", "title": "t"}
    decl = {"family": "f", "outputs": ["x.png"], "relation": {
        "offline": {"kind": "not_run", "note": "needs the released models"},
        "paper": {"kind": "same", "note": "n", "outputs": ["y.png"]}}}
    off = assess("p", entry, decl, Path("/nonexistent"), "offline")
    assert (off.status, off.line) == ("not run", "not run in this experiment: needs the released models")
    paper = assess("p", entry, decl, Path("/nonexistent"), "paper")
    assert (paper.status, paper.missing) == ("missing", ["y.png"])


def test_unknown_item_or_kind_is_one_line_error(tmp_path):
    d = _catalogue(tmp_path, [{"paper": "p", "item": "Fig. 99", "outputs": [], "relation": {}}])
    with pytest.raises(DeclarationError, match=r"p Fig\. 99 is not in the catalogue"):
        load_declarations(d, load_catalogue(d / "papers.yaml"))
    (d / "fam.yaml").write_text(yaml.safe_dump({"items": [
        {"paper": "p", "item": "Fig. 1", "relation": {"offline": {"kind": "roughly"}}}]}))
    with pytest.raises(DeclarationError, match=r"relation\.offline\.kind must be one of"):
        load_declarations(d, load_catalogue(d / "papers.yaml"))


def _browser() -> str | None:
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def test_report_renders_in_a_headless_browser_with_every_figure_loaded(small_run, tmp_path):
    report_dir, results = small_run
    make_report(report_dir, results, results / "report.md", results / "report.html", experiment="offline")
    html = (results / "report.html").read_text()
    assert "src='http" not in html and 'src="http' not in html  # self-contained
    n_figures = html.count("class='report-figure'")
    assert n_figures == 2  # Fig. 1 and Fig. 4; the missing and not-run items show no image
    assert "![Fig. 1](fam/a.png)" in (results / "report.md").read_text()
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium: `make browser` installs Debian's (CI does)")
    # Record each image's naturalWidth in the DOM once the page has loaded, then dump the DOM.
    probe = ("<script>window.addEventListener('load', () => document.querySelectorAll('img.report-figure')"
             ".forEach(i => i.setAttribute('data-width', i.naturalWidth)));</script></body>")
    page = tmp_path / "probe.html"
    page.write_text(html.replace("</body>", probe))
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    widths = np.array([int(w) for w in re.findall(r'data-width="(\d+)"', dom)])
    assert len(widths) == n_figures and (widths > 0).all(), f"figures that did not load: {widths}"


def test_paper_values_given_in_the_declaration_are_compared_per_column(tmp_path):
    results = tmp_path / "results"
    (results / "t").mkdir(parents=True)
    pd.DataFrame({"d": ["25", "50", "test size"], "a": [229, 1500, 3372], "b": [880, 6498, 10000]}).to_csv(
        results / "t" / "t.csv", index=False)
    specs = [{"table": "t/t.csv", "key": ["d"], "ours": col, "tolerance": 20,
              "paper": [{"d": 25, "paper": p25}, {"d": 50, "paper": p50}]}
             for col, p25, p50 in (("a", 229, 1515), ("b", 880, 6498))]
    decl = {"family": "f", "outputs": ["t/t.csv"], "relation": {"paper": {"kind": "same", "compare": specs}}}
    a = assess("p", {"item": "Table 4.2", "title": "t"}, decl, results, "paper")
    assert a.status == "within tolerance" and a.comparison["diff"].tolist() == [0, -15, 0, 0]
    specs[0]["tolerance"] = 10
    assert assess("p", {"item": "Table 4.2", "title": "t"}, decl, results, "paper").status == "differs"


def test_items_of_a_family_that_did_not_run_are_not_run():
    decl = {"family": "theory", "outputs": ["x.png"], "relation": {"offline": {"kind": "same"}}}
    a = assess("p", {"item": "Fig. 1", "title": "t"}, decl, Path("/nonexistent"), "offline", families=["detect"])
    assert (a.status, a.line) == ("not run", "not run: the theory family is disabled in this run")


def test_a_missing_compared_table_makes_the_item_missing_not_the_run_fail(tmp_path):
    decl = {"family": "f", "outputs": [], "relation": {"offline": {"kind": "same"}},
            "compare": {"table": "t/gone.parquet", "key": ["k"], "ours": "a", "paper": "b"}}
    a = assess("p", {"item": "Table 1", "title": "t"}, decl, tmp_path, "offline")
    assert (a.status, a.missing) == ("missing", ["t/gone.parquet"])


def test_a_compare_naming_an_unknown_column_is_one_line_error(small_run):
    _, results = small_run
    decl = {"family": "fam", "outputs": ["fam/t.parquet"], "relation": {"offline": {"kind": "same"}},
            "compare": {"table": "fam/t.parquet", "key": ["k"], "ours": "nope", "paper": "paper"}}
    with pytest.raises(DeclarationError, match=r"fam\.yaml: p Fig\. 1: compare names column 'nope'"):
        assess("p", {"item": "Fig. 1", "title": "t"}, decl, results, "offline")
