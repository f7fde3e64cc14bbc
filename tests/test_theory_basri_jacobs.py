"""Basri & Jacobs' bound against their Table 1 (appendix C) and appendix B."""

import numpy as np
import pytest

from argmaxable.theory.basri_jacobs import bound, largest_m, simulate, table1
from argmaxable.theory.reference import BASRI_JACOBS_TABLE1


@pytest.mark.parametrize(("N", "d", "m"), [(50257, 768, 26), (32000, 4096, 143), (50257, 12288, 418)])
def test_named_rows(N, d, m):  # GPT2, LLaMA2-7B, GPT3-175B
    assert largest_m(N, d, 0.99) == m


def test_all_22_rows_with_the_gumbel_form():
    df = table1(0.99)
    assert len(df) == 22
    assert (df["m_gumbel"] == df["m_paper"]).all(), df[df["m_gumbel"] != df["m_paper"]]


def test_direct_form_is_larger_by_up_to_11():
    df = table1(0.99)
    assert (df["direct_minus_paper"] >= 0).all()
    assert df["direct_minus_paper"].max() == 11  # GPT3-175B: 429 vs 418
    assert df.loc[df["model"] == "GPT3-175B", "m_direct"].item() == 429


def test_appendix_b_first_m_below_099():
    # Appendix B: the closed form reaches 0.99 "at m = 27" for a GPT-2-sized matrix (first m below 0.99).
    N, d = 50257, 768
    assert bound(N, d, 26) >= 0.99 > bound(N, d, 27)


def test_bound_rejects_m_outside_eq3():
    with pytest.raises(ValueError, match="m < d - 3"):
        bound(1000, 10, 7)


def test_simulation_sits_above_the_bound():
    # Appendix B: the bound slightly undershoots the simulation.
    m = np.array([2, 5, 8])
    sim = simulate(2000, 100, m, trials=200, matrices=2, seed=0)
    assert (sim >= bound(2000, 100, m) - 0.05).all()


def test_simulation_in_one_dimension_is_the_chance_of_an_extreme_row():
    # d = 1, m = 1: x = 1 / a_s, and a_j x < 1 for every other j exactly when a_s is the largest row (a_s > 0)
    # or the smallest (a_s < 0). Of N exchangeable rows that happens with probability 2 / N.
    N, trials = 10, 4000
    sim = simulate(N, 1, np.array([1]), trials=trials, matrices=40, seed=0)[0]
    assert abs(sim - 2 / N) < 5 * np.sqrt(2 / N * (1 - 2 / N) / trials)


def test_reference_table_is_complete():
    assert BASRI_JACOBS_TABLE1["m_paper"].tolist()[:3] == [26, 26, 26]
    assert BASRI_JACOBS_TABLE1["N"].min() == 30522
