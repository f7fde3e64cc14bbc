"""Text from models and files written where it stays inert: Markdown tables whose
cells cannot become HTML, links, new cells or rows; CSV cells a spreadsheet never runs as formulas, read back
unchanged; terminal lines without escape sequences."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argmaxable.provenance import write_table
from argmaxable.text import csv_cell, csv_frame, csv_uncell, markdown_cell, markdown_table, printable

HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "a|b", "line\n# heading\n| x | y |",
           "[click](javascript:alert(1))", "`code`", "back\\|slash", "=HYPERLINK(\"http://x\")", "-ing", "'s",
           "\x1b[31mred", "plain"]


def test_markdown_tables_keep_one_row_per_record_and_no_markup(tmp_path):
    """As quant_changes.md, lm tables and every other .md table are written: through write_table."""
    df = pd.DataFrame({"model": HOSTILE, "token": HOSTILE[::-1], "count": range(len(HOSTILE))})
    write_table(df, tmp_path / "t.md")
    lines = (tmp_path / "t.md").read_text().splitlines()
    assert len(lines) == len(HOSTILE) + 2  # header, rule, one line per row
    assert {line.count("|") for line in lines} == {4}  # three cells each
    text = "\n".join(lines)
    for raw in ("<script>", "<img", "](javascript", "`code`", "\x1b"):
        assert raw not in text
    assert "&lt;script&gt;" in text and "a&#124;b" in text and "\\x1b&#91;31mred" in text


def test_csv_cells_never_start_a_formula_and_read_back_unchanged(tmp_path):
    df = pd.DataFrame({"token": HOSTILE, "value": [-1.5] * len(HOSTILE)})
    write_table(df, tmp_path / "t.csv")
    raw = pd.read_csv(tmp_path / "t.csv", keep_default_na=False)
    assert not raw["token"].str.startswith(("=", "+", "-", "@", "\t", "\r")).any()
    assert raw["value"].tolist() == [-1.5] * len(HOSTILE)  # numbers are numbers, not text
    assert csv_frame(raw, csv_uncell)["token"].tolist() == HOSTILE


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_escapes_round_trip_and_stay_inert(text):
    assert csv_uncell(csv_cell(text)) == text
    cell = markdown_cell(text)
    assert not set(cell) & set("<>|[]`\n\r\x1b") and "\\" not in cell.replace("\\x", "")
    assert "\n" not in printable(text) and "\x1b" not in printable(text)


@pytest.mark.parametrize("floatfmt", ["g", ".3f"])
def test_markdown_table_keeps_numbers_as_numbers(floatfmt):
    table = markdown_table(pd.DataFrame({"x|y": [1.23456], "n": [3]}), floatfmt=floatfmt)
    assert "x&#124;y" in table and ("1.23456" in table or "1.235" in table)
