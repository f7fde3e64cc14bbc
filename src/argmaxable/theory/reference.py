"""The seeds' published numbers that the theory rules reproduce, stored as data, and the loud comparison.

Tables are transcribed from the plain-text seeds (cited per table) and parsed once; every rule compares its
exact cells with them through :func:`compare_cells`, which raises
:class:`~argmaxable.outputs.ReproductionError` listing every differing cell.
"""

from __future__ import annotations

import pandas as pd

from argmaxable.outputs import ReproductionError


def _grid(text: str) -> dict[tuple[int, int], int]:
    """Parse rows ``n v_1 ... v_10`` (d = 1..10) into {(n, d): value}."""
    cells = {}
    for line in text.strip().splitlines():
        n, *values = (int(tok) for tok in line.split())
        cells.update({(n, d): v for d, v in enumerate(values, start=1)})
    return cells


# Thesis Table A.1 (appendix A.1): feasible rankings of n categories, softmax(Wx), no bias.
REGIONS_NO_BIAS = _grid("""
2 2 2 2 2 2 2 2 2 2 2
3 2 6 6 6 6 6 6 6 6 6
4 2 12 24 24 24 24 24 24 24 24
5 2 20 72 120 120 120 120 120 120 120
6 2 30 172 480 720 720 720 720 720 720
7 2 42 352 1512 3600 5040 5040 5040 5040 5040
8 2 56 646 3976 14184 30240 40320 40320 40320 40320
9 2 72 1094 9144 45992 143712 282240 362880 362880 362880
10 2 90 1742 18990 128288 557640 1575648 2903040 3628800 3628800
""")

# Thesis Table A.2 (appendix A.1): feasible rankings of n categories, softmax(Wx + b).
REGIONS_BIAS = _grid("""
2 2 2 2 2 2 2 2 2 2 2
3 4 6 6 6 6 6 6 6 6 6
4 7 18 24 24 24 24 24 24 24 24
5 11 46 96 120 120 120 120 120 120 120
6 16 101 326 600 720 720 720 720 720 720
7 22 197 932 2556 4320 5040 5040 5040 5040 5040
8 29 351 2311 9080 22212 35280 40320 40320 40320 40320
9 37 583 5119 27568 94852 212976 322560 362880 362880 362880
10 46 916 10366 73639 342964 1066644 2239344 3265920 3628800 3628800
""")

# Basri & Jacobs Table 1 (appendix C): model, vocabulary N, embedding d, bound m at probability
# 0.99. The name "Falcon-40B" appears twice in the paper (d = 4544 and d = 8192); both rows are kept.
BASRI_JACOBS_TABLE1 = pd.DataFrame(
    [
        ("GPT2", 50257, 768, 26), ("BERT-Base", 30522, 768, 26), ("T5 Base", 32128, 768, 26),
        ("XLNet-Base", 32000, 768, 26), ("BERT-Large", 30522, 1024, 35), ("T5-Large", 32128, 1024, 35),
        ("XLNet-Large", 32000, 1024, 35), ("GPT2-XL", 50257, 1600, 54), ("Olmo2-1B", 100352, 2048, 66),
        ("Gamma2-2B", 256000, 2304, 70), ("TinyLLaMA", 32000, 2048, 71), ("Phi3-Mini", 32064, 3072, 107),
        ("Qwen3", 152064, 3584, 113), ("LLaMA3-8B", 128256, 4096, 131), ("MPT-7B", 50176, 4096, 139),
        ("LLaMA2-7B", 32000, 4096, 143), ("Falcon-40B", 65024, 4544, 152), ("LLaMA2-13B", 32000, 5120, 179),
        ("DeepSeek-V3", 129280, 7168, 230), ("Falcon-40B", 65024, 8192, 274),
        ("LLaMA2-70B", 32000, 8192, 287), ("GPT3-175B", 50257, 12288, 418),
    ],
    columns=["model", "N", "d", "m_paper"],
)

# Basri & Jacobs appendix B, Fig. 5: GPT-2-sized random matrix, probability 0.99 reached at
# m = 27 by the closed form and at m = 28 by their simulation.
BASRI_JACOBS_APPENDIX_B = {"N": 50257, "d": 768, "m_bound": 27, "m_simulation": 28}


def compare_cells(ours: pd.Series, paper: pd.Series, what: str) -> None:
    """Raise :class:`~argmaxable.outputs.ReproductionError` naming every cell where ``ours`` differs from ``paper``.

    Parameters
    ----------
    ours, paper : pandas.Series
        Values indexed by the same cell labels (e.g. ``(n, d)``); cells missing from ``paper`` are skipped.
    what : str
        Name of the table, used in the message.
    """
    common = ours.index.intersection(paper.index)
    diff = [(cell, ours[cell], paper[cell]) for cell in common if ours[cell] != paper[cell]]
    if diff:
        shown = "; ".join(f"{cell}: ours {a} vs paper {b}" for cell, a, b in diff[:20])
        raise ReproductionError(f"{what}: {len(diff)} of {len(common)} cells differ from the paper: {shown}")
