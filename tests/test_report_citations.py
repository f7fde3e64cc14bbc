"""The report's citations read without the papers' text files: each names the paper and its place (section, table
or figure), the line key after it. The outlines in papers.yaml that place a line are read back against the texts
where they are at hand (ARGMAXABLE_SEEDS), and no machine's path is written into the repository."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from argmaxable.report import citation, load_catalogue, load_declarations, load_methods, place

REPO = Path(__file__).resolve().parents[1]
REPORT_DIR = REPO / "workflow" / "report"
CATALOGUE = load_catalogue(REPORT_DIR / "papers.yaml")
SEEDS = Path(os.environ["ARGMAXABLE_SEEDS"]) if os.environ.get("ARGMAXABLE_SEEDS") else None


def _cites() -> list[tuple[str, str, object]]:
    """(where, paper, cite) for every citation the declarations and the method differences make."""
    out = []
    for (paper, item), decl in load_declarations(REPORT_DIR, CATALOGUE).items():
        for name, holder in [("", decl), *decl.get("relation", {}).items()]:
            claim, values = holder.get("claim") or {}, holder.get("paper_values") or {}
            specs = holder.get("compare") or []
            specs = specs if isinstance(specs, list) else [specs]
            out += [(f"{paper} {item} {name}", paper, c["cite"]) for c in [claim, values, *specs] if c.get("cite")]
    out += [(f"method {m['what']}", "", m["cite"]) for m in load_methods(REPORT_DIR / "papers.yaml")]
    return out


def test_every_citation_names_the_paper_and_a_place_a_reader_of_it_finds():
    cites = _cites()
    assert len(cites) > 40
    for where, paper, cite in cites:
        text = citation(cite, paper, CATALOGUE)
        name = CATALOGUE[cite["paper"] if isinstance(cite, dict) else paper]["short"]
        assert re.fullmatch(rf"{re.escape(name)} (§[\d.]+|App\. [A-H][\d.]*|(Table|Fig\.) [\dA-Z.]+)(, p\. \d+)?"
                            rf"(; .+)? — lines? [\d, -]+ of \d{{3}}_[0-9a-f]{{16}}\.txt", text), (where, text)


def test_a_line_is_placed_in_its_innermost_section_and_its_table_or_figure():
    acl = CATALOGUE["acl2022"]
    assert place(acl, 268) == "§4.1" and place(acl, 320) == "§5.1" and place(acl, 330) == "§5.2"
    assert place(acl, 587) == "Table 4" and place(acl, 671) == "Table 7"
    assert place(acl, 205) == "§3.3.1" and place(acl, 10) == "front matter"
    assert place(CATALOGUE["basri_jacobs"], 299) == "Fig. 5"  # in the text under App. C
    assert place(CATALOGUE["thesis"], 3038) == "Table 5.1, p. 164"
    assert citation({"paper": "thesis", "line": [2550, 2551, 2552, 2554]}, "acl2022", CATALOGUE) == \
        "Thesis Table 4.2, p. 135 — lines 2550-2552, 2554 of 001_b7c21f74bf9df842.txt"


def _listed(lines: list[str], heading: str, number: str, every: bool = False):
    """The page the thesis's contents (or its list of figures or tables) gives ``number`` (every: all of them,
    a figure listed twice)."""
    start = lines.index(heading)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("List of "))
    pages = [int(m.group(1)) for text in lines[start + 1:end]
             if (m := re.match(rf"{re.escape(number)}[\t ].*\t(\d+)\s*$", text))]
    return pages if every else pages[0]


@pytest.mark.parametrize("paper", sorted(CATALOGUE))
def test_the_outline_is_the_papers_own(paper):
    """Each section named at its first line, each table or figure's range holding its caption, and every caption
    of the text inside the range of a float of that name (so a cited caption or table row is named)."""
    if SEEDS is None or not SEEDS.is_dir():
        pytest.skip(f"the papers' texts are not here: set ARGMAXABLE_SEEDS to their folder (now {SEEDS})")
    spec = CATALOGUE[paper]
    lines = (SEEDS / spec["seed"]).read_text().splitlines()
    for first, name, *page in spec["sections"]:
        number = name.removeprefix("§").removeprefix("App. ")
        assert re.match(rf"(#+ )?{re.escape(number)} +[A-Z]", lines[first - 1]), (name, lines[first - 1][:60])
        assert not page or _listed(lines, "Contents", number) == page[0], (name, page)
    captions = [(i, m.group(1), m.group(2)) for i, text in enumerate(lines, 1)
                if (m := re.match(r"(Table|Figure) ([0-9A-Z]+(?:\.[0-9]+)?):", text))]
    for i, kind, number in captions:
        name = f"{'Table' if kind == 'Table' else 'Fig.'} {number}"
        assert any(f[2] == name and f[0] <= i <= f[1] for f in spec["floats"]), (paper, name, i)
    for _, _, name, *page in spec["floats"]:
        kind, number = name.split(" ")
        listed = "List of Figures" if kind == "Fig." else "List of Tables"
        assert not page or page[0] in _listed(lines, listed, number, every=True), (name, page)
    assert len(spec["floats"]) == len(captions)


def test_no_machine_path_is_written_into_the_repository():
    """A path of one machine's layout (a home, a work tree) means nothing on a reader's: the papers' texts are
    found through ARGMAXABLE_SEEDS."""
    machine = re.compile("(?<![\\w.])/(" + "|".join(["work", "home", "Users"]) + ")/")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split("\0")
    found = []
    for name in filter(None, tracked):
        path = REPO / name
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if machine.search(line)]
    assert found == [], f"machine paths in the repository: {found}"
