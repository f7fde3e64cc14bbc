"""Rational re-checks of the exact stage's evidence, for :func:`argmaxable.verify.verify_certificate`.

Part of the independent verifier: it shares no code with :mod:`argmaxable.core` (the exact stage included). It
builds each item's rows from (W, b) and the item alone (float32 and float64 values are dyadic rationals, so the
rows ``w_i - w_t`` and ``-s_i w_i`` are exact as integers times one power of two) and checks, in integer
arithmetic, with no square root taken where a square decides:

- a witness x (strings "p/q") at a margin r >= 0: x lies in the box and every row has ``a_i . x + c_i < 0`` and
  ``(a_i . x + c_i)^2 > r^2 ||a_i||^2``, i.e. its distance to every hyperplane exceeds r;
- weights y >= 0, not all 0, over rows of the item (never a category's own row) at a margin r: with
  ``v = sum y_i a_i`` and ``N = sup_box(-v . x) - sum y_i c_i``, either N <= 0 (no point of the box satisfies
  every row: a Farkas / Gordan certificate) or r > 0 and ``N <= r sum y_i l_i``, where ``l_i <= ||a_i||`` is an
  integer square root to :data:`SQRT_BITS` bits (the radius is at most ``N / sum y_i ||a_i||``);
- the region (radius > 0, no norms involved): "yes" needs the witness at margin 0, "no" the weights with N <= 0;
  "" (left open) is allowed only beside a decided status.

Categories' rows are every other category with a finite bias (a bias of -inf never binds; nor, where the
verifier names them, the categories the float checks leave out); label sets' rows are every label.

It also re-checks, exactly, the float certificates that the float check refuses (:func:`with_exact_certificates`):
their weights are dyadic rationals too, and a bound the stages certified with a tighter rounding analysis than
the verifier's (an upper radius within 1e-10 of its true value, at a box of 1e4) is still a true bound.
"""

from __future__ import annotations

import re
import sys
from fractions import Fraction
from math import isqrt, lcm

import numpy as np

# A rational as the exact stage writes it: an integer, or integer/positive integer (ASCII digits only).
RATIONAL = re.compile(r"-?[0-9]+(/[0-9]+)?", re.ASCII)
# Bits of the norms' integer square roots: more than the exact stage's, so its bounds hold here too.
SQRT_BITS = 600
# Rows per block of the exact witness checks (object arrays of Python ints: memory stays one block's).
ROWS = 2048
# Largest float certificate (its rows times the layer's columns) re-checked in rational arithmetic where the float
# check refuses it; a larger one keeps the float verdict (a forged status on a whole vocabulary stays cheap).
EXACT_TERMS = 200_000
# Bits below the binary point of the outward-rounded bounds on a float certificate's z_i = y_i / ||a_i|| (the rows in
# units of 2^E): each term of its N(z) loosened by at most 2^-Z_BITS |a_ij| times the box; measured on BioASQ-sized
# label sets (n = 20,000, d = 50, box 1e4): 200 verdicts, 117 of them LP certificates, re-checked in 1.1 s, 145.8 s with
# exact fractions throughout.
Z_BITS = 1100


def with_exact(result, W, b, signs, lo, hi, witnesses, certificates, masked=None):
    """The verifier's ``witnesses(pos, e)`` and ``certificates(pos, e)`` with the items whose status the exact stage
    decided (``decided == "radius"``) checked on their rational evidence (the others as before), and whether each
    item's region holds (True where the result records none; a record for no item of the result fails all).
    ``signs``: the label sets of the result's items (bool, one row per item), None for categories; ``masked``: the
    categories the float checks leave out of the others' systems (bool per category; radii are those of the
    systems without them, as the check reports them), None for none."""
    exact = result.exact
    k = len(result.status)
    region = np.ones(k, dtype=bool)
    layer = _Layer(W, b, lo, hi, masked)
    known = {int(p): rec for p, rec in exact.items() if isinstance(p, (int, np.integer)) and 0 <= p < k}
    decided = {p for p, rec in known.items() if rec.decided == "radius"}

    def rows_of(p):
        return layer.category(int(result.items[p])) if signs is None else layer.labels(signs[p])

    def exact_witnesses(pos, e):
        out = witnesses(pos, e)
        margins = np.broadcast_to(np.asarray(e, dtype=np.float64), (len(pos),))
        for j, p in enumerate(pos):
            if int(p) in decided:
                out[j] = _witness_holds(rows_of(p), layer, known[int(p)].witness, margins[j])
        return out

    def exact_certificates(pos, e):
        out = certificates(pos, e)
        margins = np.broadcast_to(np.asarray(e, dtype=np.float64), (len(pos),))
        for j, p in enumerate(pos):
            if int(p) in decided:
                out[j] = _weights_hold(rows_of(p), layer, known[int(p)], margins[j])
        return out

    for p, rec in known.items():
        if rec.decided not in ("radius", "region"):
            region[p] = False
        elif rec.region == "yes":
            region[p] = _witness_holds(rows_of(p), layer, rec.witness, 0.0)
        elif rec.region == "no":
            region[p] = _weights_hold(rows_of(p), layer, rec, 0.0)
        else:  # a status decided before the region: nothing to check, unless the region is all it claims
            region[p] = rec.decided == "radius" and rec.region == ""
    if len(known) != len(exact):  # evidence for no item of the result: the whole result is suspect
        region[:] = False
    return exact_witnesses, exact_certificates, region


def with_exact_certificates(result, W, b, signs, lo, hi, certificates):
    """The verifier's ``certificates(pos, e)`` with each float certificate it refuses re-checked in rational
    arithmetic (:func:`_normalised_weights_hold`; :data:`EXACT_TERMS` at most). ``signs`` as for
    :func:`with_exact`."""
    d = W.shape[1]
    layers = []  # the rational layer, made at the first refused certificate (a whole vocabulary's is costly)

    def checked(pos, e):
        out = certificates(pos, e)
        margins = np.broadcast_to(np.asarray(e, dtype=np.float64), (len(pos),))
        for j in np.flatnonzero(~out):
            p = int(pos[j])
            cert = _float_certificate(result.certificates[p])
            if cert is None or not 0 < len(cert[0]) * d <= EXACT_TERMS or not np.isfinite(margins[j]):
                continue
            if not layers:
                layers.append(_Layer(W, b, lo, hi))
            layer = layers[0]
            rows = layer.category(int(result.items[p])) if signs is None else layer.labels(signs[p])
            out[j] = _normalised_weights_hold(rows, layer, *cert, float(margins[j]))
        return out

    return checked


def _float_certificate(cert) -> tuple[np.ndarray, list] | None:
    """A float certificate's rows and positive weights, the weights as exact rationals; None if malformed."""
    try:
        rows, weights = (np.asarray(v) for v in cert)
    except (TypeError, ValueError):
        return None
    if rows.ndim != 1 or rows.shape != weights.shape or rows.dtype.kind not in "iu" or weights.dtype.kind != "f":
        return None
    keep = weights > 0
    if not np.isfinite(weights).all() or (weights < 0).any() or not keep.any() or len(np.unique(rows)) != len(rows):
        return None
    return rows[keep].astype(np.int64), [Fraction(float(w)) for w in weights[keep]]


def _normalised_weights_hold(rows, layer: _Layer, names: np.ndarray, y: list, r: float) -> bool:
    """Whether float weights ``y`` over the *normalised* rows ``a_i / ||a_i||`` (the float stages' and the float
    checks' convention) bound the radius by r: with ``z_i = y_i / ||a_i||`` (irrational), the radius is at most
    ``N(z) / sum y_i``. Each z_i lies between y_i / U_i and y_i / L_i (integer square roots to :data:`SQRT_BITS`
    bits), so N(z) is bounded from above over those intervals: first with the intervals rounded outward to
    integers in units of 2^-:data:`Z_BITS` (integer arithmetic, no fraction reduced), then, only where that bound
    is too loose to decide (a certificate whose N is exactly 0 at r = 0), exactly.

    The rounded intervals contain the exact ones and each end moved by less than one unit, and the bound's every
    term is linear in each z_i with coefficient at most ``sum_j |a_ij| max(|lo_j|, |hi_j|) + |c_i|`` in size, so the
    rounded bound exceeds the exact one by at most the sum of those coefficients (``slack``): a rounded bound above
    the limit by more than that is refused without the exact one."""
    if rows is None or not np.isfinite(r) or r < 0:
        return False
    block, allowed = rows
    if not np.isin(names, allowed).all():
        return False
    A, C = block(names)
    norms = [_norm_interval(row) for row in A]
    if any(low == 0 for low, _ in norms):
        return False
    limit = Fraction(r) * sum(y, Fraction(0))
    pairs = list(zip(y, norms, strict=True))
    # w / high rounded down and w / low rounded up, times 2^Z_BITS (w > 0: floor and ceiling of integer quotients)
    low = [(w.numerator * hi.denominator << Z_BITS) // (w.denominator * hi.numerator) for w, (_, hi) in pairs]
    high = [-(-(w.numerator * lo.denominator << Z_BITS) // (w.denominator * lo.numerator)) for w, (lo, _) in pairs]
    rounded, scaled_limit = _bound_over(low, high, A, C, layer.box), limit * (1 << Z_BITS)
    if rounded <= scaled_limit:
        return True
    reach = [max(abs(lo), abs(hi)) for lo, hi in layer.box]
    slack = sum(abs(int(c)) + sum(abs(int(a)) * m for a, m in zip(row, reach, strict=True))
                for row, c in zip(A, C, strict=True))
    if rounded - slack > scaled_limit:
        return False
    exact_low, exact_high = [w / hi for w, (_, hi) in pairs], [w / lo for w, (lo, _) in pairs]
    return _bound_over(exact_low, exact_high, A, C, layer.box) <= limit


def _bound_over(z_low: list, z_high: list, A: np.ndarray, C: np.ndarray, box: list) -> Fraction:
    """``sup N(z) = sup_box(-v . x) - sum z_i c_i`` with ``v = sum z_i a_i`` over z_low <= z <= z_high (z >= 0)."""
    num = Fraction(0)
    for j, (lo, hi) in enumerate(box):
        v_lo = v_hi = 0
        for zl, zh, a in zip(z_low, z_high, A[:, j].tolist(), strict=True):
            if a >= 0:
                v_lo, v_hi = v_lo + zl * a, v_hi + zh * a
            else:
                v_lo, v_hi = v_lo + zh * a, v_hi + zl * a
        num += max(-v_lo * lo, -v_lo * hi, -v_hi * lo, -v_hi * hi)  # sup over the box and over v's interval
    return num + sum((max(-zl * c, -zh * c) for zl, zh, c in zip(z_low, z_high, C.tolist(), strict=True)), 0)


class _Layer:
    """W and b as integers times 2^E (one exponent for all), the box as Fractions, and the categories left out of
    the others' systems (a bias of -inf, or ``masked``)."""

    def __init__(self, W, b, lo, hi, masked=None):
        self.W, self.b = W, b
        self.kept = np.isfinite(b) if masked is None else np.isfinite(b) & ~np.asarray(masked, dtype=bool)
        values = np.concatenate([W[np.isfinite(W)].ravel(), b[np.isfinite(b)]])
        nonzero = values[values != 0]
        self.E = int(np.frexp(nonzero)[1].min()) - 53 if nonzero.size else 0
        self.box = [(Fraction(float(a)), Fraction(float(c))) for a, c in zip(lo, hi, strict=True)]

    def ints(self, X) -> np.ndarray:
        """Finite float64 values as Python ints in units of 2^E (exact)."""
        m, e = np.frexp(np.asarray(X, dtype=np.float64))
        mant = np.ldexp(m, 53).astype(np.int64).astype(object)
        return np.left_shift(mant, np.where(mant != 0, e - 53 - self.E, 0).astype(object))

    def category(self, t: int):
        """Rows of category t: (block maker, row names) with a_i = W_i - W_t, c_i = b_i - b_t, i != t, i kept;
        None for a masked category, which no evidence can make win."""
        if not self.kept[t]:
            return None
        names = np.flatnonzero((np.arange(len(self.W)) != t) & self.kept)
        wt, bt = self.ints(self.W[t]), self.ints(self.b[t])

        def block(idx):
            return self.ints(self.W[idx]) - wt[None, :], self.ints(self.b[idx]) - bt

        return block, names

    def labels(self, active: np.ndarray):
        """Rows of a label set: a_i = -s_i W_i, c_i = -s_i b_i over every label (s_i = +1 active, -1 not)."""
        sign = np.where(active, -1, 1).astype(object)

        def block(idx):
            return self.ints(self.W[idx]) * sign[idx, None], self.ints(self.b[idx]) * sign[idx]

        return block, np.arange(len(self.W))


def _parse(values) -> list | None:
    """Rationals from strings "p/q" or "p", digits only, each integer at most :func:`sys.get_int_max_str_digits`
    long (None if any is not one): no exponent, so a string as short as "1e99999999" is never expanded."""
    limit = sys.get_int_max_str_digits() or 4300
    out = []
    try:
        for v in values:
            text = v if isinstance(v, str) else None
            if text is None or len(text) > 2 * limit + 2 or not RATIONAL.fullmatch(text):
                return None
            p, _, q = text.partition("/")
            out.append(Fraction(int(p), int(q) if q else 1))
    except (ValueError, ZeroDivisionError, TypeError):
        return None
    return out


def _witness_holds(rows, layer: _Layer, witness, r: float) -> bool:
    """Whether the rational witness lies in the box and every row's distance to it exceeds r (squares, exactly)."""
    x = None if witness is None or rows is None else _parse(witness)
    if x is None or len(x) != len(layer.box) or not np.isfinite(r) or r < 0:
        return False
    if not all(a <= v <= c for v, (a, c) in zip(x, layer.box, strict=True)):
        return False
    D = lcm(*(v.denominator for v in x))
    X = np.array([v.numerator * (D // v.denominator) for v in x], dtype=object)
    rq = Fraction(float(r))
    block, names = rows
    for s in range(0, len(names), ROWS):
        A, C = block(names[s : s + ROWS])
        V = A.dot(X) + C * D  # (a_i . x + c_i) * D / 2^E
        if any(v >= 0 for v in V):
            return False
        if rq > 0:
            norms = (A * A).sum(axis=1)
            rhs = rq.numerator**2 * D * D
            if any(v * v * rq.denominator**2 <= rhs * n for v, n in zip(V, norms, strict=True)):
                return False
    return True


def _weights_hold(rows, layer: _Layer, record, r: float) -> bool:
    """Whether the record's rational weights over its rows bound the radius by r (N <= 0 for r = 0; a negative r,
    a region that misses the box by that much, with the norms bounded from above)."""
    try:
        names = np.asarray(record.rows)
    except (TypeError, AttributeError):
        return False
    if rows is None:
        return False
    y = _parse(record.weights)
    block, allowed = rows
    if (y is None or names.ndim != 1 or names.dtype.kind not in "iu" or len(y) != len(names) or not len(y)
            or len(np.unique(names)) != len(names) or not np.isin(names, allowed).all()
            or any(v < 0 for v in y) or not any(v > 0 for v in y) or not np.isfinite(r)):
        return False
    A, C = block(names.astype(np.int64))
    d = A.shape[1]
    # In units of 2^E: v = sum y_i A_i, N = sup_box(-v . x) - sum y_i C_i (the common factor 2^E > 0 drops out)
    v = [sum((w * int(a) for w, a in zip(y, A[:, j], strict=True)), Fraction(0)) for j in range(d)]
    num = sum((max(-vj * lo, -vj * hi) for vj, (lo, hi) in zip(v, layer.box, strict=True)), Fraction(0)) - sum(
        (w * int(c) for w, c in zip(y, C, strict=True)), Fraction(0))
    if num <= 0 and r >= 0:
        return True
    if r == 0:
        return False
    total = Fraction(0)  # sum y_i ||A_i|| bounded from below for r > 0, from above for r < 0 (a negative radius)
    for w, row in zip(y, A, strict=True):
        total += w * _norm_interval(row)[int(r < 0)]
    return num <= Fraction(float(r)) * total


def _norm_interval(row) -> tuple[Fraction, Fraction]:
    """``low <= ||row|| <= high`` for a row of Python ints: integer square roots to :data:`SQRT_BITS` bits (equal
    where the square root is exact)."""
    square = sum(int(a) * int(a) for a in row)
    k = max(0, SQRT_BITS - square.bit_length() // 2)
    root = isqrt(square << (2 * k))
    return Fraction(root, 1 << k), Fraction(root + (root * root != square << (2 * k)), 1 << k)
