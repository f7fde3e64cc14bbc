"""What the theory and top-m rules write, and how they fail loudly.

Tables as parquet plus a readable markdown copy, figures as PNG plus PDF (each with its provenance sidecar,
:mod:`argmaxable.provenance`), and :class:`ReproductionError` for an exact result that differs from the paper.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from argmaxable.provenance import save_figure, write_table


class ReproductionError(AssertionError):
    """An exact result differs from the value published in a seed paper."""


def write_tables(tables: Mapping[str, pd.DataFrame], out: Mapping[str, str], config: Any = None,
                 **extra: Any) -> None:
    """Write each ``tables[key]`` to ``out[key]`` (.parquet) and to the same name with suffix .md."""
    for key, df in tables.items():
        path = Path(out[key])
        write_table(df, path, config=config, **extra)
        write_table(df, path.with_suffix(".md"), config=config, **extra)


def write_figure(fig, path: str | Path, config: Any = None, **extra: Any) -> None:
    """Save ``fig`` as ``path`` (.png) and beside it as .pdf, then close it (``extra``: e.g. ``inputs``, the files
    it was drawn from, for the sidecars)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    save_figure(fig, path, config=config, **extra)
    save_figure(fig, path.with_suffix(".pdf"), config=config, **extra)
    plt.close(fig)
