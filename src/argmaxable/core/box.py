"""The box of inputs a check ranges over: ``lower_j <= x_j <= upper_j`` per coordinate.

The papers use the symmetric box ``|x_j| <= B`` (002 §4: B = 100). The features feeding a real head are often
narrower: after an activation they cannot take every value (after SiLU x_j >= -0.2785, after ReLU
x_j >= 0). A narrower box can only shrink each region, so an item argmaxable in it is argmaxable in the paper's
box, and the opposite need not hold. Every stage reads the box from here: reflection accepts a witness only
inside it, the LP bounds its variables by it, and dual certificates bound the radius by the box's support
function ``sup_{x in box} v.x = sum_j max(lower_j v_j, upper_j v_j)``.
"""

from __future__ import annotations

import numpy as np

# Lower ends of activations' ranges per dtype of the activation as the model computes it, rounded outward so the
# box contains every value it takes. float64/float32: the exact minimum with room for float32 rounding (SiLU/swish:
# x*sigmoid(x) >= -0.27846454 at x = -1.2785; GELU, x*Phi(x) >= -0.16997 at x = -0.7518; tanh-approximate GELU,
# x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) >= -0.17004 at x = -0.7525). float16 and bfloat16: the least value
# over every finite input of the dtype, computed as frameworks do (in float32 and rounded once, or op by op in the
# dtype: x * sigmoid(x), x/2 (1 + erf(x / sqrt 2)), ...), measured exhaustively and lowered by one unit in the last
# place of the dtype (float16: SiLU -0.27856, GELU and tanh-GELU -0.17017; bfloat16: SiLU -0.27930, GELU and
# tanh-GELU -0.17090). tests/test_box.py recomputes them over every value.
LOWER_ENDS = {
    "silu": {"float64": -0.2785, "float32": -0.2785, "float16": -0.2789, "bfloat16": -0.2813},
    "gelu": {"float64": -0.17, "float32": -0.17, "float16": -0.1703, "bfloat16": -0.1719},
    "gelu_tanh": {"float64": -0.1701, "float32": -0.1701, "float16": -0.1703, "bfloat16": -0.1719},
}
SILU_MIN = LOWER_ENDS["silu"]["float32"]
GELU_MIN = LOWER_ENDS["gelu"]["float32"]
DTYPES = ("float64", "float32", "float16", "bfloat16")

# name -> (lower, upper) as a function of the paper's bound B (None: that end stays at B; a name: its row of
# LOWER_ENDS). ReLU's 0, tanh's and sigmoid's 0 and +-1 are exact in every dtype (rounding keeps them).
ACTIVATIONS = {
    "none": (None, None),
    "identity": (None, None),
    "silu": ("silu", None),
    "swish": ("silu", None),
    "relu": (0.0, None),
    "gelu": ("gelu", None),
    "gelu_tanh": ("gelu_tanh", None),
    "tanh": (-1.0, 1.0),
    "sigmoid": (0.0, 1.0),
}


def activation_bounds(name: str | None, bound: float, dtype: str = "float32") -> tuple[float, float]:
    """The box ``(lower, upper)`` of inputs after activation ``name``, within the paper's box ``|x_j| <= bound``.

    Parameters
    ----------
    name : str or None
        One of "none" (or None, "identity": the paper's box), "silu"/"swish", "relu", "gelu" (the exact, erf
        form), "gelu_tanh" (the tanh approximation: it reaches lower), "tanh", "sigmoid".
    bound : float
        The paper's box half-width B; it caps the unbounded ends.
    dtype : str, default "float32"
        The dtype the model computes the activation in: "float64", "float32", "float16" or "bfloat16" (their
        rounding takes SiLU and GELU below their exact minima, :data:`LOWER_ENDS`).

    Returns
    -------
    (float, float)
        Scalars for every coordinate, ``-bound <= lower < upper <= bound``.

    Examples
    --------
    >>> activation_bounds("relu", 100.0)
    (0.0, 100.0)
    >>> activation_bounds("tanh", 100.0)
    (-1.0, 1.0)
    >>> activation_bounds("silu", 100.0), activation_bounds("silu", 100.0, "bfloat16")
    ((-0.2785, 100.0), (-0.2813, 100.0))
    """
    key = "none" if name is None else str(name).lower()
    if key not in ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}: use one of {', '.join(ACTIVATIONS)}.")
    if dtype not in DTYPES:
        raise ValueError(f"The 'dtype' parameter of activation_bounds must be one of {', '.join(DTYPES)}. "
                         f"Got {dtype!r}.")
    lo, hi = ACTIVATIONS[key]
    lo = LOWER_ENDS[lo][dtype] if isinstance(lo, str) else lo
    lower = -bound if lo is None else max(lo, -bound)
    upper = bound if hi is None else min(hi, bound)
    return float(lower), float(upper)


def activation_dtype(precision: str | None) -> str:
    """The dtype a model computes its activations in, from its stored weights' type: float16 and bfloat16 as
    stored, float64 for float64 weights, float32 for everything else (float32, integer and block-quantised
    weights, whose products run in float32; unknown)."""
    name = str(precision or "").lower().removeprefix("torch.")
    return {"float16": "float16", "f16": "float16", "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
            "float64": "float64", "double": "float64"}.get(name, "float32")


def _end(value, d: int, name: str) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().double().numpy()
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        arr = np.asarray(None)
    if arr.dtype.kind not in "iuf":  # strings, complex, booleans, objects
        raise ValueError(f"The {name!r} parameter must be a number or an array of {d} real numbers. "
                         f"Got {value!r}.")
    arr = arr.astype(np.float64)
    if arr.ndim == 0:
        arr = np.full(d, float(arr))
    if arr.shape != (d,):
        raise ValueError(f"The {name!r} parameter must be a scalar or have shape ({d},). Got shape {arr.shape}.")
    if np.isnan(arr).any():
        raise ValueError(f"The {name!r} parameter must not hold NaN.")
    return arr


def make_box(d: int, bound: float, lower=None, upper=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-coordinate ends ``(lo, hi)``, each of shape (d,): ``[lower, upper]`` intersected with ``|x_j| <= bound``.

    Raises ValueError (one line) when an end is not a number/array of d numbers or the box is empty or flat
    (``lo_j >= hi_j``: no ball of positive radius has its centre strictly inside).
    """
    lo = np.full(d, -float(bound)) if lower is None else np.maximum(_end(lower, d, "lower"), -bound)
    hi = np.full(d, float(bound)) if upper is None else np.minimum(_end(upper, d, "upper"), bound)
    bad = np.flatnonzero(~(lo < hi))
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"The box is empty or flat at coordinate {j}: lower {float(lo[j]):g} must be below upper "
                         f"{float(hi[j]):g} (both within |x_j| <= bound = {float(bound):g}).")
    return lo, hi


def support(V: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``sup_{x in box} v.x`` for each row v of V (last axis: coordinates)."""
    return np.maximum(V * lo, V * hi).sum(axis=-1)


def inside(X: np.ndarray, lo: np.ndarray, hi: np.ndarray, block: int = 4096) -> np.ndarray:
    """Which rows of X lie in the box (blocks of rows: no n×d temporary)."""
    out = np.empty(len(X), dtype=bool)
    for s in range(0, len(X), block):
        Xb = X[s : s + block]
        out[s : s + block] = (Xb >= lo).all(axis=1) & (Xb <= hi).all(axis=1)
    return out


# The largest start lift (:func:`start_lift`): beyond 2^24 a bias lies below float32's rounding of the lifted
# products, and the start is the cone's.
MAX_LIFT = 2.0**24


def start_lift(W: np.ndarray, lo: np.ndarray, hi: np.ndarray, block: int = 8192) -> float:
    """The largest power of two s in [1, :data:`MAX_LIFT`] with ``s * W[t]`` in the box for every row t (1 where
    the box does not hold the origin strictly inside).

    A biased layer's start points w_t lifted to s w_t keep their items' own products s ||w_t||^2 ahead of the
    other rows' s w_t.w_i, which grow alike, while the biases stay: the larger s, the less a row with a large bias
    beats the start point. Measured on 3000-item samples in the box of 100 (benchmarks/RESULTS.md), the start
    points that win went from 10% to 97% of ddddocr's and cn2en's heads, 11% to 48% of PP-OCRv6 small's and from
    4% to 100% of a Gaussian replica of a WMT'17 Nematus head. A power of two scales every product and every
    stored point exactly."""
    if not (np.all(lo < 0) and np.all(hi > 0)) or not len(W):
        return 1.0
    top, bottom = np.full(W.shape[1], -np.inf), np.full(W.shape[1], np.inf)
    for s in range(0, len(W), block):
        top = np.maximum(top, W[s : s + block].max(axis=0))
        bottom = np.minimum(bottom, W[s : s + block].min(axis=0))
    top, bottom = top.astype(np.float64), bottom.astype(np.float64)
    with np.errstate(divide="ignore"):
        room = min(np.min(np.where(top > 0, hi / np.where(top > 0, top, 1.0), np.inf)),
                   np.min(np.where(bottom < 0, lo / np.where(bottom < 0, bottom, -1.0), np.inf)))
    lift = float(np.exp2(np.floor(np.log2(min(room, MAX_LIFT))))) if room >= 1 else 1.0
    while lift > 1 and not (np.all(lift * top <= hi) and np.all(lift * bottom >= lo)):  # the division's rounding
        lift /= 2
    return lift


def shrink_factors(X: np.ndarray, lo: np.ndarray, hi: np.ndarray, block: int = 4096) -> np.ndarray:
    """Smallest s >= 1 per row with ``X[k] / s`` in the box (inf where no such s: a coordinate of the wrong sign
    for a box end at 0, or a box that does not hold the origin). For cones, dividing by s keeps the region."""
    out = np.empty(len(X))
    if not (np.all(lo <= 0) and np.all(hi >= 0)):
        out[:] = np.where(inside(X, lo, hi), 1.0, np.inf)
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(hi > 0, 1.0 / hi, np.inf)  # x_j / hi_j for x_j > 0
        down = np.where(lo < 0, 1.0 / lo, -np.inf)  # x_j / lo_j for x_j < 0
        if np.all(hi > 0) and np.all(lo < 0):
            # x_j up_j and x_j down_j have opposite signs, and the positive one is the ratio that counts: two
            # products and two maxima in X's own dtype, rounded up by a few units so that X / s stays in the box.
            up, down = up.astype(X.dtype), down.astype(X.dtype)
            grow = 1 + 8 * np.finfo(X.dtype).eps
            for s in range(0, len(X), block):
                Xb = X[s : s + block]
                r = np.maximum((Xb * up).max(axis=1), (Xb * down).max(axis=1)).astype(np.float64)
                out[s : s + block] = np.maximum(r * grow, 1.0)
            return out
        for s in range(0, len(X), block):
            Xb = X[s : s + block]
            r = np.maximum(np.where(Xb > 0, Xb * up, 0.0), np.where(Xb < 0, Xb * down, 0.0))
            out[s : s + block] = np.maximum(r.max(axis=1), 1.0)
    return out


def to_edge(X: np.ndarray, box) -> np.ndarray:
    """Points of a cone's system scaled to the box's edge (the largest multiple in the box; a point with no
    nonzero entry, or outside a box that does not hold the origin's rays, is kept as given). The scale is rounded
    down so that the product stays inside; ``inside`` checks it anyway."""
    lo, hi = box
    with np.errstate(divide="ignore", invalid="ignore"):
        reach = np.where(X > 0, X / hi, np.where(X < 0, X / lo, 0.0))
    reach = np.nan_to_num(reach, nan=np.inf, posinf=np.inf).max(axis=1)  # x_j / hi_j or x_j / lo_j: the binding end
    ok = np.isfinite(reach) & (reach > 0)
    out = X.copy()
    out[ok] = X[ok] * ((1 - 2.0**-50) / reach[ok])[:, None]
    return out
