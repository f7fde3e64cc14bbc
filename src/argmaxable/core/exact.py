"""The exact stage: the items the float stages left undecided, settled in rational arithmetic.

Every float32 or float64 weight is a dyadic rational, so an item's Chebyshev LP with its norms replaced by dyadic
lower approximations ``n_i <= ||a_i||`` (integer square roots to ``bits`` bits)

    maximise t   subject to   a_i . x + c_i + n_i t <= 0,   lo <= x <= hi

has an exact rational optimum ``(x*, t*)`` with exact dual weights ``mu >= 0`` over its tight rows
(``sum mu_i n_i = 1``). The stage starts from HiGHS's final basis over the rows near the float LP's best point and
evaluates a sequence of bases in rational arithmetic (python-flint): each next basis is HiGHS's optimum on the
current basis' tableau (computed at :data:`TABLEAU_BITS` bits, so HiGHS's float64 pivots see the thin region's
geometry), or one rational simplex pivot where that basis was met before; the rows the rational point violates
are added as they appear. Every basis, optimal or not, is judged (:func:`_decide`): its point with the margin it
attains and its non-negative multipliers are evidence in their own right, so the stage stops at the first basis
that decides, and after :data:`STEPS` bases reports the item undecided with that reason. At the optimum:

- every row holds ``-(a_i . x* + c_i) >= n_i t*``, so x* has margin at least ``t* (1 - 2^-bits)``: beyond eps, x*
  is a rational witness (argmaxable); for any t* > 0 the region ``{x in box : A x + c < 0}`` is non-empty, the
  norm-free question (radius > 0);
- with ``v = sum mu_i a_i``, ``N = sup_box(-v . x) - sum mu_i c_i`` (= t*) bounds the radius by
  ``N / sum mu_i ||a_i|| <= N / sum mu_i n_i = N`` where N >= 0: t* <= eps proves radius <= eps (unargmaxable),
  t* <= 0 that the region is empty (a Farkas / Gordan certificate).

Both questions are decided unless ``eps < t* <= eps / (1 - 2^-bits)``; a second pass at more bits settles that
unless the radius is eps itself, and what stays open is reported with its reason. The evidence (x*, mu) is kept
as "p/q" strings and re-checked in rational arithmetic by :mod:`argmaxable.verify_exact`, which shares no code with
this module.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from fractions import Fraction
from math import gcd, isqrt, lcm

import numpy as np

from argmaxable.core.numerics import gamma, row_norms
from argmaxable.core.result import ARGMAXABLE, UNARGMAXABLE, UNDECIDED, ExactRecord

# Bits of the norms' lower approximations: the first pass, and the last resort for a radius within 2^-64 of eps.
BITS = (64, 256)
# A rational solve costs O(d^3) big-number operations: wider items stay undecided, with that reason.
MAX_COLUMNS = 256
# Bases evaluated in rational arithmetic per item (two rational solves each; then a HiGHS solve on the tableau or
# one rational pivot): on a trained DFT head (debtags, d = 2, head space d = 35) most items the float LP leaves
# open take 1 to 60, about 0.07 s each; the thinnest six took 68 to 251 (their last bases are slow, degenerate
# primal pivots). Beyond this budget the item stays undecided, with that reason.
STEPS = 400
# Bases spent on the region of an item once its status is decided (by this stage or, with ``regions``, before).
REGION_STEPS = 20
# A sign system's open item is first settled over two relaxations, in turn: the first rows an exact LP takes (those
# nearest to violation at the float LP's point), then those and the float LP's last working set (the rows its optimum,
# near eps, was found over). Fewer rows only widen the region, so a radius bound <= eps over them holds for every row,
# where settling the item over all of them adds the rows that decide their optimum (on the BioASQ-sized DFT head's thin
# label sets thousands, and each ball-simplex pivot over them milliseconds: benchmarks/RESULTS.md). What a relaxation
# leaves open, or proves argmaxable (its point need not hold the other rows), is settled over every row. With
# ``regions`` every item is settled over every row at once: a relaxation's region says nothing of the system's, and the
# item's one exact record holds both answers.
# Bases per check, all items together: on that head (843 distinct assignments, regions on) the exact stage took
# 1725 bases, 96 CPU-seconds of the check's 117, and left nothing undecided; past this budget the rest stay
# undecided, with that reason (regions: left unsettled), so one check's exact stage stays near 200 CPU-seconds.
CHECK_STEPS = 3000
# Working precision (bits) of the tableau handed to HiGHS: its rows in the basis' coordinates, near enough to exact
# that HiGHS's float64 pivots see the thin region's geometry; also the precision of the ball-arithmetic simplex.
TABLEAU_BITS = 128
# Pivots of the ball-arithmetic simplex (:class:`_BallSimplex`) per call, times d + 1. On a trained debtags DFT head's
# thin label sets (d = 35: at most 720) it ended in 45 to 557 pivots from the box's corner, 58 to 478 from the vertex
# reached from the float LP's point (169 on average against 396), and in 1 to 151 from the last optimum once rows
# were added; past this it gives up for the item, which goes on by the tableau and rational pivots.
BALL_PIVOTS = 20
# A ball-arithmetic slack (in the units of x) or multiplier (relative to the largest) below this counts as zero: far
# above the midpoints' error (about 2^-TABLEAU_BITS of the values they come from, times the box) and far below the
# radii that matter (a thin DFT region's radius is 1e-15 to 1e-8).
BALL_ZERO = 1e-25


@dataclass
class Settled:
    """What the exact stage proved about one item.

    Attributes
    ----------
    status : {"argmaxable", "unargmaxable", "undecided"}
        The answer to radius > eps.
    region : {"yes", "no", ""}
        Whether ``{x in box : A x + c < 0}`` is non-empty (radius > 0: no norms involved); "" if not decided.
    lower, upper : float
        Certified bounds on the radius (NaN: none).
    x : list of Fraction or None
        A rational point inside the region, where it is non-empty.
    rows : ndarray of int
        Rows of the dual weights (positions of the item's system); ``weights`` the weights (Fractions).
    message : str
        The evidence, or why the item stays undecided.
    optimal : bool
        Whether the evidence is an optimal basis' (then only a radius within 2^-bits of eps stays undecided).
    bases : int
        The rational bases evaluated.
    """

    status: str
    region: str
    lower: float
    upper: float
    x: list | None
    rows: np.ndarray
    weights: list
    message: str
    optimal: bool = False
    bases: int = 0

    @property
    def inside(self) -> str:
        """The region's answer in words."""
        if self.region == "yes":
            return "the region {x in box : A x + c < 0} is non-empty (a rational point inside it)"
        return "the region {x in box : A x + c < 0} is empty (rational Farkas weights)" if self.region else ""

    def float_weights(self) -> np.ndarray:
        """The weights rounded to floats. A certificate is homogeneous in its weights, so weights too large for a
        float are first scaled by a power of two (their largest to about 1; tiny ones may round to zero, and any
        subset of a certificate's non-negative weights is checked as one of its own)."""
        top = max(self.weights, default=Fraction(0))
        shift = top.numerator.bit_length() - top.denominator.bit_length() if top > 2**1000 else 0
        return np.array([float(w / 2**shift) for w in self.weights], dtype=np.float64)

    def record(self, rows: np.ndarray, decided: str) -> ExactRecord:
        """The rational evidence as the result keeps it, its weights over ``rows`` (the result's names for
        :attr:`rows`) scaled to coprime integers."""
        scale = lcm(*(w.denominator for w in self.weights))
        ints = [int(w * scale) for w in self.weights]
        common = gcd(*ints) or 1
        x = None if self.x is None else tuple(str(v) for v in self.x)
        return ExactRecord(decided, self.region, x, tuple(int(i) for i in rows), tuple(str(i // common) for i in ints))


class Exact:
    """The stage: every item still undecided after the float stages, settled by :func:`settle` one at a time (a
    sign system's first over the relaxations of :func:`relaxed`, without ``regions``); with ``regions``, also the
    region of every item proven unargmaxable (its status stands). ``map_rows(item,
    rows)`` names a certificate's rows as the result does (default: the system's dense rows)."""

    name = "exact"

    def __init__(self, box, settings, map_rows=None):
        self.box, self.settings, self.map_rows = box, settings, map_rows

    def run(self, system, ledger, open_: np.ndarray) -> np.ndarray:
        todo = open_
        if self.settings.regions:
            todo = np.union1d(open_, np.flatnonzero(ledger.status == UNARGMAXABLE))
        spent = 0
        for pos in todo:
            item = int(ledger.items[pos])
            start = ledger.starts.get(int(pos))
            steps = min(STEPS if ledger.status[pos] == UNDECIDED else REGION_STEPS, CHECK_STEPS - spent)
            ball = ledger.kind != "categories"
            terms = system.dense_terms(item) if steps > 0 else None
            if steps > 0 and ball and not self.settings.regions and ledger.status[pos] == UNDECIDED \
                    and start is not None and start.x is not None and np.isfinite(start.x).all():
                out = relaxed(terms, self.box, self.settings.eps, start.x, start.rows, steps)
                spent += out.bases
                if out.status == UNARGMAXABLE:
                    self._settle(ledger, pos, item, _writable(out))
                    continue
                steps = min(steps, CHECK_STEPS - spent)
            if steps <= 0:
                out = _open(f"exact stage not run: this check's budget of {CHECK_STEPS} rational bases is spent")
            else:
                out = settle(terms, self.box, self.settings.eps, None if start is None else start.x,
                             None if start is None else start.rows, steps, ball=ball)
                spent += out.bases
            self._settle(ledger, pos, item, _writable(out))
        return open_[ledger.status[open_] == UNDECIDED]

    def _settle(self, ledger, pos, item: int, out: Settled) -> None:
        rows = out.rows if self.map_rows is None else self.map_rows(item, out.rows)
        ledger.settle(int(pos), self.name, out, np.asarray(rows, dtype=np.int64))


def relaxed(terms, box, eps: float, x0, seeds, steps: int) -> Settled:
    """Radius <= eps proved over a relaxation (the first rows :func:`settle` would take at ``x0``, then with
    ``seeds``, the float LP's working set), the certificate's rows named as the system's; otherwise an undecided
    Settled (its ``bases`` those spent)."""
    P, p, q, r = terms
    A = np.asarray(P, dtype=np.float64) - np.asarray(q, dtype=np.float64)
    c = np.asarray(p, dtype=np.float64) - float(r)
    lo, hi = (np.asarray(v, dtype=np.float64) for v in box)
    d = A.shape[1]
    live = np.flatnonzero(row_norms(A) > 0)
    spent, tried = 0, 0
    for rows in (np.sort(_first_rows(A, c, live, lo, hi, x0, None, d)), _first_rows(A, c, live, lo, hi, x0, seeds, d)):
        if rows.size >= live.size or rows.size == tried or spent >= steps:
            break
        tried = rows.size
        out = settle((P[rows], p[rows], q, r), box, eps, x0, None, steps - spent, ball=True, region_steps=0)
        spent += out.bases
        if out.status == UNARGMAXABLE:
            empty = out.region == "no"  # an empty relaxation empties the region; a point of it says nothing
            found = out.message.split("; ")[0]
            return Settled(UNARGMAXABLE, "no" if empty else "", np.nan, out.upper, None, rows[out.rows],
                           out.weights, f"{found} of {rows.size} (the rows nearest to violation at the float LP's "
                                        f"point and its working set: fewer rows only widen the region)"
                                        + ("; " + out.inside if empty else ""), bases=spent)
    out = _open("")
    out.bases = spent
    return out


def settle(terms, box, eps: float, x0=None, seeds=None, steps: int = STEPS, ball: bool = False,
           region_steps: int = REGION_STEPS) -> Settled:
    """Decide radius > eps, and radius > 0, for the system ``A x + c < 0`` in ``box`` exactly.

    Parameters
    ----------
    terms : (P, p, q, r)
        The system as exact differences of float rows: ``a_i = P_i - q``, ``c_i = p_i - r``
        (``System.dense_terms``).
    box : (ndarray, ndarray)
        ``lo <= x <= hi``.
    eps : float
    x0, seeds : optional
        The float LP's best point and rows (its certificate's): the first rows taken are those nearest to
        violation at x0, and the seeds.
    steps : int
        Bases evaluated at most.
    region_steps : int
        Bases evaluated at most once the status is decided and the region is not.
    ball : bool
        Choose the next basis by the ball-arithmetic simplex first (:class:`_BallSimplex`): a sign system's thin
        regions (label sets of a DFT head in the box 1e4) then take a few bases where the tableau's choices take
        hundreds. Categories keep the tableau's choices, on which their results are pinned.

    Returns
    -------
    Settled
    """
    P, p, q, r = terms
    A = np.asarray(P, dtype=np.float64) - np.asarray(q, dtype=np.float64)
    c = np.asarray(p, dtype=np.float64) - float(r)
    lo, hi = (np.asarray(v, dtype=np.float64) for v in box)
    m, d = A.shape
    if d > MAX_COLUMNS:
        return _open(f"exact stage not run: {d} columns exceed its limit of {MAX_COLUMNS} (rational solves cost "
                     "O(d^3) each)")
    live = np.flatnonzero((A != 0).any(axis=1))  # a zero row that holds (c_i < 0) constrains nothing
    if live.size < m and (c[np.setdiff1d(np.arange(m), live)] >= 0).any():
        i = int(np.flatnonzero(~(A != 0).any(axis=1) & (c >= 0))[0])
        return Settled(UNARGMAXABLE, "no", -np.inf, -np.inf, None, np.array([i]), [Fraction(1)],
                       f"exact stage: row {i} is identically zero with offset >= 0: the region is empty")
    if not live.size:
        return _open("exact stage: no row constrains the item")
    lp = _LP(terms, lo, hi, BITS[0])
    lp.add_rows(_first_rows(A, c, live, lo, hi, x0, seeds, d))
    K = _float_basis(lp, A, c, lo, hi) or lp.dual_start(2 * d)
    found, seen, step = None, set(), 0
    simplex = _BallSimplex(x0) if ball else None
    while step < steps:
        step += 1
        try:
            z, lam, M = lp.vertex(K)
        except ZeroDivisionError:  # HiGHS's basis is singular in exact arithmetic
            K = lp.dual_start(2 * d)
            continue
        lp.add_rows(_violated(lp, A, c, live, z))  # appended: K's positions stand
        slack = lp.slack(z)
        out = _decide(lp, K, lam, z, slack, eps, step)
        out.bases = step
        if out.status != UNDECIDED:
            if out.region:
                return out
            if found is None:
                found, steps = out, min(steps, step + region_steps)
        elif out.optimal:  # the radius lies within 2^-bits of eps: the same constraints with finer norms
            if lp.bits == BITS[-1]:
                return out
            lp = lp.refined(BITS[-1])
            continue
        K = _next_basis(lp, K, lam, M, slack, seen, simplex)
    if found is not None:
        found.message += f"; its region stays undecided within {steps} rational bases"
        found.bases = step
        return found
    out = _open(f"exact stage: none of {steps} rational bases decides radius > eps={eps:g} (a thin, nearly "
                "degenerate region, or the check's budget)")
    out.bases = step
    return out


def _writable(out: Settled) -> Settled:
    """``out``, or the item left open where its rational evidence holds an integer longer than Python writes as a
    string (:func:`sys.get_int_max_str_digits`): a result could not keep it, nor a verifier read it."""
    try:
        out.record(out.rows, "radius")
    except ValueError:
        return _open(f"exact stage: its rational evidence holds integers of more than "
                     f"{sys.get_int_max_str_digits()} digits, more than a result can write")
    return out


def _open(message: str) -> Settled:
    """Nothing decided, and why."""
    return Settled(UNDECIDED, "", np.nan, np.nan, None, np.zeros(0, dtype=np.int64), [], message)


def _first_rows(A, c, live, lo, hi, x0, seeds, d) -> np.ndarray:
    """The first working rows: the 2 (d + 1) or 48 rows nearest to violation at x0 (the float LP's best point;
    default the origin, clipped into the box), and the seeds."""
    x = np.clip(np.zeros(d) if x0 is None or not np.isfinite(x0).all() else np.asarray(x0, np.float64), lo, hi)
    dist = (A[live] @ x + c[live]) / row_norms(A[live])
    k = min(live.size, max(2 * (d + 1), 48))
    first = live[np.argpartition(-dist, k - 1)[:k]] if k < live.size else live
    if seeds is not None:
        first = np.union1d(first, np.intersect1d(np.asarray(seeds, dtype=np.int64), live))
    return first


def _dyadic(X) -> tuple[np.ndarray, np.ndarray]:
    """int64 mantissas and exponents of float64 entries: X = M * 2^E exactly (zero: M = 0)."""
    m, e = np.frexp(np.asarray(X, dtype=np.float64))
    return np.ldexp(m, 53).astype(np.int64), e.astype(np.int64) - 53


def _integer_rows(terms, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``idx`` of ``[a_i | c_i] = [P_i - q | p_i - r]`` as integers: ``R_i * 2^E_i`` exactly (object array
    (k, d + 1) of Python ints, int exponents (k,))."""
    P, p, q, r = terms
    Mp, Ep = _dyadic(np.hstack([np.asarray(P[idx], dtype=np.float64), np.asarray(p[idx], dtype=np.float64)[:, None]]))
    Mq, Eq = _dyadic(np.append(np.asarray(q, dtype=np.float64), float(r)))
    top = np.iinfo(np.int64).max
    base = np.minimum(np.where(Mp != 0, Ep, top).min(axis=1), np.where(Mq != 0, Eq, top).min())
    base = np.where(base == top, 0, base)
    shift_p = np.where(Mp != 0, Ep - base[:, None], 0).astype(object)
    shift_q = np.where(Mq != 0, Eq[None, :] - base[:, None], 0).astype(object)
    R = np.left_shift(Mp.astype(object), shift_p) - np.left_shift(Mq.astype(object)[None, :], shift_q)
    return R, base


def _row_constraints(terms, rows: np.ndarray, bits: int, d: int):
    """Constraints ``a_i . x + n_i t <= -c_i`` of ``rows`` as integers ``(g, h)`` with their scale exponent, and the
    norms' lower approximations n_i = N_i 2^e_i (N_i has more than ``bits`` bits; ||a_i|| < (N_i + 1) 2^e_i)."""
    R, E = _integer_rows(terms, rows)
    out = []
    for Ri, Ei in zip(R, E, strict=True):
        square = sum(int(a) * int(a) for a in Ri[:d])
        p = max(0, bits + 2 - square.bit_length() // 2)
        out.append(([int(a) << p for a in Ri[:d]] + [isqrt(square << (2 * p))], -(int(Ri[d]) << p), int(Ei) - p))
    return out


class _LP:
    """max t over z = (x, t) subject to ``g_k . z <= h_k`` (integers): the box's 2d bounds (x_j <= hi_j at 2j,
    -x_j <= -lo_j at 2j + 1), then the working rows in the order added; a constraint's position is its index. A
    row's constraint as stated (``a_i . x + n_i t <= -c_i``) is 2^scale times ``(g, h)``."""

    def __init__(self, terms, lo: np.ndarray, hi: np.ndarray, bits: int):
        self.terms, self.bits, self.d = terms, bits, len(lo)
        self.lo, self.hi = lo, hi
        self.g: list[list[int]] = []
        self.size: list[float] = []
        self.h: list[int] = []
        self.scale: list[int] = []
        self.row: list[int] = []  # the system row of each constraint, -1 for a bound
        self.index: dict[int, int] = {}  # system row -> position
        self._G = None
        self.box = [(Fraction(float(a)), Fraction(float(b))) for a, b in zip(lo, hi, strict=True)]
        for j, (a, b) in enumerate(self.box):
            for sign, v in ((1, b), (-1, a)):
                g = [0] * (self.d + 1)
                g[j] = sign * v.denominator
                self._append(g, sign * v.numerator, 0, -1)

    def _append(self, g, h, scale, row) -> None:
        self.size.append(2.0 ** min(1000, max(abs(v).bit_length() for v in g)))  # the scale of g, to compare violations
        self.g.append(g)
        self.h.append(h)
        self.scale.append(scale)
        self.row.append(row)
        self._G = None

    def add_rows(self, rows) -> None:
        """Add the system's ``rows`` that are not in yet, in the order given."""
        rows = np.asarray([r for r in dict.fromkeys(int(r) for r in rows) if r not in self.index], dtype=np.int64)
        if rows.size:
            for i, (g, h, scale) in zip(rows, _row_constraints(self.terms, rows, self.bits, self.d), strict=True):
                self.index[int(i)] = len(self.g)
                self._append(g, h, scale, int(i))

    def refined(self, bits: int) -> _LP:
        """The same constraints, in the same positions, with the norms to ``bits`` bits."""
        out = _LP(self.terms, self.lo, self.hi, bits)
        out.add_rows(self.row[2 * self.d :])
        return out

    def matrices(self):
        """(G, h, G transposed) of every constraint as integer matrices (kept until a row is added)."""
        from flint import fmpz_mat

        if self._G is None:
            G = fmpz_mat(self.g)
            self._G = G, fmpz_mat([[h] for h in self.h]), G.transpose()
        return self._G

    def vertex(self, K):
        """The point z where the constraints K (d + 1 of them) are tight, their multipliers lambda
        (sum_k lambda_k g_k = e_t) and their matrix; ZeroDivisionError if they are dependent."""
        from flint import fmpz_mat

        M = fmpz_mat([self.g[k] for k in K])
        z = M.solve(fmpz_mat([[self.h[k]] for k in K]))
        lam = M.transpose().solve(fmpz_mat([[0]] * self.d + [[1]]))
        return z, lam, M

    def slack(self, z) -> list:
        """``h_k - g_k . z`` of every constraint (fmpq), from one integer product."""
        from flint import fmpq

        G, h, _ = self.matrices()
        num, den = z.numer_denom()
        S = h * den - G * num
        return [fmpq(v, den) for v in S.entries()]

    def dual_start(self, r: int) -> list[int]:
        """A dual-feasible basis: row constraint ``r`` and, per coordinate, the bound where a_r . x is least (the
        multipliers are 1 / n_r and |a_rj| / n_r up to scale, all >= 0)."""
        g = self.g[r]
        return [r] + [2 * j + (1 if g[j] > 0 else 0) for j in range(self.d)]


def _next_basis(lp: _LP, K: list[int], lam, M, slack: list, seen: set,
                simplex: _BallSimplex | None = None) -> list[int]:
    """The basis to evaluate after K, the first time K is met: the ball-arithmetic simplex's optimum (where
    ``simplex`` is given and still on), else HiGHS's optimum on K's tableau, whichever is new first; otherwise (K met
    before, or neither new) one rational simplex pivot."""
    key = frozenset(K)
    if key not in seen:
        seen.add(key)
        K2 = simplex.optimum(lp, K) if simplex is not None and simplex.on else None
        if K2 is None or frozenset(K2) in seen:
            K2 = _tableau_basis(lp, K, lam, M, slack)
        if K2 is not None and frozenset(K2) not in seen:
            return K2
    return _pivot(lp, K, lam, M, slack)


class _BallSimplex:
    """The simplex over an LP's constraints in ball arithmetic at :data:`TABLEAU_BITS` bits, its choices made on the
    balls' midpoints: the basis it ends at is only a proposal, evaluated exactly like any other.

    HiGHS's float64 pivots cannot tell a thin region's bases apart: its radius (1e-15 to 1e-8 in the box 1e4 on a
    DFT head's label sets) is far below the float64 rounding of the vertices, so its "optimal" basis is neither
    primal nor dual feasible in exact arithmetic, and the rational pivots from there climb hundreds of bases. At 128
    bits the same geometry is resolved: from K where its multipliers are >= 0, the dual simplex (the most violated
    constraint enters); from a vertex that holds every constraint, the primal simplex (steepest edge on x); from
    neither, the primal simplex from a vertex reached from ``x0`` (the float LP's point) that holds every
    constraint (:meth:`_BallRun._purified`), or, without x0, from the box's corner with the row that bounds t
    there. After a repeated basis, Bland's rule to the end of the phase. It stays off for the item
    after a call that ends without an optimum within :data:`BALL_PIVOTS` (d + 1) pivots."""

    def __init__(self, x0):
        self.x0 = None if x0 is None or not np.isfinite(x0).all() else np.asarray(x0, dtype=np.float64)
        self.on = True

    def optimum(self, lp: _LP, K: list[int]) -> list[int] | None:
        """The basis the simplex ends at from K, or None (and off from now on)."""
        from flint import ctx

        with ctx.workprec(TABLEAU_BITS):
            run = _BallRun(lp, BALL_PIVOTS * (lp.d + 1))
            K = run.phases(list(K), self.x0)
        self.on = K is not None
        return K


class _BallRun:
    """One run of :class:`_BallSimplex` over the LP's constraints as they are now (ball matrices at the caller's
    precision)."""

    def __init__(self, lp: _LP, pivots: int):
        from flint import arb_mat

        G, h, _ = lp.matrices()
        self.lp, self.pivots = lp, pivots
        self.G, self.h = arb_mat(G), arb_mat(h)
        self.size = np.asarray(lp.size)
        d1 = lp.d + 1
        self.eye = arb_mat([[int(i == j) for j in range(d1)] for i in range(d1)])
        self.e_t = arb_mat([[int(i == lp.d)] for i in range(d1)])

    def state(self, K: list[int]):
        """K's inverse (rows z, columns the constraints of K), every constraint's slack at K's vertex (units of x)
        and K's multipliers, as midpoints."""
        from flint import arb_mat

        lp = self.lp
        inv = arb_mat(_fmpz_rows(lp, K)).solve(self.eye, algorithm="approx")
        z = inv * arb_mat([[lp.h[k]] for k in K])
        return inv, _mids(self.h - self.G * z) / self.size, _mids(inv.transpose() * self.e_t)

    def phases(self, K: list[int], x0) -> list[int] | None:
        """The dual or primal simplex from K, or the primal from a corner, as the class says."""
        inv, s, lam = self.state(K)
        violated = (s < -BALL_ZERO).any()
        if violated and self._negative(K, lam).size:
            K = (self._purified(x0) if x0 is not None else None) or self._corner(inv, K, x0)
            inv, s, lam = self.state(K)
        elif violated:
            K = self._dual(K, inv, s, lam)
            if K is None:
                return None
            inv, s, lam = self.state(K)
        return self._primal(K, inv, s, lam)

    def _negative(self, K: list[int], lam: np.ndarray) -> np.ndarray:
        """Positions of K whose multipliers are negative (scaled by their constraints' sizes)."""
        scaled = lam * self.size[K]
        return np.flatnonzero(scaled < -BALL_ZERO * np.abs(scaled).max())

    def _corner(self, inv, K: list[int], x0) -> list[int]:
        """The box's corner on the side of x0 (default: K's vertex), and the row with the least t there."""
        from flint import arb_mat

        lp, d = self.lp, self.lp.d
        x = x0 if x0 is not None else _mids(inv * arb_mat([[lp.h[k]] for k in K]))[:d]
        corner = [2 * j + (0 if x[j] >= 0 else 1) for j in range(d)]
        at = arb_mat([[float(lp.hi[j] if x[j] >= 0 else lp.lo[j])] for j in range(d)] + [[0]])
        t = _mids(self.h - self.G * at)[2 * d :] / np.array([float(g[d]) for g in lp.g[2 * d :]])
        return [*corner, 2 * d + int(np.argmin(t))]

    def _purified(self, x0) -> list[int] | None:
        """A vertex that holds every constraint, reached from the float LP's point: x0 (clipped to the box) with the
        largest t the rows allow there, then steps that keep the tight constraints tight and t from falling, each
        until one more constraint is tight, until d + 1 are (None where a step finds nothing to stop it). Near the
        optimum, where the box's corner is hundreds of pivots away."""
        from flint import arb_mat

        lp, d = self.lp, self.lp.d
        z = arb_mat([[float(v)] for v in np.clip(x0, lp.lo, lp.hi)] + [[0]])  # (x0, t = 0)
        at_zero = self.h - self.G * z  # each constraint's slack at t = 0: a row's t there is it over its t-coefficient
        rows = np.arange(2 * d, len(lp.g))
        t = _mids(at_zero)[rows] / np.array([float(lp.g[k][d]) for k in rows])
        first = int(rows[np.argmin(t)])
        z[d, 0] = at_zero[first, 0] / self.G[first, d]
        s_ball = self.h - self.G * z
        s = _mids(s_ball) / self.size
        tight = [first] + [k for k in range(2 * d) if abs(s[k]) <= BALL_ZERO]
        objective = arb_mat([[int(i == d)] for i in range(d + 1)])
        while len(tight) < d + 1:
            GT = arb_mat(_fmpz_rows(lp, tight))
            step = None
            try:
                directions = self._null_directions(GT, objective)
            except ZeroDivisionError:  # the tight rows' Gram matrix is singular at this precision
                return None
            for u in directions:
                rate_ball = self.G * u
                rate = _mids(rate_ball) / self.size
                outside = np.ones(len(rate), dtype=bool)
                outside[tight] = False
                blocks = np.flatnonzero((rate > BALL_ZERO) & outside)
                if blocks.size:
                    ratio = np.maximum(s[blocks], 0) / rate[blocks]
                    enter = int(blocks[np.argmin(ratio)])
                    step = (u, rate_ball, enter)
                    break
            if step is None:
                return None
            u, rate_ball, enter = step
            alpha = s_ball[enter, 0] / rate_ball[enter, 0]
            z = z + u * alpha
            s_ball = self.h - self.G * z
            s = _mids(s_ball) / self.size
            tight.append(enter)
        return tight

    @staticmethod
    def _null_directions(GT, objective):
        """Directions u with ``GT u = 0``: the objective's projection first (t rises along it), then, where that is
        zero, each coordinate's projection and its negation (t unchanged)."""
        from flint import arb_mat

        gram = GT * GT.transpose()
        n = objective.nrows()

        def projected(v):
            return v - GT.transpose() * gram.solve(GT * v, algorithm="approx")

        u = projected(objective)
        if np.abs(_mids(u)).max() > BALL_ZERO:
            return [u]
        out = []
        for j in range(n - 1):
            u = projected(arb_mat([[int(i == j)] for i in range(n)]))
            if np.abs(_mids(u)).max() > BALL_ZERO:
                out += [u, -u]
        return out

    def _dual(self, K: list[int], inv, s: np.ndarray, lam: np.ndarray) -> list[int] | None:
        """Dual simplex pivots until K's vertex holds every constraint (None past the pivot budget)."""
        from flint import arb_mat

        seen, bland = set(), False
        while True:
            outside = np.ones(len(s), dtype=bool)
            outside[K] = False
            violated = np.flatnonzero((s < -BALL_ZERO) & outside)
            if not violated.size:
                return K
            if not self._spend():
                return None
            bland = bland or frozenset(K) in seen
            seen.add(frozenset(K))
            enter = int(violated.min()) if bland else int(violated[np.argmin(s[violated])])
            w = _mids(inv.transpose() * arb_mat([[v] for v in self.lp.g[enter]]))
            up = np.flatnonzero(w > BALL_ZERO * np.abs(w).max())
            if not up.size:
                return None
            ratio = np.maximum(lam[up], 0) / w[up]
            ties = up[ratio <= ratio.min()]
            K[int(min(ties, key=lambda i: K[i])) if bland else int(up[np.argmin(ratio)])] = enter
            inv, s, lam = self.state(K)

    def _primal(self, K: list[int], inv, s: np.ndarray, lam: np.ndarray) -> list[int] | None:
        """Primal simplex pivots from a vertex that holds every constraint until no multiplier is negative (None
        past the pivot budget)."""
        from flint import arb_mat

        d1 = self.lp.d + 1
        seen, bland = set(), False
        while True:
            negative = self._negative(K, lam)
            if not negative.size:
                return K
            if not self._spend():
                return None
            bland = bland or frozenset(K) in seen
            seen.add(frozenset(K))
            cols = _mids(inv).reshape(d1, d1)
            edge = lam / np.maximum(np.linalg.norm(cols[:-1], axis=0), np.finfo(np.float64).tiny)
            leave = int(min(negative, key=lambda i: K[i])) if bland else int(negative[np.argmin(edge[negative])])
            rate = _mids(self.G * arb_mat([[-inv[j, leave]] for j in range(d1)])) / self.size
            outside = np.ones(len(rate), dtype=bool)
            outside[K] = False
            meets = np.flatnonzero((rate > BALL_ZERO * np.abs(cols[:, leave]).max()) & outside)
            if not meets.size:
                return None
            step = np.maximum(s[meets], 0) / rate[meets]
            K[leave] = int(meets[step <= step.min()].min()) if bland else int(meets[np.argmin(step)])
            inv, s, lam = self.state(K)

    def _spend(self) -> bool:
        """One pivot from the budget; False once it is spent."""
        self.pivots -= 1
        return self.pivots >= 0


def _fmpz_rows(lp: _LP, K: list[int]):
    """The integer matrix of constraints K."""
    from flint import fmpz_mat

    return fmpz_mat([lp.g[k] for k in K])


def _mids(mat) -> np.ndarray:
    """A ball matrix's midpoints as float64, row by row."""
    return np.array([float(v.mid()) for v in mat.entries()])


def _tableau_basis(lp: _LP, K: list[int], lam, M, slack: list) -> list[int] | None:
    """HiGHS's optimal basis for the LP in the coordinates of K's slacks u (z = z_K - B^-1 u): maximise
    ``-lambda . u`` subject to u >= 0 and ``-T_k u <= slack_k`` for the other constraints, with the tableau
    ``T = G B^-1`` computed at :data:`TABLEAU_BITS` bits (HiGHS on the original rows sees a thin region's
    bases through B's condition number; here its errors are those of the tableau's entries). None where HiGHS
    gives no basis of d + 1 constraints."""
    import highspy
    from flint import arb_mat, ctx

    d1 = lp.d + 1
    inside = set(K)
    others = np.asarray([k for k in range(len(lp.g)) if k not in inside], dtype=np.int64)
    if not others.size:
        return None
    with ctx.workprec(TABLEAU_BITS):
        X = arb_mat(M.transpose()).solve(arb_mat(lp.matrices()[2]), algorithm="approx")
    T = np.array([float(v.mid()) for v in X.entries()]).reshape(d1, -1).T[others]
    s = np.array([_to_float(slack[k]) for k in others])
    cost = -np.array([_to_float(lam[i, 0]) for i in range(d1)])
    scale = np.abs(T).max(axis=1)
    keep = (scale > 0) & np.isfinite(scale) & np.isfinite(s)
    T, s, others = T[keep] / scale[keep, None], s[keep] / scale[keep], others[keep]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("presolve", "off")
    inf = highspy.kHighsInf
    h.addVars(d1, np.zeros(d1), np.full(d1, inf))
    h.changeColsCost(d1, np.arange(d1, dtype=np.int32), cost / max(np.abs(cost).max(), 1e-300))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    k = len(others)
    h.addRows(k, np.full(k, -inf), s, k * d1, np.arange(k, dtype=np.int32) * d1,
              np.tile(np.arange(d1, dtype=np.int32), k), -T.ravel())
    h.run()
    basis = h.getBasis()
    basic = highspy.HighsBasisStatus.kBasic
    out = [K[i] for i, st in enumerate(basis.col_status) if st != basic]
    out += [int(others[r]) for r, st in enumerate(basis.row_status) if st != basic]
    return out if len(out) == d1 else None


def _pivot(lp: _LP, K: list[int], lam, M, slack: list) -> list[int]:
    """One rational simplex pivot from K: dual (a violated constraint enters, by the largest violation) while the
    multipliers are >= 0, primal (a negative multiplier's constraint leaves, the first one the move meets enters)
    while the point is feasible, else a dual-feasible restart. Ties and signs are exact; only the choice among
    candidates is judged in float64."""
    from flint import fmpz_mat

    d1 = lp.d + 1
    violated = [k for k, v in enumerate(slack) if v < 0]
    negative = [i for i in range(d1) if lam[i, 0] < 0]
    K = list(K)
    if not negative:
        enter = min(violated, key=lambda k: _to_float(slack[k]) / lp.size[k])
        w = M.transpose().solve(fmpz_mat([[v] for v in lp.g[enter]]))
        K[min((lam[i, 0] / w[i, 0], K[i], i) for i in range(d1) if w[i, 0] > 0)[2]] = enter
        return K
    if violated:
        return lp.dual_start(2 * lp.d)
    i = min(negative, key=lambda i: _to_float(lam[i, 0]) * lp.size[K[i]])
    delta = M.solve(fmpz_mat([[-1 if j == i else 0] for j in range(d1)]))
    num, den = delta.numer_denom()
    rate = (lp.matrices()[0] * num).entries()  # G . delta, times den > 0
    inside = set(K)
    K[i] = min((slack[k] * den / rate[k], k) for k in range(len(rate)) if rate[k] > 0 and k not in inside)[1]
    return K


# HiGHS's simplex variants tried in turn for the float basis: its dual simplex breaks down (kError) on some nearly
# degenerate regions (thin DFT regions, measured) where its primal simplex, or the dual without scaling, solves.
STRATEGIES = ({}, {"simplex_strategy": 4}, {"simplex_scale_strategy": 0})


def _float_basis(lp: _LP, A: np.ndarray, c: np.ndarray, lo, hi) -> list[int] | None:
    """HiGHS's final basis over the LP's rows (normalised in float64) as constraint positions of ``lp``: the first
    of :data:`STRATEGIES` that solves; None where none does or the basis is not d + 1 tight constraints with t
    basic."""
    import highspy

    from argmaxable.core.solvers import HighsLP

    S = highspy.HighsBasisStatus
    rows = np.asarray(lp.row[2 * lp.d :], dtype=np.int64)
    inv = 1.0 / row_norms(A[rows])
    for options in STRATEGIES:
        solver = HighsLP(lo, hi, options)
        solver.add_rows(A[rows] * inv[:, None], c[rows] * inv)
        if solver.solve().ok:
            break
    else:
        return None
    cols, row_status = solver.basis()
    if cols[lp.d] != S.kBasic:
        return None
    K = [2 * j + (0 if s == S.kUpper else 1) for j, s in enumerate(cols[: lp.d]) if s in (S.kUpper, S.kLower)]
    K += [2 * lp.d + k for k, s in enumerate(row_status) if s in (S.kUpper, S.kLower)]
    return K if len(K) == lp.d + 1 else None


def _violated(lp: _LP, A, c, live, z) -> np.ndarray:
    """The system's live rows outside the LP that z = (x, t) violates: a float64 pass with a rounding bound rules
    out the rows that hold by more than it, the rest are evaluated exactly."""
    from flint import fmpz_mat

    d = lp.d
    xf = np.array([_to_float(z[j, 0]) for j in range(d)])
    tf = _to_float(z[d, 0])
    Al, cl = A[live], c[live]
    norms = row_norms(Al)
    val = Al @ xf + cl + tf * norms
    # float64 rounding of the products and of A's differences, x and t rounded to float64, the norms' error: with room
    err = 8 * (gamma(d + 4) + 2.0**-60) * (np.abs(Al) @ np.abs(xf) + np.abs(cl) + abs(tf) * norms) + (
        d + 4) * 2.0**-1070
    cand = live[val + err >= 0]
    cand = np.asarray([i for i in cand if int(i) not in lp.index], dtype=np.int64)
    if not cand.size:
        return cand
    rows = _row_constraints(lp.terms, cand, lp.bits, d)
    num, den = z.numer_denom()
    value = (fmpz_mat([g for g, _, _ in rows]) * num).entries()  # g . z, times den > 0
    return cand[[k for k, (_, h, _) in enumerate(rows) if value[k] > h * den]]


def _to_float(q) -> float:
    """A rational rounded to the nearest float64 (Python's int division rounds correctly; +-inf beyond range)."""
    try:
        return int(q.p) / int(q.q)
    except OverflowError:
        return -np.inf if q.p < 0 else np.inf


def _decide(lp: _LP, K: list[int], lam, z, slack: list, eps: float, step: int) -> Settled:
    """The verdicts and the evidence at basis K, optimal or not. Its point x (from z) satisfies every constraint
    at ``t_x``: z's t, lowered to ``t + slack_k / g_kt`` for each row it violates (none: x leaves the box), so its
    margin is at least t_x (1 - 2^-bits). Its multipliers over the rows, the negative ones dropped, are weights
    ``mu >= 0``: ``N = sup_box(-v . x) - sum mu_i c_i`` with ``v = sum mu_i a_i`` bounds the radius by
    ``N / sum mu_i ||a_i|| <= N / sum mu_i n_i``, and N <= 0 empties the region. At an optimum no multiplier is
    negative and t_x = N = t*."""
    from flint import fmpq, fmpq_mat, fmpz_mat

    d, bits = lp.d, lp.bits
    t = z[d, 0]
    tx = t
    for k, v in enumerate(slack):
        if v < 0:
            if lp.row[k] < 0:
                tx = None
                break
            tx = min(tx, t + v / lp.g[k][d])
    chosen = [(i, k) for i, k in enumerate(K) if lp.row[k] >= 0 and lam[i, 0] > 0]
    optimal = tx is not None and tx == t and all(lam[i, 0] >= 0 for i in range(d + 1))
    rows = np.asarray([lp.row[k] for _, k in chosen], dtype=np.int64)
    weights = [lam[i, 0] for i, _ in chosen]
    if chosen:  # mu_i a_i = lambda_k g_k[:d] and mu_i c_i = -lambda_k h_k: the scales cancel
        v = fmpz_mat([lp.g[k] for _, k in chosen]).transpose() * fmpq_mat([[w] for w in weights])
        total = v[d, 0]  # sum mu_i n_i
        num = sum((max(-v[j, 0] * fmpq(a.numerator, a.denominator), -v[j, 0] * fmpq(b.numerator, b.denominator))
                   for j, (a, b) in enumerate(lp.box)), fmpq(0))
        num += sum((w * lp.h[k] for w, (_, k) in zip(weights, chosen, strict=True)), fmpq(0))
    shrink = 1 - fmpq(1, 2**bits)  # margins are at least t n_i / ||a_i|| >= t (1 - 2^-bits)
    # radius <= N / sum mu_i ||a_i||, and sum mu_i ||a_i|| lies in [total, total / shrink]
    upper = np.inf if not chosen else _up(num / total) if num >= 0 else _up(num * shrink / total)
    lower = np.nan if tx is None else _down(tx * shrink) if tx > 0 else _down(tx)
    region = "yes" if tx is not None and tx > 0 else "no" if chosen and num <= 0 else ""
    xs = [Fraction(int(z[j, 0].p), int(z[j, 0].q)) for j in range(d)] if region == "yes" else None
    mu = [Fraction(int(w.p), int(w.q)) * Fraction(2) ** -lp.scale[k] for w, (_, k) in zip(weights, chosen,
                                                                                       strict=True)]
    out = Settled(UNDECIDED, region, lower, upper, xs, rows, mu, "", optimal)
    what = f"exact stage (norms to {bits} bits, {step} rational bases): "
    eps_q = fmpq(*Fraction(float(eps)).as_integer_ratio())
    if tx is not None and tx * shrink > eps_q:
        out.status = ARGMAXABLE
        out.message = what + f"a rational witness with margin > eps={eps:g} (t = {_to_float(tx):.3g})"
    elif chosen and num <= eps_q * total:
        out.status = UNARGMAXABLE
        out.message = what + f"radius <= {upper:.3g} <= eps={eps:g} by rational dual weights over {len(rows)} rows"
    elif optimal:
        out.message = what + f"the radius lies within 2^-{bits} of eps={eps:g} relative (norms are irrational)"
    out.message = "; ".join(filter(None, [out.message, out.inside]))
    return out


def _down(q) -> float:
    """A float64 at most the rational q (fmpq): -inf, or the largest float, beyond range."""
    f = _to_float(q)
    if np.isinf(f):
        return -np.inf if f < 0 else float(np.finfo(np.float64).max)
    return float(np.nextafter(f, -np.inf)) if Fraction(f) > Fraction(int(q.p), int(q.q)) else f


def _up(q) -> float:
    """A float64 at least q."""
    return -_down(-q)
