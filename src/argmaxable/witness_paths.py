"""Witnesses written as the steps that reached them: the compact evidence of a whole vocabulary.

Braid reflection reaches most witnesses of a large head from the category's own row ``w_t`` in a step or two:
``x <- x / s`` (a scaling into the box) and ``x <- x - c (w_i - w_t)`` (a reflection across row i). Such a witness is
a few numbers where its point is d of them; an evidence file stores it as its steps (:class:`WitnessPaths`), and
:func:`replay` makes the point again from the layer the caller gives, in the arithmetic the steps name. Each step is
one correctly rounded IEEE operation per coordinate (numpy's division, product and difference, each rounded to its
dtype), so the point made again from the same layer is the point the check certified, bit for bit; from another
layer it is another point, which the verifier checks like any other and refuses where it does not win. The writer
keeps a path only where its replay equals the result's witness (:func:`matching`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class WitnessPaths:
    """The steps of some witnesses of a category result: path p makes the witness at position ``positions[p]``
    from its category's row, by steps ``offsets[p]:offsets[p + 1]`` in order; a step with row -1 divides the point
    by its value, any other reflects it across that row: ``x - value * (w_row - w_t)``. Points, coefficients and
    divisors are rounded to the dtypes named, as the check's steps rounded them."""

    positions: np.ndarray  # (P,) int64
    offsets: np.ndarray  # (P + 1,) int64
    rows: np.ndarray  # (S,) int64, -1 for a scaling
    values: np.ndarray  # (S,) float64: each coefficient or divisor, exactly (a float32 one widened)
    dtype: str  # the points'
    coef_dtype: str  # the reflections' coefficients'
    scale_dtype: str  # the divisors'

    def members(self) -> dict[str, np.ndarray]:
        """The ``.npz`` members that hold these paths (:func:`from_members` reads them back)."""
        return {"path_positions": self.positions, "path_offsets": self.offsets, "path_rows": self.rows,
                "path_values": self.values,
                "path_dtypes": np.array([self.dtype, self.coef_dtype, self.scale_dtype])}

    def subset(self, keep: np.ndarray) -> WitnessPaths:
        """The paths ``keep`` (a boolean mask over them)."""
        counts = np.diff(self.offsets)[keep]
        steps = np.repeat(keep, np.diff(self.offsets))
        return WitnessPaths(self.positions[keep], np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                            self.rows[steps], self.values[steps], self.dtype, self.coef_dtype, self.scale_dtype)


def from_members(f: dict, k: int, n: int) -> WitnessPaths:
    """The paths of an evidence file's members ``f`` for a result of ``k`` items over a layer of ``n`` rows, every
    index and size bounded first; anything inconsistent is one ValueError."""
    pos, offsets, rows, values = (np.asarray(f[m]) for m in ("path_positions", "path_offsets", "path_rows",
                                                             "path_values"))
    dtypes = [str(t) for t in np.asarray(f["path_dtypes"]).ravel()]
    if len(dtypes) != 3 or any(t not in DTYPES for t in dtypes):
        raise ValueError(f"its witness paths name dtypes {dtypes[:3]}, not three of {', '.join(DTYPES)}")
    ints = all(a.dtype.kind in "iu" and a.ndim == 1 for a in (pos, offsets, rows))
    if not (ints and values.dtype == np.float64 and values.ndim == 1 and len(offsets) == len(pos) + 1
            and len(rows) == len(values) and offsets[0] == 0 and offsets[-1] == len(rows)
            and (np.diff(offsets) >= 0).all()):
        raise ValueError("its witness paths' offsets, rows and values do not match")
    if len(pos) and (pos.min() < 0 or pos.max() >= k or np.unique(pos).size != pos.size):
        raise ValueError(f"its witness paths name positions outside its {k} items, or one twice")
    if len(rows) and (rows.min() < -1 or rows.max() >= n):
        raise ValueError(f"its witness paths reflect across rows outside the layer's {n}")
    return WitnessPaths(pos.astype(np.int64), offsets.astype(np.int64), rows.astype(np.int64), values, *dtypes)


def replay(W, starts: np.ndarray, paths: WitnessPaths) -> np.ndarray:
    """The points of ``paths`` made from the rows ``W[starts]`` (one start row per path, the category's own), in
    ``paths.dtype``: (P, d). ``W`` may be any array of the layer's rows (float32 or float64, a memory map)."""
    dtype, coef, scale = (np.dtype(t) for t in (paths.dtype, paths.coef_dtype, paths.scale_dtype))
    X = np.asarray(W[starts]).astype(dtype)
    counts = np.diff(paths.offsets)
    for k in range(int(counts.max(initial=0))):  # step k of every path that has one, all at once
        live = np.flatnonzero(counts > k)
        at = paths.offsets[live] + k
        rows, values = paths.rows[at], paths.values[at]
        scaling = rows < 0
        i = live[scaling]
        X[i] = X[i] / values[scaling].astype(scale)[:, None]
        i, r = live[~scaling], rows[~scaling]
        a = np.asarray(W[r]).astype(dtype) - np.asarray(W[starts[i]]).astype(dtype)
        X[i] = X[i] - values[~scaling].astype(coef)[:, None] * a
    return X


def matching(W, items: np.ndarray, witness: np.ndarray, paths: WitnessPaths | None) -> WitnessPaths | None:
    """The paths whose replay from ``W`` equals the result's witness at their positions exactly (``items``: the
    result's categories, each path's start row), or None where none does: a witness a later stage replaced, or a
    layer the check scaled, keeps its point."""
    if paths is None or not len(paths.positions) or (len(paths.rows) and paths.rows.max() >= len(W)):
        return None
    X = replay(W, items[paths.positions], paths)
    same = (X.astype(np.float64) == witness[paths.positions].astype(np.float64)).all(axis=1)  # widening: exact
    return paths.subset(same) if same.any() else None
