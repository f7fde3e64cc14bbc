"""The 2-D illustration of ACL 2022 Figs 1 and 2: four classes, c4 inside the triangle of c1, c2, c3.

Fig. 1 colours each input x by its argmax class (c4 never wins); Fig. 2 shows the weight vectors and their
convex hull. The core's verdicts for the same W go into a small table; c4 must be unargmaxable.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from argmaxable.core import check_categories
from argmaxable.outputs import ReproductionError, write_figure, write_tables

# A W in R^{4 x 2} like ACL 2022 Fig. 2: c1, c2, c3 span a triangle around the origin and c4 lies inside it.
TOY_W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
TOY_EXPECTED = ["argmaxable", "argmaxable", "argmaxable", "unargmaxable"]  # ACL 2022 Fig. 1: c4 never wins


def plot_toy(W: np.ndarray = TOY_W, extent: float = 3.0, pixels: int = 300):
    """Left: inputs coloured by argmax class (ACL 2022 Fig. 1). Right: weight vectors and their hull (Fig. 2)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    grid = np.linspace(-extent, extent, pixels)
    g1, g2 = np.meshgrid(grid, grid)
    winner = np.argmax(np.stack([g1.ravel(), g2.ravel()], axis=1) @ W.T, axis=1).reshape(g1.shape)
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.5, 3.6))
    left.imshow(winner, origin="lower", extent=(-extent, extent, -extent, extent),
                cmap=ListedColormap(colors), vmin=-0.5, vmax=len(W) - 0.5, interpolation="nearest")
    for i in np.unique(winner):
        left.text(g1[winner == i].mean(), g2[winner == i].mean(), f"c{i + 1}", ha="center", va="center")
    left.set_title("argmax class of x (ACL 2022 Fig. 1)", fontsize=9)
    left.set_xlabel("x1")
    left.set_ylabel("x2")
    hull = np.vstack([W[:3], W[:1]])
    right.plot(hull[:, 0], hull[:, 1], "k--", lw=0.8)
    for i, (w, color) in enumerate(zip(W, colors, strict=True)):
        right.annotate("", xy=w, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": color})
        right.text(w[0] * 1.1 + 0.05, w[1] * 1.1 + 0.05, f"c{i + 1}", color=color)
    right.set_xlim(-1.4, 1.4)
    right.set_ylim(-1.4, 1.4)
    right.set_aspect("equal")
    right.set_title("weight vectors: c4 inside the hull (ACL 2022 Fig. 2)", fontsize=9)
    fig.tight_layout()
    return fig


def run_toy(out: dict, config=None) -> None:
    """Rule ``plot_toy``: verdicts table (fails loudly unless only c4 is unargmaxable) and the figure.

    Parameters
    ----------
    out : dict
        Paths: ``table`` (.parquet, .md beside), ``figure`` (.png, .pdf beside).
    """
    res = check_categories(TOY_W)
    df = res.to_frame()[["item", "status", "radius", "steps"]]
    df.insert(0, "class", [f"c{i + 1}" for i in df["item"]])
    df["expected"] = TOY_EXPECTED
    if (df["status"] != df["expected"]).any():
        raise ReproductionError(f"002 Fig. 1 toy: the core's verdicts differ from the figure:\n{df}")
    write_tables({"table": pd.DataFrame(df)}, out, config)
    write_figure(plot_toy(), out["figure"], config)
