"""The replication report: declarations cover the catalogue, statuses follow the files, the HTML renders."""

from __future__ import annotations

import json
import os
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
    coverage_counts,
    fill,
    load_catalogue,
    load_declarations,
    make_report,
    read_value,
    render_markdown,
)

REPORT_DIR = Path(__file__).resolve().parents[1] / "workflow" / "report"


def test_catalogue_lists_every_item_once_and_every_item_is_declared_or_says_why_not():
    """Silence is no status: every table and figure the papers' outlines hold is an item, and each item is declared
    by a family or carries the reason it is out of scope."""
    catalogue = load_catalogue(REPORT_DIR / "papers.yaml")
    keys = [(p, it["item"]) for p, spec in catalogue.items() for it in spec["items"]]
    # ACL 2022: 21 tables and figures, §4.1 and §5.1; thesis: 74 (chapters 1-3 too); Basri & Jacobs: 8
    assert len(keys) == len(set(keys)) == 105
    floats = {(p, f[2]) for p, spec in catalogue.items() for f in spec["floats"]}
    assert floats - set(keys) == set(), "tables or figures of a paper's outline missing from its items"
    decls = load_declarations(REPORT_DIR, catalogue)
    silent = [k for p, spec in catalogue.items() for it in spec["items"]
              if (k := (p, it["item"])) not in decls and not it.get("out_of_scope")]
    assert silent == [], "catalogue items with neither a family declaration nor an out-of-scope reason"
    scoped = [(p, it["item"]) for p, spec in catalogue.items() for it in spec["items"] if it.get("out_of_scope")]
    assert len(scoped) == 43 and all(p == "thesis" and it.split()[1][0] in "123" for p, it in scoped)
    assert set(scoped) & set(decls) == set()
    a = assess("thesis", next(it for it in catalogue["thesis"]["items"] if it["item"] == "Fig. 2.12"), None,
               Path("/nonexistent"), "offline")
    assert a.status == "out of scope" and a.line.startswith("out of scope: a conceptual illustration")


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
         "compare": {"table": "fam/t.parquet", "key": ["k"], "ours": "ours", "paper": "paper",
                     "where": {"k": [1, 2]}, "cite": 3}},
        {"paper": "p", "item": "Fig. 2", "outputs": ["fam/t.parquet"], "relation": same,
         "compare": {"table": "fam/t.parquet", "key": ["k"], "ours": "ours", "paper": "paper", "tolerance": 2,
                     "tolerance_reason": "rounding in the paper", "cite": 3}},
        {"paper": "p", "item": "Fig. 3", "outputs": ["fam/t.parquet"], "relation": same,
         "compare": {"table": "fam/t.parquet", "key": ["k"], "ours": "ours", "paper": "paper", "cite": [3, 4]}},
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
    specs = [{"table": "t/t.csv", "key": ["d"], "ours": col, "tolerance": 20, "tolerance_reason": "retrained",
              "cite": 9,
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
            "compare": {"table": "t/gone.parquet", "key": ["k"], "ours": "a", "paper": "b", "cite": 1}}
    a = assess("p", {"item": "Table 1", "title": "t"}, decl, tmp_path, "offline")
    assert (a.status, a.missing) == ("missing", ["t/gone.parquet"])


def test_a_compare_naming_an_unknown_column_is_one_line_error(small_run):
    _, results = small_run
    decl = {"family": "fam", "outputs": ["fam/t.parquet"], "relation": {"offline": {"kind": "same"}},
            "compare": {"table": "fam/t.parquet", "key": ["k"], "ours": "nope", "paper": "paper", "cite": 1}}
    with pytest.raises(DeclarationError, match=r"fam\.yaml: p Fig\. 1: compare names column 'nope'"):
        assess("p", {"item": "Fig. 1", "title": "t"}, decl, results, "offline")


def _compare_decl(**spec) -> dict:
    return {"family": "fam", "outputs": ["fam/t.parquet"], "relation": {"offline": {"kind": "same"}},
            "compare": {"table": "fam/t.parquet", "key": ["k"], "ours": "ours", "paper": "paper", **spec}}


def test_a_tolerance_never_admits_the_difference_it_equals_and_self_checks_are_not_matches(small_run):
    _, results = small_run  # ours 10, 20, 31 against 10, 20, 30
    entry = {"item": "Fig. 1", "title": "t"}
    at_diff = assess("p", entry, _compare_decl(tolerance=1, tolerance_reason="r", cite=1), results, "offline")
    assert at_diff.status == "differs"  # |diff| = 1 is not inside ±1
    assert assess("p", entry, _compare_decl(tolerance=1.5, tolerance_reason="r", cite=1), results,
                  "offline").status == "within tolerance"
    own = assess("p", entry, _compare_decl(self_check="our formula", where={"k": [1, 2]}), results, "offline")
    assert own.status == "self-check" and "our formula" in own.line
    assert assess("p", entry, _compare_decl(self_check="our formula"), results, "offline").status == "differs"
    counts = coverage_counts([own, at_diff])
    assert (counts["self-check"], counts["exact match"], counts["differs"]) == (1, 0, 1)


@pytest.mark.parametrize(("spec", "message"), [
    ({}, r"needs `cite`"),
    ({"cite": 1, "tolerance": 2}, r"tolerance without `tolerance_reason`"),
])
def test_a_compare_without_citation_or_a_tolerance_without_reason_is_one_line_error(tmp_path, spec, message):
    d = _catalogue(tmp_path, [{"paper": "p", "item": "Fig. 1", "outputs": ["t.parquet"],
                               "relation": {"offline": {"kind": "same"}},
                               "compare": {"table": "t.parquet", "key": ["k"], "ours": "a", "paper": "b", **spec}}])
    with pytest.raises(DeclarationError, match=message):
        load_declarations(d, load_catalogue(d / "papers.yaml"))


def test_note_numbers_are_read_back_from_the_files_they_cite(tmp_path):
    results = tmp_path / "results"
    for head, times in (("bsl", [30.25, 29.5]), ("dft", [31.0, 33.0])):
        for seed, t in enumerate(times):
            run = results / "runs" / head / f"seed{seed}"
            run.mkdir(parents=True)
            (run / "train.json").write_text(json.dumps({"time_to_best_s": t, "wall_time_s": 10.0 * (seed + 1),
                                                        "epochs": 4}))
    pd.DataFrame({"d": [8, 16, 32], "m": [1, 3, 6]}).to_csv(results / "fit.csv", index=False)
    decl = {"family": "fam", "outputs": ["fit.csv"],
            "values": {"bsl": {"glob": "runs/bsl/*/train.json", "key": "time_to_best_s", "agg": "mean", "fmt": ".2f"},
                       "dft": {"glob": "runs/dft/*/train.json", "key": "time_to_best_s", "agg": "mean"},
                       "epoch_max": {"glob": "runs/*/*/train.json", "key": "wall_time_s", "per": "epochs",
                                     "agg": "max"},
                       "slope": {"file": "fit.csv", "column": "m", "x": "d", "agg": "slope", "fmt": ".4f"},
                       "intercept": {"file": "fit.csv", "column": "m", "x": "d", "agg": "intercept", "fmt": ".4f"},
                       "m16": {"file": "fit.csv", "column": "m", "where": {"d": 16}}},
            "claim": {"text": "the DFT converges faster", "cite": 7,
                      "check": [{"left": "dft", "op": "<", "right": "bsl"}], "cause": "DFT {dft} s vs BSL {bsl} s"},
            "relation": {"offline": {"kind": "substitute", "note": "mean {dft} vs {bsl} s; epochs up to {epoch_max} "
                                     "s; m = {slope} d {intercept}, m(16) = {m16}, bound {cfg:detect.bound}"}}}
    papers = {"p": {"short": "Paper 2020", "seed": "s.txt", "sections": [[1, "§1"], [5, "§2"]],
                    "floats": [[6, 8, "Table 1"]]}}
    a = assess("p", {"item": "Fig. 1", "title": "t"}, decl, results, "offline", papers=papers,
               config={"detect": {"bound": 100.0}})
    slope, intercept = np.polyfit([8, 16, 32], [1, 3, 6], 1)
    assert a.line == (f"substitute data: mean 32 vs 29.88 s; epochs up to 5 s; m = {slope:.4f} d {intercept:.4f}, "
                      "m(16) = 3, bound 100; ours differs from the paper's claim")
    assert a.claim["verdict"] == "differs" and a.claim["cause"] == "DFT 32 s vs BSL 29.88 s"
    assert a.claim["cite"] == "Paper 2020 Table 1 — line 7 of s.txt"  # the place first, the line key after
    # the declared cause has no full stop; the rendered sentence ends one before whatever follows
    catalogue = {"p": {"title": "P", "seed": "s.txt"}}
    assert "Cause: DFT 32 s vs BSL 29.88 s.\n" in render_markdown(catalogue, [a], {}, results)
    # every number the note states is one the files hold
    for number in re.findall(r"\d+(?:\.\d+)?", a.line.split("bound")[0]):
        assert float(number) in {32.0, 29.88, 5.0, round(slope, 4), abs(round(intercept, 4)), 3.0, 16.0, 1.0}


def test_a_value_over_no_row_is_a_zero_count_or_none_in_prose(tmp_path):
    """A quantisation run whose only type was bit-identical has no checked head: prose said 'of nan model(s)'."""
    pd.DataFrame({"model": ["smol"], "identical": [True]}).to_parquet(tmp_path / "q.parquet")
    spec = {"file": "q.parquet", "column": "model", "where": {"identical": False}}
    models, names = (read_value(spec | {"agg": agg}, tmp_path) for agg in ("nunique", "distinct"))
    assert fill("of {m} model(s) ({n})", {"m": models, "n": names}, {}) == "of 0 model(s) (none)"


def test_a_placeholder_naming_no_value_is_one_line_error(tmp_path):
    d = _catalogue(tmp_path, [{"paper": "p", "item": "Fig. 1", "outputs": ["a.png"],
                               "relation": {"offline": {"kind": "same", "note": "took {seconds} s"}}}])
    with pytest.raises(DeclarationError, match=r"note names \{seconds\}, which no `values` entry declares"):
        load_declarations(d, load_catalogue(d / "papers.yaml"))


def test_items_beyond_the_papers_have_their_own_section_and_count(small_run):
    report_dir, results = small_run
    fam = yaml.safe_load((report_dir / "fam.yaml").read_text())
    fam["items"].append({"beyond": True, "item": "quantisation", "title": "Unargmaxable tokens after int4",
                         "outputs": ["fam/b.png"], "relation": {"offline": {"kind": "same", "note": "ours only"}}})
    (report_dir / "fam.yaml").write_text(yaml.safe_dump(fam))
    items = make_report(report_dir, results, results / "report.md", results / "report.html", experiment="offline")
    beyond = [a for a in items if a.status == "beyond the papers"]
    assert [a.item for a in beyond] == ["quantisation"]
    md = (results / "report.md").read_text()
    assert md.index("## Beyond the papers") > md.index("### Fig. 7")
    assert "7 items of the papers" in md and "1 items beyond the papers" in md


REPO = Path(__file__).resolve().parents[1]
# The papers' plain-text copies are not in the repository: the tests that read them find them in this folder and
# skip without it (`make test` sets it to the checkout's ../shared/seeds where that exists).
SEEDS = Path(os.environ["ARGMAXABLE_SEEDS"]) if os.environ.get("ARGMAXABLE_SEEDS") else None


def _all_prose(decls: dict, methods: list[dict]) -> list[tuple[str, str]]:
    from argmaxable.report.declarations import _prose

    return [(f"{k[0]} {k[1]} {w}", t) for k, v in decls.items() for w, t in _prose(v)] + \
        [(f"methods: {m['what']}", m["ours"]) for m in methods]


def test_no_declared_prose_types_a_measured_number_and_every_placeholder_resolves():
    from argmaxable.config import load_config, to_plain
    from argmaxable.report import PLACEHOLDER, bare_numbers, load_methods
    from argmaxable.report.query import _config_value

    catalogue = load_catalogue(REPORT_DIR / "papers.yaml")
    decls = load_declarations(REPORT_DIR, catalogue)
    methods = load_methods(REPORT_DIR / "papers.yaml")
    config = to_plain(load_config())
    bare = {where: found for where, text in _all_prose(decls, methods) if (found := bare_numbers(text))}
    assert bare == {}, f"measured numbers typed into prose (write a {{value}} placeholder): {bare}"
    for where, text in _all_prose(decls, methods):
        for name in PLACEHOLDER.findall(text):
            if name.startswith("cfg:"):
                assert "not recorded" not in str(_config_value(config, name[4:])), f"{where}: {name}"
    assert bare_numbers("mean 1.8 vs 1.7 min, 2-17 s per epoch, 14 of 15 runs, 4.8e-9, 9.1x") == [
        "1.8", "1.7 min", "17 s", "14 of 15", "4.8e-9", "9.1x"]
    assert bare_numbers("Fig. 5.2, Tables 5.1 and 5.2, Table 4.1, d = 2, {took} s, n <= 5") == []


def _seed_lines(catalogue: dict, paper: str, cite) -> str:
    seed = catalogue[cite["paper"]]["seed"] if isinstance(cite, dict) else catalogue[paper]["seed"]
    lines = cite["line"] if isinstance(cite, dict) else cite
    text = (SEEDS / seed).read_text().splitlines()
    return " ".join(text[n - 1] for n in (lines if isinstance(lines, list) else [lines]))


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d+(?:[./]\d+)?", text)


def test_paper_numbers_in_claims_and_tables_are_printed_on_the_cited_seed_lines():
    if SEEDS is None or not SEEDS.is_dir():
        pytest.skip(f"the papers' texts are not here: set ARGMAXABLE_SEEDS to their folder (now {SEEDS})")
    from argmaxable.report import load_methods

    catalogue = load_catalogue(REPORT_DIR / "papers.yaml")
    checked = 0
    for (paper, item), decl in load_declarations(REPORT_DIR, catalogue).items():
        for holder in [decl, *decl.get("relation", {}).values()]:
            if claim := holder.get("claim"):
                line = _seed_lines(catalogue, paper, claim["cite"])
                missing = [n for n in _numbers(claim["text"]) if n not in _numbers(line)]
                assert not missing, f"{paper} {item}: claim numbers {missing} are not on its seed line"
                checked += 1
            if pv := holder.get("paper_values"):
                line = _seed_lines(catalogue, paper, pv["cite"])
                for row in pv["rows"]:
                    for v in row.values():  # numbers must be printed there; labels name the row
                        number = re.fullmatch(r"\d+(?:[./]\d+)?", str(v))
                        assert not number or str(v) in line, f"{paper} {item}: {v!r} is not on its lines"
                checked += 1
            specs = holder.get("compare") or []
            for spec in specs if isinstance(specs, list) else [specs]:
                if spec.get("cite") and isinstance(spec.get("paper"), list):
                    line = _seed_lines(catalogue, paper, spec["cite"])
                    assert all(str(r["paper"]) in _numbers(line) for r in spec["paper"]), f"{paper} {item}"
                    checked += 1
    for m in load_methods(REPORT_DIR / "papers.yaml"):
        line = _seed_lines(catalogue, "", m["cite"])
        assert all(n in _numbers(line) for n in _numbers(m["paper"])), m["what"]
    assert checked >= 15


def test_method_differences_come_from_the_config_and_repeat_on_their_items(small_run):
    from argmaxable.core.reflect import stall_window
    from argmaxable.report import method_differences

    report_dir, results = small_run
    catalogue = load_catalogue(report_dir / "papers.yaml")
    methods = [{"what": "stall", "ours": "{stall_min}-{stall_max} steps, patience {cfg:detect.patience}",
                "paper": "patience 2500", "cite": {"paper": "p", "line": 4}, "items": ["p Fig. 4"]}]
    filled = method_differences(methods, catalogue, results, {"detect": {"patience": 2500}})
    assert filled[0]["ours"] == f"{stall_window(10**9, 1)}-{stall_window(1, 10**9)} steps, patience 2500"
    assert filled[0]["cite"] == "p front matter — line 4 of s.txt"  # no outline: the text before any section
    items = assess_all(catalogue, load_declarations(report_dir, catalogue), results, "offline", methods=filled)
    assert [a.item for a in items if any("method: stall" in d for d in a.differences)] == ["Fig. 4"]


def test_readme_blocks_are_generated_from_the_run_summary(small_run):
    from argmaxable.report import README_BLOCKS, documents, readme_blocks, update_readme

    report_dir, results = small_run
    detect = results / "detect" / "tiny"
    detect.mkdir(parents=True)
    (detect / "summary.json").write_text(json.dumps({"n": 5, "d": 2, "unargmaxable": 1, "seconds": 0.25,
                                                     "activation_box": {"unargmaxable": 2}}))
    studied = results / "detect" / "big"
    studied.mkdir(parents=True)
    (studied / "summary.json").write_text(json.dumps({"n": 9, "d": 2, "unargmaxable": 6, "seconds": 1.0}))
    (results / "detect" / "study").mkdir()
    (results / "detect" / "study" / "big.json").write_text(json.dumps({"boxes": [
        {"box": "paper", "unargmaxable": 6, "ties": 2, "strictly_inside": 4, "near_ties": 3}]}))
    pd.DataFrame({"head": ["linear", "dft"], "d": [4, 4], "held-out perplexity": [249.0, 1081.0],
                  "tokens unargmaxable": [3782, 0], "rankings argmaxable": [None, 50.0],
                  "rankings sampled": [None, 50.0], "train cpu seconds": [40.0, 60.0]}).to_parquet(
        results / "lm_prevention.parquet")
    (results / "lm" / "tables").mkdir(parents=True)
    (results / "lm_prevention.parquet").rename(results / "lm" / "tables" / "lm_prevention.parquet")
    make_report(report_dir, results, results / "report.md", results / "report.html", experiment="offline",
                out_summary=results / "report_summary.json")
    summary = json.loads((results / "report_summary.json").read_text())
    assert summary["coverage"]["items"] == 7 and summary["models"][1]["unargmaxable"] == 1
    blocks = readme_blocks(summary)
    text = "a\n<!-- generated:coverage -->\nold 59 items\n<!-- /generated:coverage -->\nb <!-- generated:models -->" \
           "<!-- /generated:models -->" + "".join(f"<!-- generated:{b} --><!-- /generated:{b} -->"
                                                  for b in ("prevention", "quant"))
    out = update_readme(text, blocks)
    assert "old 59" not in out and summary["coverage_line"] in out
    assert "| `tiny` | 5 x 2 | 1 | not studied | 2 | 0.2 |" in out  # no LM study record: no split
    assert "| `big` | 9 x 2 | 6 | 2 / 3 / 1 |  | 1.0 |" in out  # ties / near-ties / strictly inside, not near
    assert "| linear | 4 | 249.0 | 3782 |  | 40 |  |" in out and "| dft | 4 | 1081.0 | 0 | 50 / 50 | 60 |  |" in out
    assert blocks["quant"].startswith("Not made by this run")  # no quantisation table in this run
    assert update_readme(out, blocks) == out  # idempotent
    pages = "".join(page.read_text() for page in documents(REPO / "README.md"))
    assert all(pages.count(f"<!-- generated:{b} -->") == pages.count(f"<!-- /generated:{b} -->") == 1
               for b in README_BLOCKS)
    with pytest.raises(DeclarationError, match="no <!-- generated:coverage -->"):
        update_readme("no markers", blocks)


def test_a_value_naming_a_column_its_file_lacks_is_one_line_error(small_run):
    _, results = small_run
    decl = {"family": "fam", "outputs": ["fam/t.parquet"], "relation": {"offline": {"kind": "same", "note": "{v}"}},
            "values": {"v": {"file": "fam/t.parquet", "column": "nope"}}}
    with pytest.raises(DeclarationError, match=r"fam\.yaml: p Fig\. 1: a `values` entry names something"):
        assess("p", {"item": "Fig. 1", "title": "t"}, decl, results, "offline")


def test_transcribed_paper_tables_are_the_numbers_on_the_cited_seed_lines():
    if SEEDS is None or not SEEDS.is_dir():
        pytest.skip(f"the papers' texts are not here: set ARGMAXABLE_SEEDS to their folder (now {SEEDS})")
    from argmaxable.theory.reference import (
        BASRI_JACOBS_APPENDIX_B,
        BASRI_JACOBS_TABLE1,
        REGIONS_BIAS,
        REGIONS_NO_BIAS,
    )

    catalogue = load_catalogue(REPORT_DIR / "papers.yaml")
    decls = load_declarations(REPORT_DIR, catalogue)

    def cited(paper, item, i=0):
        specs = decls[(paper, item)]["compare"]
        spec = specs[i] if isinstance(specs, list) else specs
        lines = (SEEDS / catalogue[paper]["seed"]).read_text().splitlines()
        return [lines[n - 1] for n in (spec["cite"] if isinstance(spec["cite"], list) else [spec["cite"]])]

    for paper, item, grid in (("acl2022", "Table 2", REGIONS_NO_BIAS), ("acl2022", "Table 3", REGIONS_BIAS),
                              ("thesis", "Table A.1", REGIONS_NO_BIAS), ("thesis", "Table A.2", REGIONS_BIAS)):
        rows = [_numbers(line)[-11:] for line in cited(paper, item)]  # n, then d = 1..10, in that paper's seed
        assert {(int(r[0]), d): int(v) for r in rows for d, v in enumerate(r[1:], start=1)} == grid, (paper, item)
    printed = [line.split("\t") for line in cited("basri_jacobs", "Table 1")]
    assert [(m, int(n), int(d), int(v)) for m, n, d, v in printed] == list(BASRI_JACOBS_TABLE1.itertuples(
        index=False, name=None))
    line = cited("basri_jacobs", "Fig. 5")[0]
    assert all(f"m = {BASRI_JACOBS_APPENDIX_B[k]}" in line for k in ("m_bound", "m_simulation"))


def test_a_long_table_is_whole_paged_sorted_and_searched_and_its_glyphs_ship_in_the_page(small_run, tmp_path):
    """Every row of a long table is in the page (its first page drawn without scripts); in a headless browser the
    pager pages, sorts and searches all of them, an empty table says "none", and the characters beyond Latin load
    from the font subset shipped in the page (DejaVu Sans, from matplotlib: Hebrew)."""
    import matplotlib

    report_dir, results = small_run
    tokens = [f"{'שלום'[i % 4]}{i}" for i in range(60)]
    tokens[40] = "<!--</script>"  # a token that would end the page's script if written raw
    pd.DataFrame({"token": tokens, "rank": list(range(60, 0, -1))}).to_parquet(results / "fam" / "long.parquet")
    pd.DataFrame({"token": pd.Series([], dtype=str)}).to_parquet(results / "fam" / "empty.parquet")
    fam = yaml.safe_load((report_dir / "fam.yaml").read_text())
    fam["items"][3]["outputs"] += ["fam/long.parquet", "fam/empty.parquet"]
    fam["items"][0]["outputs"] += ["fam/b.png"]  # Fig. 4 shows it again: drawn once, then linked
    fam["items"][3]["links"] = [{"glob": "fam/*.png", "title": "cards"}, {"glob": "fam/*.card", "title": "none yet"}]
    (report_dir / "fam.yaml").write_text(yaml.safe_dump(fam))
    dejavu = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
    make_report(report_dir, results, results / "report.md", results / "report.html", experiment="offline",
                fonts=[dejavu])
    page = (results / "report.html").read_text()
    assert page.count("class='report-figure'") == 2 and "fam/b.png: shown above under" not in page
    assert "<code>b.png</code>: shown above under <a href='#p-fig-1'>p Fig. 1</a>" in page
    assert all(t in page for t in tokens[:40]) and "<p class='none'>none</p>" in page
    assert "\\u003c!--\\u003c/script>" in page  # the raw token is in the rows, no tag in the script
    assert "<p>cards: <a href='fam/a.png'>a.png</a>, <a href='fam/b.png'>b.png</a></p>" in page
    assert "<p>none yet: none</p>" in page
    assert "4 from DejaVu Sans" in page and "unicode-range:U+05D5,U+05DC,U+05DD,U+05E9" in page
    # the front matter opens with what a reader needs; the fonts' licences close the page
    head = page.split("<body>", 1)[1].split("<h2>", 1)[0]  # what a reader sees before the first section
    assert head.index("<li>what this is:") < head.index("<li>how to read:") < head.index("<li>citations:")
    assert "DejaVu" not in head and page.index("<h2>About this page</h2><p>Glyphs:") > page.index("<h2>Coverage")
    md = (results / "report.md").read_text()
    assert "(first 25 of 60 rows; report.html pages, sorts and searches them all)" in md and "`fam/empty.parquet`:" \
        "\n\nnone" in md
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium: `make browser` installs Debian's (CI does)")
    probe = """<script>window.addEventListener('load', () => document.fonts.ready.then(() => {
      const box = document.querySelector('div.paged'), out = document.body.dataset;
      const info = () => box.querySelector('.pager span').textContent;
      out.first = info(); box.querySelectorAll('.pager button')[1].click(); out.second = info();
      box.querySelector('th').click(); box.querySelector('th').click();
      out.top = box.querySelector('tbody td').textContent;
      const find = box.querySelector('input'); find.value = '\u05e9'; find.dispatchEvent(new Event('input'));
      out.found = info();
      find.value = '/script'; find.dispatchEvent(new Event('input'));
      out.raw = box.querySelector('tbody td').textContent;
      out.faces = [...document.fonts].map(f => f.status).join(' ');
      out.done = 'yes'; }));</script></body>"""
    (tmp_path / "probe.html").write_text(page.replace("</body>", probe))
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", (tmp_path / "probe.html").as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    got = dict(re.findall(r'data-(\w+)="([^"]*)"', dom.split("<body", 1)[1].split(">", 1)[0]))
    assert got.get("done") == "yes", dom[:500]
    assert (got["first"], got["second"]) == ("rows 1-25 of 60", "rows 26-50 of 60")
    assert got["top"] == "ש8"  # sorted twice by token: descending, the last letter and the largest text first
    assert got["found"] == "rows 1-14 of 14 matching (of 60)" and got["faces"] == "loaded"
    assert got["raw"] == "&lt;!--&lt;/script&gt;"  # the token as it is (escaped only in the dumped DOM)
