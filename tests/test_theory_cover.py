"""Cover's count (thesis Thm 5.1) against enumeration of all 2^n assignments with the core."""

import math

import pytest

from argmaxable.theory.cover import cover_count, enumeration_table, log10_percentage


def test_cover_count_small_values():
    assert cover_count(4, 2) == 8  # 2 (C(3,0) + C(3,1))
    assert cover_count(5, 3) == 2 * (1 + 4 + 6)
    assert cover_count(6, 6) == 2**6 and cover_count(6, 9) == 2**6  # d >= n: every assignment


def test_half_of_the_assignments_at_d_equal_n_over_2():
    # sum_{i<500} C(999, i) = 2^998 by symmetry, so exactly 50% at n = 1000, d = 500 (thesis Fig. 5.2).
    assert cover_count(1000, 500) == 2**999
    assert log10_percentage(1000, 500) == pytest.approx(math.log10(50))
    assert log10_percentage(1000, 1) == pytest.approx(math.log10(2 * 100) - 1000 * math.log10(2))


def test_enumeration_matches_cover():
    df = enumeration_table(6, seed=2, bound=1e4, eps=1e-8)
    assert (df["enumerated"] == df["cover"]).all(), df[df["enumerated"] != df["cover"]]
    assert df["undecided"].sum() == 0
