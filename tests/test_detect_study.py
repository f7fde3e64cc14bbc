"""The LM study: unargmaxable rows split into ties (exactly equal rows whose merged group is argmaxable, the lowest
id still emitted under first-index tie-break) and rows strictly inside, on a layer built here whose geometry is
known by hand (d = 2: a triangle, a point inside it, a copy of a vertex, a vertex's twin with a lower bias, and
a vertex moved inward by 2^-30, a near-tie)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from argmaxable.detect.check import check_model
from argmaxable.detect.loaders import load_model
from argmaxable.detect.study import make_study, nearest_rows, split_unargmaxable, study_model, tie_groups

DETECT = {"bound": 100.0, "patience": 2500, "eps": 1e-8, "solver": "highs", "workers": 1}
W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1], [1.0, 0.0], [0.0, 1.0], [1.0 - 2.0**-30, 0.0]])
B = np.array([0.0, 0.0, 0.0, 0.0, 0.0, -0.5, 0.0])  # row 5 repeats row 1's weights with a lower bias: dominated
TOKENS = ["a", "b", "c", "inside", "a-copy", "b-low", "a-near"]


@pytest.fixture
def checked(tmp_path):
    np.savez(tmp_path / "head.npz", W=W, b=B)
    (tmp_path / "vocab.json").write_text(json.dumps(TOKENS))
    model = {"name": "toy", "source": "file", "params": {"path": str(tmp_path / "head.npz"),
                                                         "vocab": str(tmp_path / "vocab.json")}}
    check_model(model, DETECT, tmp_path / "categories.parquet", tmp_path / "summary.json")
    return model, tmp_path


def test_tie_groups_need_equal_weights_and_bias():
    assert [g.tolist() for g in tie_groups(W, B)] == [[0, 4]]
    assert [g.tolist() for g in tie_groups(W)] == [[0, 4], [1, 5]]


def test_the_study_splits_ties_from_rows_strictly_inside(checked):
    model, root = checked
    record = study_model(model, DETECT, root / "categories.parquet", root / "summary.json", root / "toy.json",
                         root / "toy_tokens.parquet", key="toy")
    (paper,) = record["boxes"]
    assert (paper["unargmaxable"], paper["ties"], paper["strictly_inside"], paper["near_ties"]) == (5, 2, 3, 1)
    assert paper["emitted"] == [0]
    assert (record["n"], record["d"], record["tie_groups"], record["precision"]) == (7, 2, 1, "float64")
    tokens = pd.read_parquet(root / "toy_tokens.parquet").set_index("category")
    assert tokens.loc[[0, 4], "kind"].tolist() == ["tie", "tie"] and tokens.loc[[0, 4], "group"].tolist() == [0, 0]
    assert tokens.loc[[3, 5, 6], "kind"].tolist() == ["strictly inside", "strictly inside", "near-tie"]
    assert tokens["emitted"].to_dict() == {0: True, 3: False, 4: False, 5: False, 6: False}
    assert tokens.loc[6, "nearest"] in (0, 4) and tokens.loc[6, "distance"] == 2.0**-30
    assert tokens.loc[5, "nearest"] == 1 and tokens.loc[5, "distance"] == 0.5  # same weights, lower bias
    assert tokens.loc[0, "distance"] == 0.0 and tokens.loc[5, "token"] == "b-low"

    table = make_study([root / "toy.json"], [root / "toy_tokens.parquet"], root / "s.md", root / "s.parquet",
                       root / "t.parquet", root / "s.png")
    counts = ["# unargmaxable", "# ties", "# strictly inside", "of which near-ties"]
    assert table.loc[0, counts].tolist() == [5, 2, 3, 1]
    assert table.loc[0, "ids greedy decoding emits"] == "0" and table.loc[0, "n/d"] == 3.5
    assert (root / "s.png").stat().st_size > 0 and "| toy " in (root / "s.md").read_text()


def test_a_group_that_stays_unargmaxable_when_merged_is_strictly_inside(checked):
    model, _ = checked
    layer = load_model(model)
    layer.W = np.vstack([layer.W, [[0.1, 0.1]]])  # a copy of the inside point: a tie group inside the hull
    layer.b = np.append(layer.b, 0.0)
    frame = pd.DataFrame({"box": "paper", "category": np.arange(8), "status": ["unargmaxable" if i in (0, 3, 4, 5, 6, 7)
                          else "argmaxable" for i in range(8)], "token_type": ["normal"] * 7 + ["unused"]})
    out = split_unargmaxable(layer, frame, {"paper": {"lower": None, "upper": None}}, DETECT).set_index("category")
    assert out.loc[[3, 7], "kind"].tolist() == ["strictly inside"] * 2 and out.loc[7, "group"] == 3
    assert out.loc[7, "token_type"] == "unused" and not out["emitted"].loc[[3, 7]].any()


def test_nearest_rows_measure_the_largest_difference():
    nearest, distance = nearest_rows(np.array([[0.0, 0.0], [0.0, 3e-9], [5.0, -5.0]]), None, np.array([0, 2]))
    assert nearest.tolist() == [1, 0] and distance[0] == 3e-9 and distance[1] == 5.0


HOSTILE = ["a", "b", '"><img src=x onerror=alert(1)>', "<script>alert(1)</script>", "a|copy", "b\n# pwned\n| x |",
           "[click](javascript:alert(1))"]


def _cells_per_row(markdown: str) -> set[int]:
    """The number of cells of every table row (a row: a line that starts with '|')."""
    return {line.count("|") for line in markdown.splitlines() if line.startswith("|")}


def test_token_names_in_the_study_markdown_are_inert(tmp_path):
    """Token names went into lm_study.md raw: HTML, a '|' that splits a cell, a newline that
    starts a heading and a row."""
    np.savez(tmp_path / "head.npz", W=W, b=B)
    (tmp_path / "vocab.json").write_text(json.dumps(HOSTILE))
    model = {"name": "toy", "source": "file", "params": {"path": str(tmp_path / "head.npz"),
                                                         "vocab": str(tmp_path / "vocab.json")}}
    check_model(model, DETECT, tmp_path / "categories.parquet", tmp_path / "summary.json")
    study_model(model, DETECT, tmp_path / "categories.parquet", tmp_path / "summary.json", tmp_path / "toy.json",
                tmp_path / "toy_tokens.parquet", key="toy")
    make_study([tmp_path / "toy.json"], [tmp_path / "toy_tokens.parquet"], tmp_path / "s.md", tmp_path / "s.parquet",
               tmp_path / "t.parquet", tmp_path / "s.png")
    text = (tmp_path / "s.md").read_text()
    tables = text.split("\n\n")
    for block in tables:
        if block.startswith("|"):
            assert len(_cells_per_row(block)) == 1, block  # every row has the header's cells
    assert "<script>" not in text and "<img" not in text and "\n# pwned" not in text and "](javascript:" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "a&#124;copy" in text
