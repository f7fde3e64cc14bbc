"""Feasible-ranking counts against thesis Tables A.1/A.2 and enumeration with the core."""

import math

import numpy as np
import pandas as pd
import pytest

from argmaxable.outputs import ReproductionError
from argmaxable.theory.reference import REGIONS_BIAS, REGIONS_NO_BIAS, compare_cells
from argmaxable.theory.regions import (
    check_region_table,
    count_rankings,
    enumerate_rankings,
    region_table,
    stirling_first,
)


def test_stirling_numbers_of_the_first_kind():
    # c(5, k): 0, 24, 50, 35, 10, 1 (the coefficients of t(t+1)(t+2)(t+3)(t+4)).
    assert stirling_first(5) == (0, 24, 50, 35, 10, 1)
    assert sum(stirling_first(7)) == math.factorial(7)


@pytest.mark.parametrize(("n", "d", "bias", "expected"), [
    (4, 2, False, 12), (4, 2, True, 18),  # thesis Fig. 3.17, italic cells of Tables A.1/A.2
    (10, 9, False, 3628800), (10, 9, True, 3628800),  # d = n - 1: every ranking
    (10, 8, False, 2903040), (10, 8, True, 3265920),
    (7, 3, False, 352), (7, 3, True, 932),
    (10, 1, False, 2), (10, 1, True, 46),
])
def test_closed_form_cells(n, d, bias, expected):
    assert count_rankings(n, d, bias) == expected


@pytest.mark.parametrize(("bias", "table"), [(False, REGIONS_NO_BIAS), (True, REGIONS_BIAS)])
def test_closed_form_matches_every_thesis_cell(bias, table):
    assert len(table) == 90  # n = 2..10, d = 1..10
    assert all(count_rankings(n, d, bias) == v for (n, d), v in table.items())


def test_enumeration_with_the_core_matches_the_thesis():
    df = region_table(4, 4, 4, seed=1, bound=1e4, eps=1e-8)
    check_region_table(df)  # raises on any differing or undecided cell
    assert df["enumerated"].notna().sum() == 2 * (2 + 3 + 4)


def test_enumeration_of_the_toy_matrix():
    # 4 rows in general position in R^2 without bias: 12 of the 24 rankings (thesis Table A.1).
    W = np.random.default_rng(3).standard_normal((4, 2))
    assert enumerate_rankings(W, None, bound=100.0, eps=1e-8)["feasible"] == 12


def test_a_differing_cell_fails_loudly():
    ours = pd.Series({(4, 2): 12, (4, 3): 23})
    with pytest.raises(ReproductionError, match=r"\(4, 3\): ours 23 vs paper 24"):
        compare_cells(ours, pd.Series(REGIONS_NO_BIAS), "Table A.1")


def test_rule_fails_loudly_on_a_changed_thesis_cell(monkeypatch, tmp_path):
    from argmaxable.theory import regions

    monkeypatch.setattr(regions, "REGIONS_BIAS", {**REGIONS_BIAS, (4, 2): 19})
    out = {key: str(tmp_path / f"{key}.parquet") for key in ("table", "no_bias", "bias")}
    settings = {"max_n": 4, "max_d": 3, "enumerate_max_n": 2, "bound": 1e4, "eps": 1e-8}
    with pytest.raises(ReproductionError, match=r"\(4, 2\): ours 18 vs paper 19"):
        regions.run_regions(settings, out, seed=0)
    assert not any(tmp_path.iterdir())  # nothing written
