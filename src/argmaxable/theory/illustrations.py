"""The papers' illustrations, drawn from small toy layers and checked with the core.

- ACL 2022 Fig. 3 (right column): the braid arrangement restricted to span(W) in the input plane, |C| = 3 and 4.
- ACL 2022 Fig. 7 (input-space panels a, c): the same |C| = 4 layer without and with a bias: 12 vs 18 rankings.
- ACL 2022 Fig. 8: building the braid arrangement for |C| = 3, d = 2 (weights, normals, hyperplanes, regions).
- ACL 2022 Figs 4, 5, 9 / thesis Fig. 4.4: braid reflection traced on a toy layer, and the combined algorithm's
  verdict per class.
- Thesis Fig. 4.1: n = 3 sigmoid classifiers in d = 2, the Chebyshev ball of each argmaxable assignment.
- Thesis Fig. 4.2: hyperplane overcrowding: more lines, more and smaller regions.

Every count printed on a figure comes from the core (rankings enumerated with the Chebyshev LP, assignments
checked with ``check_assignments``); rule ``plot_illustrations`` fails if a ranking count differs from the
figure captions' numbers (:data:`RANKINGS_PAPER`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from argmaxable.core import check_assignments, check_categories
from argmaxable.outputs import ReproductionError, write_figure, write_tables
from argmaxable.provenance import FIGURE_WIDTH, panel_grid
from argmaxable.rules import typed
from argmaxable.theory.cover import all_assignments
from argmaxable.theory.reference import compare_cells
from argmaxable.theory.regions import enumerate_rankings
from argmaxable.theory.schema import IllustrationsConfig
from argmaxable.theory.toy import TOY_W

# ACL 2022 Fig. 3 / Fig. 8: three classes around the origin (general position), the rows of W in R^{3 x 2}.
W3 = np.array([[1.0, 0.3], [-0.6, 0.9], [-0.4, -1.0]])
# Thesis Fig. 4.1: offsets for the same three rows read as sigmoid classifiers (7 of the 8 regions in the plane).
B3 = np.array([0.2, -0.25, 0.15])
# ACL 2022 Fig. 7: four classes in d = 2 with a bias not in the column space of W.
W4 = np.array([[1.0, 0.1], [0.2, 1.0], [-1.0, 0.3], [-0.2, -1.0]])
B4 = np.array([0.0, 0.35, -0.25, 0.3])
# The square |x_j| <= 4 holds a part of all 18 regions of Fig. 7(c) (with 1.5, two bounded ones lie outside).
FIG7_EXTENT = 4.0
FIG7_INSET = 0.7  # panel (c)'s bounded regions lie in this square, drawn again larger and labelled there
# Feasible rankings stated in the captions: ACL 2022 Fig. 3 (6/6 for |C| = 3, 12/24 for |C| = 4), Fig. 7 (12/24
# without a bias, 18/24 with one), Fig. 8 (3! = 6).
RANKINGS_PAPER = {("Fig. 3", 3, False): 6, ("Fig. 3", 4, False): 12, ("Fig. 7", 4, False): 12,
                  ("Fig. 7", 4, True): 18, ("Fig. 8", 3, False): 6}
# Thesis Fig. 4.4 / ACL 2022 Figs 4, 5: a layer showing the three outcomes of the combined algorithm. c1-c4 win at
# their start point x = w_t; the bias pulls c5 down, so braid reflection needs several steps; c6 is argmaxable
# only far out (the approximate stage gives up, the exact LP finds it); c7 lies inside the hull: unargmaxable.
REFLECT_W = np.array([[2.0, 0.0], [0.0, 2.0], [-2.0, 0.0], [0.0, -2.0], [1.3, 1.3], [-1.5, -1.5], [0.1, 0.1]])
REFLECT_B = np.array([0.0, 0.0, 0.0, 0.0, -1.0, -1.5, 0.0])
REFLECT_EXPECTED = ["approximate"] * 5 + ["exact LP", "unargmaxable"]
# The toy's box, |x_j| <= 3: it holds c6's region, and no power of two above 1 keeps the rows (|w_ij| <= 2) inside
# it, so the core starts every class at x0 = w_t as the paper's algorithm does (a larger box lifts a biased layer's
# start points, :func:`argmaxable.core.box.start_lift`, and in the box of 100 every class but c7 wins at its start).
REFLECT_BOX = 3.0
CLASS_COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink"]
BOX = 1.0  # |x_j| <= 1 for the drawings of thesis Figs 4.1 and 4.2: balls of a size one can see


def _grid(extent: float, pixels: int):
    g = np.linspace(-extent, extent, pixels)
    g1, g2 = np.meshgrid(g, g)
    return g1, g2, np.stack([g1.ravel(), g2.ravel()], axis=1)  # X: (pixels^2, 2)


def ranking_labels(W: np.ndarray, b: np.ndarray | None, X: np.ndarray) -> np.ndarray:
    """Each point's ranking as a string of class numbers in increasing order of logit (the papers' pi_1342)."""
    logits = X @ W.T + (0 if b is None else b)  # (points, n)
    order = np.argsort(logits, axis=1) + 1
    return np.array(["".join(map(str, row)) for row in order])


def draw_arrangement(ax, W: np.ndarray, b: np.ndarray | None, *, extent: float, pixels: int = 300,
                     labels: bool | str = True, lines: bool = True, inset: float | None = None) -> None:
    """Colour the input plane by argmax class, draw every braid line (w_i - w_j) x + b_i - b_j = 0, label
    each ranking region at its centre. With ``inset`` (a square |x_j| <= inset drawn apart, its regions too small
    to label here), ``labels`` "outside" labels the regions not wholly inside it and "inside" only those."""
    from matplotlib.colors import ListedColormap

    n = len(W)
    g1, _, X = _grid(extent, pixels)
    winner = np.argmax(X @ W.T + (0 if b is None else b), axis=1).reshape(g1.shape)
    ax.imshow(winner, origin="lower", extent=(-extent, extent, -extent, extent), alpha=0.35,
              cmap=ListedColormap(CLASS_COLOURS[:n]), vmin=-0.5, vmax=n - 0.5, interpolation="nearest")
    t = np.linspace(-extent, extent, 2)
    for i, j in itertools.combinations(range(n), 2) if lines else ():
        a, c = W[i] - W[j], (0.0 if b is None else b[i] - b[j])
        if abs(a[1]) > abs(a[0]):
            ax.plot(t, -(a[0] * t + c) / a[1], "k-", lw=0.6)
        else:
            ax.plot(-(a[1] * t + c) / a[0], t, "k-", lw=0.6)
    if labels:  # every region in view, at its centroid (a region clipped to the square is convex: inside it)
        ranks = ranking_labels(W, b, X)
        for r in np.unique(ranks):
            inside = ranks == r
            within = inset is not None and np.abs(X[inside]).max() < inset - 4 * extent / pixels  # off its edge
            if (labels == "outside" and within) or (labels == "inside" and not within):
                continue
            ax.text(X[inside, 0].mean(), X[inside, 1].mean(), r, ha="center", va="center", fontsize=6,
                    family="monospace")
    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)
    ax.set_xlabel("x1")
    ax.set_ylabel("x2")
    ax.set_aspect("equal")


def arrangement_table(*, bound: float, eps: float) -> pd.DataFrame:
    """Feasible rankings of each illustrated layer, enumerated with the core, beside the captions' numbers."""
    layers = {("Fig. 3", 3, False): (W3, None), ("Fig. 3", 4, False): (TOY_W, None),
              ("Fig. 7", 4, False): (W4, None), ("Fig. 7", 4, True): (W4, B4), ("Fig. 8", 3, False): (W3, None)}
    rows = []
    for (fig, n, bias), (W, b) in layers.items():
        counts = enumerate_rankings(W, b, bound=bound, eps=eps)
        rows.append({"figure": fig, "classes": n, "bias": bias, "rankings": math.factorial(n),
                     "feasible": counts["feasible"], "undecided": counts["undecided"],
                     "paper": RANKINGS_PAPER[(fig, n, bias)]})
    return pd.DataFrame(rows)


def plot_fig3(table: pd.DataFrame):
    """ACL 2022 Fig. 3, right column: which rankings a plane through the origin can reach, |C| = 3 and 4."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 4))
    for ax, (W, n) in zip(axes, ((W3, 3), (TOY_W, 4)), strict=True):
        draw_arrangement(ax, W, None, extent=2.0)
        row = table[(table["figure"] == "Fig. 3") & (table["classes"] == n)].iloc[0]
        ax.set_title(f"|C| = {n}, d = 2: {row['feasible']}/{row['rankings']} rankings feasible", fontsize=9)
    fig.suptitle("ACL 2022 Fig. 3 (right column): braid arrangement restricted to span(W); labels: classes in "
                 "increasing order of probability", fontsize=9)
    fig.tight_layout()
    return fig


def plot_fig7(table: pd.DataFrame):
    """ACL 2022 Fig. 7 (a, c): the same W without and with a bias; the bias creates bounded regions."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, axes = plt.subplots(1, 3, figsize=(FIGURE_WIDTH, 3.7))
    for ax, b, panel in zip(axes, (None, B4), ("(a) softmax(Wx)", "(c) softmax(Wx + b)"), strict=False):
        draw_arrangement(ax, W4, b, extent=FIG7_EXTENT, pixels=500, inset=FIG7_INSET, labels="outside")
        row = table[(table["figure"] == "Fig. 7") & (table["bias"] == (b is not None))].iloc[0]
        ax.set_title(f"{panel}: {row['feasible']}/{row['rankings']} rankings", fontsize=9)
    axes[1].add_patch(Rectangle((-FIG7_INSET, -FIG7_INSET), 2 * FIG7_INSET, 2 * FIG7_INSET, fill=False, lw=1,
                                edgecolor="0.2", linestyle="--"))
    draw_arrangement(axes[2], W4, B4, extent=FIG7_INSET, pixels=400, inset=FIG7_INSET, labels="inside")
    axes[2].set_title(f"(c) within the dashed square |x_j| <= {FIG7_INSET:g}:\nits bounded regions", fontsize=9)
    fig.suptitle("ACL 2022 Fig. 7: effect of the bias term on feasible rankings (|C| = 4, d = 2)", fontsize=9)
    fig.tight_layout()
    return fig


def plot_fig8():
    """ACL 2022 Fig. 8: weights a, b, c; their difference normals; the braid lines; the 3! = 6 regions."""
    import matplotlib.pyplot as plt

    names = "abc"
    fig, axes = plt.subplots(2, 2, figsize=(7, 7))
    pairs = list(itertools.combinations(range(3), 2))
    ax = axes[0, 0]
    for i, w in enumerate(W3):
        ax.annotate("", xy=w, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": CLASS_COLOURS[i]})
        ax.text(*(w * 1.15), names[i], color=CLASS_COLOURS[i])
    ax.set_title("softmax weights W (rows a, b, c)", fontsize=9)
    ax = axes[0, 1]
    for i, j in pairs:
        v = W3[i] - W3[j]
        ax.annotate("", xy=v, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "k"})
        ax.text(*(v * 1.1), f"{names[i]}-{names[j]}", fontsize=8)
    ax.set_title("normals: differences of the rows", fontsize=9)
    ax = axes[1, 0]
    t = np.linspace(-2, 2, 2)
    for i, j in pairs:
        v = W3[i] - W3[j]
        ax.plot(t * -v[1], t * v[0], "k-", lw=0.8)  # the line perpendicular to v through the origin
        ax.text(*(-v[1] * 1.3, v[0] * 1.3), f"H({names[i]},{names[j]})", fontsize=7)
    ax.set_title("braid hyperplanes, perpendicular to the normals", fontsize=9)
    ax = axes[1, 1]
    draw_arrangement(ax, W3, None, extent=2.0, labels=False)
    _, _, X = _grid(2.0, 300)
    order = np.argsort(X @ W3.T, axis=1)
    ranks = np.array(["".join(names[k] for k in row) for row in order])
    for r in np.unique(ranks):
        inside = ranks == r
        ax.text(X[inside, 0].mean(), X[inside, 1].mean(), r, ha="center", va="center", fontsize=8)
    ax.set_title("3! = 6 regions (increasing probability); colour: argmax", fontsize=9)
    for ax in axes.ravel()[:3]:
        ax.set_xlim(-2, 2)
        ax.set_ylim(-2, 2)
        ax.set_aspect("equal")
        ax.axhline(0, color="0.8", lw=0.5)
        ax.axvline(0, color="0.8", lw=0.5)
    fig.suptitle("ACL 2022 Fig. 8: constructing the braid arrangement in the input space (|C| = 3, d = 2)", fontsize=9)
    fig.tight_layout()
    return fig


def reflect_trace(W: np.ndarray, b: np.ndarray | None, target: int, *, steps: int, eps: float):
    """Iterates x_0, x_1, ... of braid reflection for one class (ACL 2022 Fig. 5), in plain float64.

    Starts at x_0 = w_t; each step takes the class winning at x among the others and reflects x across its
    hyperplane with the target, the step of the core's approximate stage (:func:`argmaxable.core.reflect.reflect`);
    it stops once every other class's hyperplane lies more than ``eps`` away on the target's side. The tests
    hold the number of iterates to the steps :func:`argmaxable.check_categories` reports. Returns the iterates
    (k + 1, 2) and the winner reflected away from at each step (k,).
    """
    b = np.zeros(len(W)) if b is None else b
    others = np.delete(np.arange(len(W)), target)
    A, c = W[others] - W[target], b[others] - b[target]  # class others[i] beats the target where A_i x + c_i > 0
    norms = np.linalg.norm(A, axis=1)
    x = W[target].astype(np.float64)  # (2,)
    xs, winners = [x.copy()], []
    for _ in range(steps):
        if np.min(-(A @ x + c) / norms) > eps:
            break
        j = int(np.argmax(W[others] @ x + b[others]))  # the current winner among the others (ACL 2022 Fig. 5 line 1)
        x = x - (2.0 * (A[j] @ x + c[j]) / (A[j] @ A[j])) * A[j]
        xs.append(x.copy())
        winners.append(int(others[j]))
    return np.array(xs), np.array(winners, dtype=int)


def _label_points(ax, xs: np.ndarray) -> None:
    """Label iterates x0, x1, ...; iterates at the same place share one label ("x1 = x3")."""
    groups: dict[tuple, list[int]] = {}
    for k, x in enumerate(xs):
        groups.setdefault(tuple(np.round(x, 6)), []).append(k)
    for ks in groups.values():
        ax.annotate(" = ".join(f"x{k}" for k in ks), xs[ks[0]], textcoords="offset points", xytext=(5, -10 if
                    ks[0] % 2 else 5), fontsize=7, bbox={"boxstyle": "round,pad=0.1", "fc": "white", "alpha": 0.7})


def _zoom(ax, points: np.ndarray, margin: float) -> None:
    """Square axes limits around ``points`` with ``margin`` on every side."""
    centre = (points.max(axis=0) + points.min(axis=0)) / 2
    half = (points.max(axis=0) - points.min(axis=0)).max() / 2 + margin
    ax.set_xlim(centre[0] - half, centre[0] + half)
    ax.set_ylim(centre[1] - half, centre[1] + half)


def plot_braid_reflect(verdicts: pd.DataFrame, *, bound: float, eps: float):
    """ACL 2022 Figs 4, 5, 9 / thesis Fig. 4.4: (a) the reflection path of the hardest class proven by the
    approximate stage, (b) one reflection step, (c) each class's verdict from the combined algorithm."""
    import matplotlib.pyplot as plt

    target = int(verdicts["steps"].idxmax())
    xs, winners = reflect_trace(REFLECT_W, REFLECT_B, target, steps=int(verdicts["steps"].max()), eps=eps)
    fig, panels = plt.subplot_mosaic([["a", "b"], ["c", "c"]], figsize=(FIGURE_WIDTH, 8.0), height_ratios=[1, 0.6])
    left, mid, right = panels["a"], panels["b"], panels["c"]
    extent = max(2.5, np.abs(xs).max() * 1.3)
    draw_arrangement(left, REFLECT_W, REFLECT_B, extent=extent, labels=False, lines=False, pixels=900)
    left.plot(xs[:, 0], xs[:, 1], "k.-", lw=1)
    _label_points(left, xs)
    _zoom(left, xs, 0.25)
    left.set_title(f"(a) braid reflect for c{target + 1}: {len(xs) - 1} reflections from x0 = w_t\n"
                   "until c_t wins (colour: argmax; zoomed on the path)", fontsize=8)
    # (b): the first step alone: x0 lies where the winner c_i beats c_t; reflect across H(c_t, c_i).
    i = winners[0]
    a_row = REFLECT_W[target] - REFLECT_W[i]
    c_row = REFLECT_B[target] - REFLECT_B[i]
    g1, _, X = _grid(extent, 900)
    ahead = (X @ a_row + c_row > 0).reshape(g1.shape)
    mid.imshow(ahead, origin="lower", extent=(-extent, extent, -extent, extent), alpha=0.3, cmap="coolwarm_r",
               vmin=0, vmax=1, interpolation="nearest")
    t = np.linspace(-extent, extent, 2)
    if abs(a_row[1]) > abs(a_row[0]):
        mid.plot(t, -(a_row[0] * t + c_row) / a_row[1], "k-", lw=1, label=f"H(c{target + 1}, c{i + 1})")
    else:
        mid.plot(-(a_row[1] * t + c_row) / a_row[0], t, "k-", lw=1, label=f"H(c{target + 1}, c{i + 1})")
    mid.annotate("", xs[1], xs[0], arrowprops={"arrowstyle": "->", "lw": 1.2})
    mid.plot(*xs[:2].T, "k.")
    mid.annotate("x0", xs[0], textcoords="offset points", xytext=(5, 5), fontsize=8)
    mid.annotate("x1", xs[1], textcoords="offset points", xytext=(5, 5), fontsize=8)
    _zoom(mid, xs[:2], 2 * np.linalg.norm(xs[1] - xs[0]))
    mid.set_aspect("equal")
    mid.set_xlabel("x1")
    mid.legend(fontsize=7, loc="lower left")
    mid.set_title(f"(b) one step (ACL 2022 Fig. 5): x0, where c{i + 1} beats c{target + 1} (red),\nreflected "
                  f"across H to where P(c{target + 1}) > P(c{i + 1}) (blue)", fontsize=8)
    right.axis("off")
    cells = [[f"c{r.item + 1}", r.stage, str(r.steps) if r.steps >= 0 else "-", r.status]
             for r in verdicts.itertuples()]
    tab = right.table(cellText=cells, colLabels=["class", "stage", "steps", "verdict"], loc="center")
    tab.scale(1, 1.4)
    right.set_title("(c) combined algorithm: approximate stage,\nexact LP where it fails", fontsize=8)
    fig.suptitle("ACL 2022 Figs 4, 5, 9 / thesis Fig. 4.4: braid reflect and the combined algorithm", fontsize=9)
    fig.tight_layout()
    return fig


def braid_reflect_table(*, bound: float, eps: float, patience: int) -> pd.DataFrame:
    """The combined algorithm on :data:`REFLECT_W`: steps of the approximate stage, LP where it fails."""
    res = check_categories(REFLECT_W, b=REFLECT_B, bound=bound, eps=eps, patience=patience, workers=1)
    df = res.to_frame()[["item", "status", "steps", "radius"]]
    df["stage"] = np.where(df["steps"] >= 0, "approximate", "exact LP")
    df["expected"] = REFLECT_EXPECTED
    df["outcome"] = np.where(df["status"] == "unargmaxable", "unargmaxable", df["stage"])
    return df


def chebyshev_balls(W: np.ndarray, b: np.ndarray, *, eps: float) -> pd.DataFrame:
    """Thesis Fig. 4.1: every label assignment of sigmoid(W x + b) (n x 2) with its verdict and Chebyshev ball.

    The box's four faces join as labels that are always inactive (x_j < 1, -x_j < 1), so each ball lies
    inside the box as in the figure (the core's box bounds the centre only).
    """
    n = len(W)
    faces = np.vstack([np.eye(2), -np.eye(2)])  # (4, 2)
    Y = all_assignments(n)
    Y_box = np.hstack([Y, np.zeros((len(Y), 4), dtype=bool)])
    res = check_assignments(np.vstack([W, faces]), Y_box, b=np.concatenate([b, -np.full(4, BOX)]),
                            bound=BOX, eps=eps, exact_radius=True, workers=1)
    return pd.DataFrame({"assignment": ["".join("+" if v else "-" for v in y) for y in Y], "status": res.status,
                         "radius": res.radius, "x1": res.witness[:, 0], "x2": res.witness[:, 1]})


def plot_chebyshev_balls(W: np.ndarray, b: np.ndarray, balls: pd.DataFrame):
    """Thesis Fig. 4.1: three lines, the largest ball in each argmaxable region of the box."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    t = np.linspace(-3, 3, 2)
    for i, (w, c) in enumerate(zip(W, b, strict=True)):
        foot = -c * w / (w @ w)  # the point of the line w x + c = 0 closest to the origin
        ax.plot(foot[0] - w[1] * t, foot[1] + w[0] * t, color=CLASS_COLOURS[i], lw=1, label=f"label {i + 1}")
    ok = balls[balls["status"] == "argmaxable"]
    for r in ok.itertuples():
        ax.add_patch(plt.Circle((r.x1, r.x2), r.radius, fill=False, color="k", lw=0.8))
        ax.text(r.x1, r.x2, r.assignment, ha="center", va="center", fontsize=8, family="monospace")
    ax.add_patch(plt.Rectangle((-BOX, -BOX), 2 * BOX, 2 * BOX, fill=False, ls=":", color="0.5"))
    ax.set(xlim=(-1.1 * BOX, 1.1 * BOX), ylim=(-1.1 * BOX, 1.1 * BOX), aspect="equal", xlabel="x1", ylabel="x2")
    ax.set_title(f"thesis Fig. 4.1: n = {len(W)} binary classifiers, d = 2:\n{len(ok)}/{len(balls)} label "
                 "assignments argmaxable, each with its Chebyshev ball", fontsize=8)
    ax.legend(fontsize=6, loc="lower left", title="hyperplane of", title_fontsize=6)
    fig.tight_layout()
    return fig


def overcrowding_table(line_counts, *, seed: int, eps: float, pixels: int = 400) -> tuple[pd.DataFrame, dict]:
    """Thesis Fig. 4.2: random affine lines in the box |x_j| <= 1; regions met on a grid and their radii."""
    rng = np.random.default_rng(seed)
    n_max = max(line_counts)
    W = rng.standard_normal((n_max, 2))
    b = rng.uniform(-0.8, 0.8, n_max) * np.linalg.norm(W, axis=1)  # lines cross the box
    _, _, X = _grid(BOX, pixels)
    rows, codes = [], {}
    for n in line_counts:
        signs = (X @ W[:n].T + b[:n]) > 0  # (pixels^2, n)
        Y, inverse = np.unique(signs, axis=0, return_inverse=True)
        res = check_assignments(W[:n], Y, b=b[:n], bound=BOX, eps=eps, exact_radius=True, workers=1)
        codes[n] = (inverse.reshape(pixels, pixels), W[:n], b[:n])
        rows.append({"lines": n, "regions": len(Y), "argmaxable": int((res.status == "argmaxable").sum()),
                     "median_radius": float(np.median(res.radius)), "min_radius": float(res.radius.min())})
    return pd.DataFrame(rows), codes


def plot_overcrowding(table: pd.DataFrame, codes: dict):
    """Thesis Fig. 4.2: one panel per number of lines, regions in random colours, smallest radius in the title."""
    fig, axes = panel_grid(len(codes), 3.2, 3.4)
    rng = np.random.default_rng(0)  # colours only
    for ax, (n, (code, _, _)), row in zip(axes.flat, codes.items(), table.itertuples(), strict=False):
        palette = rng.uniform(0.25, 1.0, (code.max() + 1, 3))
        ax.imshow(palette[code], origin="lower", extent=(-BOX, BOX, -BOX, BOX), interpolation="nearest")
        ax.set_title(f"{n} hyperplanes: {row.regions} regions\nsmallest radius {row.min_radius:.1e}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("thesis Fig. 4.2: hyperplane overcrowding (regions shrink as hyperplanes are added)", fontsize=9)
    fig.tight_layout()
    return fig


def run_illustrations(settings: IllustrationsConfig | Mapping, out: dict, *, seed: int, config=None) -> None:
    """Rule ``plot_illustrations``: tables and figures of this module; fails if a ranking count differs.

    Parameters
    ----------
    settings : IllustrationsConfig or mapping
        ``theory.illustrations``: bound, eps, patience, overcrowding_lines.
    out : dict
        Paths: ``arrangements``, ``braid_reflect``, ``chebyshev_balls``, ``overcrowding`` (.parquet, .md
        beside) and ``fig3``, ``fig7``, ``fig8``, ``reflect_figure``, ``balls_figure``, ``overcrowding_figure``
        (.png, .pdf beside).
    """
    settings = typed(IllustrationsConfig, settings)
    bound, eps = settings.bound, settings.eps
    arr = arrangement_table(bound=bound, eps=eps)
    keys = arr["figure"] + " |C|=" + arr["classes"].astype(str) + " bias=" + arr["bias"].astype(str)
    compare_cells(arr["feasible"].set_axis(keys), arr["paper"].set_axis(keys), "002 Figs 3, 7, 8 ranking counts")
    verdicts = braid_reflect_table(bound=REFLECT_BOX, eps=eps, patience=settings.patience)
    if (verdicts["outcome"] != verdicts["expected"]).any():
        raise ReproductionError(f"the braid-reflect toy layer's outcomes differ from the design:\n{verdicts}")
    balls = chebyshev_balls(W3, B3, eps=eps)
    crowd, codes = overcrowding_table(settings.overcrowding_lines, seed=seed, eps=eps)
    write_tables({"arrangements": arr, "braid_reflect": verdicts, "chebyshev_balls": balls,
                  "overcrowding": crowd}, out, config)
    write_figure(plot_fig3(arr), out["fig3"], config)
    write_figure(plot_fig7(arr), out["fig7"], config)
    write_figure(plot_fig8(), out["fig8"], config)
    write_figure(plot_braid_reflect(verdicts, bound=REFLECT_BOX, eps=eps), out["reflect_figure"], config)
    write_figure(plot_chebyshev_balls(W3, B3, balls), out["balls_figure"], config)
    write_figure(plot_overcrowding(crowd, codes), out["overcrowding_figure"], config)
