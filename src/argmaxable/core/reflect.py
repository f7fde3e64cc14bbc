"""The approximate stage: braid reflection (002 §3.4.1, Fig. 5), batched over many targets.

For each target, start at a natural point and, while some constraint is violated, reflect the point across
the hyperplane of the worst one. One step for a batch of targets is one matrix product (batch × d) @ (d × n),
so the whole vocabulary of a GPT-2-sized layer costs a few W·Wᵀ-sized passes in float32. The stage is
one-sided: it proves "argmaxable" with a witness inside the box, never the opposite; every acceptance is
rigorous (the products' rounding is bounded, and the rows a borderline point may lose to are measured again
in float64: :meth:`~argmaxable.core.fastpath.LayerProducts.evaluate`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from argmaxable.core.backend import release_free_heap
from argmaxable.core.box import inside, shrink_factors
from argmaxable.core.fastpath import GramPass
from argmaxable.core.systems import GramStart, System, Ties, Whitening
from argmaxable.witness_paths import WitnessPaths


@dataclass
class ReflectOutcome:
    """Per-target result of the approximate stage."""

    proven: np.ndarray  # (T,) bool: witness found in the box with margin > eps
    steps: np.ndarray  # (T,) int: argmax evaluations until proven (1 = the start point already wins), -1 if not
    x: np.ndarray  # (T, d) float64: the witness if proven, else the iterate of best margin (seeds the exact LP)
    rows: dict = field(default_factory=dict)  # position -> rows that beat an unproven item in its last steps
    margin: np.ndarray | None = None  # (T,) the certified margin of each witness (> eps), NaN where not proven
    paths: WitnessPaths | None = None  # the steps that made witnesses bit for bit, positions over the T items


# The rows an item reflected across in its last SEED_STEPS steps seed its LP's first working set. Measured on
# PP-OCRv4 (benchmarks/RESULTS.md): the last 128 steps' rows instead of the 64-step stall window's take its LPs
# from 3.8 to 3.0 rounds and the head from 3.7-3.9 s to 3.1-3.2 s (96: 3.5 s; 192 and 512: 3.2-3.3 s); neutral
# on the heads whose d is small.
SEED_STEPS = 128


# Reflections from the start point after which an item a :class:`~argmaxable.core.systems.Whitening` system
# whitens restarts from its whitened point. One: on a whole vocabulary the first reflection's row comes from the
# Gram pass (no product), and most items its first step proves keep their witnesses; measured on 3000-row samples
# (benchmarks/RESULTS.md), the items beaten at their start that one reflection leaves unproven take 2-300 more
# steps from there, and at most 117 from the whitened point (Qwen2.5-Coder-0.5B).
RESTART_AFTER = 1


# A restarted item's working set (:class:`_WorkingSets`): each evaluation adds the rows of its point's NEAR_ROWS
# largest logits, the set keeps the last WORKING_ROWS of them, and between two evaluations the item reflects across
# the set's most violated row at most SETTLE_STEPS times. Measured on the 200 items of Qwen2.5-Coder-0.5B's head that
# took the most evaluations (benchmarks/RESULTS.md): 64 evaluations each (median) without sets, 7 with them.
NEAR_ROWS, WORKING_ROWS, SETTLE_STEPS = 16, 64, 50

# Layers of at most this many weights reflect without working sets: an evaluation there costs less than a set's upkeep
# (whitening 16 rows, a Gram product and up to 50 reflections per item and step). The benchmarks' clustered sphere of
# 4000 x 64 took 1.4-1.5 s with them against 0.4-0.5 s without (benchmarks/RESULTS.md); the same size as the first
# step's Gram blocks use (:data:`~argmaxable.core.fastpath.BF16_ABOVE`).
SETS_ABOVE = 1_000_000

# Slots whose working sets :class:`_WorkingSets` updates in one batched product (at d = 896, 64 of them hold 15 MB).
SET_BLOCK = 64

# A working set left violated by this many settles since its item's best margin last improved is dropped
# (:meth:`_WorkingSets.settle`).
DROP_AFTER = 3


def stall_window(n: int, d: int) -> int:
    """Reflections without progress after which an item leaves for the exact stages: 12000 d / n, within [16, 64].

    Unargmaxable items stop improving long before the patience (2500) runs out; the PP-OCRv4 head's 202
    unargmaxable characters stop after 160-220 steps (median, 90th percentile) and would reflect in vain to the
    cap, which stays the cap. Leaving early costs an LP for each argmaxable item that would have won later. A
    reflection step costs about n d per item and an LP about d^2 (some 3d simplex pivots over rows of length d)
    plus a few passes over the n rows, so the window that balances the two grows like d / n. Measured
    (benchmarks/RESULTS.md), best windows: 16 for the hard head 32000 x 32 (10.2 s against 13.4 s with 64) and
    the debtags LM's 4000 x 4 and 4000 x 8 heads, 16-64 even for 50257 x 64, 48-64 for the LM's 4000 x 16 head
    and 64 for PP-OCRv4 (6625 x 120).
    """
    return int(np.clip(12000 * d / n, 16, 64))


def batch_size(n: int, budget_bytes: int = 1 << 28) -> int:
    """Items in flight in reflection's pool (:func:`_reflect_pool`) so that one (items × n) float32 block of logits
    stays within ``budget_bytes``."""
    return max(1, min(4096, budget_bytes // (4 * max(n, 1))))


def reflect(system: System, items: np.ndarray, *, patience: int, box: tuple[np.ndarray, np.ndarray], eps: float,
            progress=None, out: np.ndarray | None = None, stall: int | None = None) -> ReflectOutcome:
    """Run braid reflection for ``items`` of ``system`` for at most ``patience`` reflections each.

    Parameters
    ----------
    system : System
        Adapter giving start points, batched residuals and reflection rows (see :mod:`systems`).
    items : ndarray of int
        Which items of the system to try.
    patience : int
        Reflections before giving up on an item (002 §4: 2500).
    box : (ndarray, ndarray)
        Per-coordinate ends ``(lo, hi)`` of the box (:func:`argmaxable.core.box.make_box`): witnesses lie in it.
    eps : float
        Required margin.
    progress : callable, optional
        Called with the number of items finished after each batch.
    out : ndarray, shape (len(items), d), optional
        Float64 array to hold the iterates (returned as ``x``), saving an n×d allocation for a whole vocabulary.
    stall : int, optional
        Give up on an item once its best certified margin has not improved for this many reflections (default:
        :func:`stall_window` of the system's n rows and width d).

    Items a :class:`~argmaxable.core.systems.Ties` system shows tied are not reflected (no point wins them): they
    keep their start points, unproven, for the LP stage.
    """
    T = len(items)
    stall = stall_window(system.n_rows, system.d) if stall is None else stall
    progress = progress or (lambda k: None)
    proven = np.zeros(T, dtype=bool)
    steps = np.full(T, -1, dtype=np.int64)
    margin = np.full(T, np.nan)
    X = np.empty((T, system.d)) if out is None else out
    tied = system.tied(items) if isinstance(system, Ties) else np.zeros(T, dtype=bool)
    todo = np.flatnonzero(~tied)
    progress(int(tied.sum()))
    whole = system.n_rows == T and np.array_equal(items, np.arange(T)) and isinstance(system, GramStart)
    gram = None
    # A biased layer's start points lifted into the box (:func:`~argmaxable.core.box.start_lift`), by one power of
    # two from all its rows, whichever items are asked: a class range (a shard) starts where the whole vocabulary
    # does.
    lifts = isinstance(system, GramStart) and not system.homogeneous
    lift = system.start_lift(*box) if lifts else 1.0
    with _products(system, whole):
        if whole:
            # Every category at once: the first step from the Gram matrix's upper triangle (half the work).
            start = system.start(slice(None))  # all start points: the layer itself, a view
            # lift w_t is in the box exactly when w_t is in the box divided by the power of two
            scale, rounding, fits = np.ones(T), np.zeros(T), inside(start, box[0] / lift, box[1] / lift)
            moved, shrunk = np.zeros(0, dtype=np.int64), start[:0].astype(X.dtype)
            if system.homogeneous:  # a cone: scaling into the box divides every distance by the same factor
                scale = shrink_factors(start, *box)
                moved = np.flatnonzero(np.isfinite(scale) & (scale > 1))  # usually none: no n×d temporary
                shrunk = (start[moved] / scale[moved, None]).astype(X.dtype)
                # The stored point is w_t / s rounded: within sqrt(d) u max|x_j| of it; distances are 1-Lipschitz.
                rounding[moved] = np.sqrt(system.d) * np.finfo(X.dtype).eps * np.abs(shrunk).max(axis=1)
                fits[moved] = inside(shrunk, *box)
            with np.errstate(invalid="ignore"):  # an all-zero layer: 0 / 0 margins, which prove nothing
                gram = system.start_margins(eps, lift=lift)
                first = gram.margin / scale - rounding
                won = (first > eps) & fits
            proven[won], steps[won], margin[won] = True, 1, first[won]
            progress(int(won.sum()))
            todo = np.flatnonzero(~won & ~tied)
        plan = _Plan(patience, box, eps, stall, batch_size(system.n_rows), whole, X.dtype, gram, lift)
        pool = _reflect_pool(system, items[todo], plan, progress)
    proven[todo], steps[todo], margin[todo] = pool.proven, pool.steps, pool.margin
    rows = {int(todo[k]): r for k, r in pool.seen.items()}
    paths = None
    if whole:
        _write_witnesses(system, X, start, moved, shrunk, todo, pool, won, lift)
        if pool.path is not None:
            paths = pool.path.witness_paths(todo[pool.path.where], system.dtype)
    else:
        X[todo[pool.kept]] = pool.points
        X[tied] = system.start(items[tied])
    return ReflectOutcome(proven, steps, X, rows, margin, paths)


@contextmanager
def _products(system: System, whole: bool) -> Iterator[None]:
    """The scope of reflection's products: what a :class:`~argmaxable.core.systems.GramStart` system keeps for
    them (the bfloat16 copy of the layer, the logit buffer, the torch copies: half the float32 layer and more) is
    dropped when they are over, before a whole vocabulary's witnesses are written (:func:`_write_witnesses`), and
    with it the blocks reflection's temporaries left in the heap; within it numpy's BLAS threads are as the system's
    steps need them (:meth:`~argmaxable.core.fastpath.LayerProducts.step_threads`)."""
    try:
        with system.step_threads() if isinstance(system, GramStart) else nullcontext():
            yield
    finally:
        if isinstance(system, GramStart):
            system.release()
            if whole:
                release_free_heap()


def _write_witnesses(system: GramStart, X: np.ndarray, start: np.ndarray, moved: np.ndarray, shrunk: np.ndarray,
                     todo: np.ndarray, pool: _Pool, won: np.ndarray, lift: float) -> None:
    """The witnesses and iterates of a whole vocabulary, written into ``X`` once reflection's products are over
    (:func:`_products`): the start points lift w_t the Gram pass proved (``won``), the others' w_t. The points the
    pool proved are replayed from its path (:class:`Path`), bit for bit: holding them in ``X`` while the products ran
    put the witnesses and the bfloat16 copy in memory at once (SmolLM2's peak, 3x its layer)."""
    X[:] = start
    if lift != 1:  # in place: no copy of the layer
        np.multiply(X, lift, out=X, where=won[:, None])
    X[moved] = shrunk
    X[todo[pool.kept]] = pool.points
    if pool.path is not None:
        pool.path.replay(system, X, todo[pool.path.where])


@dataclass
class Path:
    """How a pool's proven items reached their witnesses: for each step, the scaling into the box and the
    reflection, recorded as :func:`_reflect_pool` applied them (elementwise float operations on the rows of
    ``system.rows``, which do not depend on the other items), so that :meth:`replay` reproduces each witness bit for
    bit.
    A step's record holds a few numbers per item where the witness holds d."""

    items: np.ndarray  # (P,) the items proven, as the system names them
    where: np.ndarray  # (P,) their positions in the pool
    records: list  # per step: (positions scaled, scales or None, positions reflected, rows, coefficients)

    def replay(self, system: System, out: np.ndarray, at: np.ndarray) -> None:
        """Writes the items' witnesses, computed in the system's dtype as the pool computed them, into ``out[at]``,
        :data:`REPLAY_BYTES` of float64 points at a time: each step is elementwise on its item's own point and rows,
        so a chunk of items replays as the whole would, its steps in their order. Replayed whole, the first step's
        rows, their differences and their products held three copies of the points beside the witnesses
        (SmolLM2's peak, 4.3x its float32 layer). Each step's entries are sorted into chunks once, so that no step is
        read again for every chunk."""
        chunk = max(1, REPLAY_BYTES // (8 * system.d))
        steps = [[] for _ in range(0, len(self.items), chunk)]  # per chunk: (step, its entries there)
        for r, (scaled, scale, moved, _, _) in enumerate(self.records):
            scaled_at = _by_chunk(scaled, chunk) if scale is not None else {}
            moved_at = _by_chunk(moved, chunk)
            for c in sorted(scaled_at.keys() | moved_at.keys()):
                steps[c].append((r, scaled_at.get(c), moved_at.get(c)))
        for c, todo in enumerate(steps):
            lo, hi = c * chunk, min((c + 1) * chunk, len(self.items))
            X = np.array(system.start(self.items[lo:hi]), dtype=system.dtype)
            for r, s, m in todo:
                scaled, scale, moved, rows, coef = self.records[r]
                if s is not None:
                    X[scaled[s] - lo] /= scale[s, None]
                if m is not None:
                    a, _ = system.rows(self.items[moved[m]], rows[m])
                    X[moved[m] - lo] -= coef[m, None] * a
            out[at[lo:hi]] = X

    def witness_paths(self, positions: np.ndarray, dtype) -> WitnessPaths | None:
        """These steps as :class:`~argmaxable.witness_paths.WitnessPaths` for the witnesses at ``positions`` (one per
        item, in :attr:`items`' order), their points in ``dtype`` as :meth:`replay` makes them; None where the steps'
        coefficients or divisors do not share one dtype each."""
        parts, coefs, scales = [], set(), set()
        for r, (scaled, scale, moved, rows, coef) in enumerate(self.records):
            if scale is not None and len(scaled):
                parts.append((scaled, np.full(len(scaled), r), np.full(len(scaled), -1), scale))
                scales.add(scale.dtype)
            if coef is not None and len(moved):
                parts.append((moved, np.full(len(moved), r), rows, coef))
                coefs.add(coef.dtype)
        if len(coefs) > 1 or len(scales) > 1:
            return None
        item, step, rows, values = (np.concatenate([p[j] for p in parts]) if parts else EMPTY for j in range(4))
        order = np.lexsort((step, item))  # each item's steps in the order they ran (a record is one kind)
        counts = np.bincount(item, minlength=len(self.items))
        return WitnessPaths(np.asarray(positions, dtype=np.int64), np.concatenate([[0], np.cumsum(counts)]),
                            rows[order].astype(np.int64), values[order].astype(np.float64), np.dtype(dtype).name,
                            (coefs.pop() if coefs else np.dtype(dtype)).name,
                            (scales.pop() if scales else np.dtype(np.float64)).name)


def _by_chunk(positions: np.ndarray, chunk: int) -> dict[int, np.ndarray]:
    """The entries of ``positions`` in each chunk of ``chunk`` positions that holds some, as indices into it."""
    if not positions.size:
        return {}
    c = positions // chunk
    order = np.argsort(c, kind="stable")
    ids, first = np.unique(c[order], return_index=True)
    return dict(zip(ids.tolist(), np.split(order, first[1:]), strict=True))


EMPTY = np.zeros(0, dtype=np.int64)
# Float64 bytes of the points :meth:`Path.replay` replays at once: 1820 items at d = 576, 256 at d = 4096.
REPLAY_BYTES = 8 << 20


class _Recorder:
    """The steps of a pool's items, for the :class:`Path` of those it proves; :func:`_reflect_pool` stops it (and
    keeps the witnesses as rows) once its records would outgrow the points they stand for."""

    def __init__(self, T: int, d: int):
        self.records, self.entries, self.limit = [], 0, T * d // 8

    def step(self, scaled=EMPTY, scale=None, moved=EMPTY, rows=EMPTY, coef=None) -> None:
        """One operation on the pool's points (items named by their positions in the pool): a scaling (``scaled``
        divided by ``scale``) or a reflection (``moved``, across ``rows``, by ``coef``)."""
        self.entries += len(scaled) + len(moved)
        self.records.append((scaled, scale, moved, rows, coef))

    def path(self, items: np.ndarray, proven: np.ndarray) -> Path:
        where = np.flatnonzero(proven)
        index = np.full(len(proven), -1)
        index[where] = np.arange(len(where))
        records = []
        for scaled, scale, moved, rows, coef in self.records:
            keep, take = index[scaled] >= 0, index[moved] >= 0
            records.append((index[scaled[keep]], None if scale is None else scale[keep], index[moved[take]],
                            rows[take], None if coef is None else coef[take]))
        return Path(items[where], where, records)


class _WorkingSets:
    """For each slot of reflection's pool, the rows that came nearest to its restarted item's points (whitened:
    :meth:`~argmaxable.core.systems.Whitening.whitened`), with their offsets and Gram matrix. Between two evaluations
    (a product with the whole layer each), :meth:`settle` reflects the item across the most violated of them until
    none is: braid reflection on the set alone, about 2 K entries a reflection for a set of K rows, where an
    evaluation reads the n d of the layer. The next evaluation finds the rows the set lacks. An item whose region is
    thin (an LLM head's under-trained tokens) otherwise spends an evaluation on each reflection, most of them
    across rows it has met before or that were near it."""

    def __init__(self, slots: int, size: int, d: int, dtype):
        self.rows = np.full((slots, size), -1, dtype=np.int64)  # the layer's row in each place (-1: none)
        self.A = np.zeros((slots, size, d), dtype=dtype)  # the whitened constraint rows
        self.c = np.zeros((slots, size))  # their offsets
        self.G = np.zeros((slots, size, size))  # their Gram matrix
        self.added = np.zeros(slots, dtype=np.int64)  # rows added since the slot was cleared
        self.unsettled = np.zeros(slots, dtype=np.int64)  # settles that left it violated since its item improved
        self.dropped = np.zeros(slots, dtype=bool)  # sets that could not be settled into (:meth:`settle`)

    def clear(self, slots: np.ndarray) -> None:
        self.rows[slots], self.added[slots], self.unsettled[slots], self.dropped[slots] = -1, 0, 0, False

    def add(self, system: Whitening, items: np.ndarray, slots: np.ndarray, near: np.ndarray) -> None:
        """Adds to the sets of ``slots`` (their items ``items``) the rows ``near`` they do not hold, in place of their
        oldest rows once full."""
        size = self.rows.shape[1]
        new = (near >= 0) & (near != items[:, None]) & ~(near[:, :, None] == self.rows[slots][:, None, :]).any(2)
        rank = np.cumsum(new, axis=1)  # each new row's place among its slot's, from 1
        new &= rank <= size
        p, k = np.nonzero(new)
        if not p.size:
            return
        a, c = system.rows(items[p], near[p, k])
        where = slots[p]
        place = (self.added[where] + rank[p, k] - 1) % size
        self.A[where, place], self.c[where, place], self.rows[where, place] = system.whitened(a), c, near[p, k]
        count = new.sum(axis=1)
        self.added[slots] += count
        # The Gram matrix's new rows and columns, a block of slots at a time; each slot's new places padded to the
        # same number by repeating its last (writing the same entries twice).
        has = np.flatnonzero(count)
        first = np.concatenate([[0], np.cumsum(count[has])[:-1]])
        pad = first[:, None] + np.minimum(np.arange(count.max()), count[has, None] - 1)
        groups, at = slots[has], place[pad]
        everywhere = np.arange(size)
        for lo in range(0, len(groups), SET_BLOCK):
            g, new_at = groups[lo : lo + SET_BLOCK, None], at[lo : lo + SET_BLOCK]
            block = np.matmul(self.A[g[:, 0]], self.A[g, new_at].transpose(0, 2, 1)).astype(np.float64)
            self.G[g[:, :, None], everywhere[None, :, None], new_at[:, None, :]] = block  # (slots, size, new)
            self.G[g[:, :, None], new_at[:, :, None], everywhere[None, None, :]] = block.transpose(0, 2, 1)

    def settle(self, system: Whitening, slots: np.ndarray, X: np.ndarray, steps: int) -> np.ndarray:
        """The points ``X`` (one per slot of ``slots``), each reflected across its set's most violated row until none
        is violated, at most ``steps`` times; a block of slots at a time. A set left violated by :data:`DROP_AFTER`
        settles since its item's best margin last improved (:attr:`unsettled`, which the pool resets) is dropped for
        the rest of its item's stay (:attr:`dropped`): its rows hold no point, or one too thin for the set to find,
        and its upkeep (a top-k over each evaluation's logits, whitening, Gram products) costs more than the
        evaluations it saves. In the benchmarks' clustered sphere 79% of the settles left their sets violated (the rows
        of near-duplicates); none of Qwen2.5-Coder-0.5B's 5694 did.
        """
        Y = system.to_whitened(X)
        moved = np.zeros(len(slots), dtype=bool)
        for lo in range(0, len(slots), SET_BLOCK):
            g, y = slots[lo : lo + SET_BLOCK], Y[lo : lo + SET_BLOCK]
            A, G = self.A[g], self.G[g]
            v = self.c[g] + np.matmul(A, y[:, :, None])[:, :, 0]  # the rows' values at the points
            diag = np.diagonal(G, axis1=1, axis2=2).copy()
            v[(self.rows[g] < 0) | ~(diag > 0)] = -np.inf  # no row, or a zero one (a duplicate)
            coef = np.zeros_like(v)
            live = np.arange(len(g))
            for _ in range(steps):
                k = np.argmax(v[live], axis=1)
                top = v[live, k]
                go = top > 0
                live, k, top = live[go], k[go], top[go]
                if not live.size:
                    break
                alpha = 2 * top / diag[live, k]
                v[live] -= alpha[:, None] * G[live, k]  # the values after the reflection, from the Gram matrix's rows
                coef[live, k] += alpha
            violated = np.zeros(len(g), dtype=bool)
            violated[live] = (v[live] > 0).any(axis=1)  # (live is empty where every set settled)
            self.unsettled[g] += violated
            self.dropped[g] |= self.unsettled[g] >= DROP_AFTER
            here = np.flatnonzero(coef.any(axis=1))
            y[here] -= np.matmul(coef[here, None, :].astype(A.dtype), A[here])[:, 0, :].astype(Y.dtype)
            moved[lo + here] = True
        if moved.any():
            X[moved] = system.from_whitened(Y[moved])
        return X


@dataclass
class _Pool:
    """What :func:`_reflect_pool` found, per item of the pool."""

    proven: np.ndarray  # (T,) bool
    steps: np.ndarray  # (T,) int, -1 where not proven
    margin: np.ndarray  # (T,) each witness's certified margin, NaN where not proven
    seen: dict  # position -> the rows that beat an unproven item in its last steps
    kept: np.ndarray  # positions whose points are held as rows ...
    points: np.ndarray  # ... these: the witness if proven, else the iterate of best margin
    path: Path | None  # how the other proven items reached their witnesses (None: every point is kept)


@dataclass(frozen=True)
class _Plan:
    """How :func:`_reflect_pool` runs: the patience and stall window per item, the box and eps, the slots
    (``capacity``), whether to record proven items' paths, the dtype its kept points take, the Gram pass whose
    blocks spare the first step its product (None: none ran) and the power of two its start points are lifted by."""

    patience: int
    box: tuple[np.ndarray, np.ndarray]
    eps: float
    stall: int
    capacity: int
    record: bool
    dtype: type
    gram: GramPass | None = None
    lift: float = 1.0  # the start points' power of two (:func:`~argmaxable.core.box.start_lift`)


def _reflect_pool(system: System, items: np.ndarray, plan: _Plan, progress) -> _Pool:
    """Braid reflection for ``items``, ``plan.capacity`` of them in flight: each step evaluates every item in flight
    at once (one product with the layer), an item leaves when proven, stalled, out of patience or at a duplicate
    row, and the next item takes its place. A step costs a pass over the layer however few items it carries, so
    a pool kept full spends no steps on a few slow items while the rest wait (Qwen2.5-Coder-0.5B's fixed
    batches spent 88 of a batch's 121 steps on 1-8 items, at 84 ms each against 2.3 ms per item in a full step).

    Points that leave are kept as rows of ``plan.dtype``; with ``plan.record``, those of proven items that did not
    restart are recorded as a :class:`Path` instead, while the records stay smaller than the points.

    In a :class:`~argmaxable.core.systems.Whitening` system that whitens, an item that :data:`RESTART_AFTER`
    reflections have not proven restarts from its whitened point (:meth:`~Whitening.restart`) and reflects in the
    metric P from there: x <- x - 2 (a.x + c) / (a.P a) P a, the reflection across the same hyperplane in that
    metric. Its best margin and stall count start again, and after each reflection it also reflects across its
    working set, the rows nearest its points so far (:class:`_WorkingSets`), before its next evaluation, unless the
    set has been dropped (:meth:`_WorkingSets.settle`)."""
    T, d = len(items), system.d
    patience, box, eps, stall, dtype = plan.patience, plan.box, plan.eps, plan.stall, plan.dtype
    evaluate = system.evaluate if plan.gram is None else partial(system.evaluate, gram=plan.gram)
    whitens = isinstance(system, Whitening) and system.whitens
    large = system.n_rows * d > SETS_ABOVE
    sets = _WorkingSets(min(plan.capacity, T), WORKING_ROWS, d, system.dtype) if whitens and large and T else None
    proven, restarted = np.zeros(T, dtype=bool), np.zeros(T, dtype=bool)
    steps, margin = np.full(T, -1, dtype=np.int64), np.full(T, np.nan)
    seen, kept, points = {}, [EMPTY], [np.zeros((0, d), dtype)]
    recorder = _Recorder(T, d) if plan.record else None
    B = max(1, min(plan.capacity, T))  # the slots, each holding one item's state
    at = np.full(B, -1, dtype=np.int64)  # the position in ``items`` each slot holds (-1: free)
    X = np.empty((B, d), dtype=system.dtype)
    best = np.full(B, -np.inf)  # best certified margin so far
    best_x = np.full((B, d), np.nan)  # the iterate that reached it, float64
    since = np.zeros(B, dtype=np.int64)  # reflections since the best margin last improved
    age = np.zeros(B, dtype=np.int64)  # the item's evaluations so far
    recent = np.full((B, SEED_STEPS), -1, dtype=np.int64)  # ring buffer of the rows reflected across
    queued = 0

    def leave(slots: np.ndarray, won: np.ndarray, seed: np.ndarray) -> None:
        """Items at ``slots`` leave the pool, proven where ``won``; their points are kept unless recorded; where
        ``seed``, the rows they last reflected across are kept for their LP."""
        p = at[slots]
        proven[p[won]], steps[p[won]], margin[p[won]] = True, age[slots[won]] + 1, best[slots[won]]
        for g in slots[seed]:  # and those of its working set (the rows nearest its points)
            rows = recent[g] if sets is None else np.concatenate([recent[g], sets.rows[g]])
            seen[int(at[g])] = np.unique(rows[rows >= 0])
        keep = ~won | restarted[p] if recorder is not None else np.ones(len(slots), dtype=bool)
        tried = ~won & np.isfinite(best_x[slots, 0])  # the exact LP starts from the best iterate, not the last
        x = np.where(tried[:, None], best_x[slots], X[slots])
        kept.append(p[keep])
        points.append(x[keep].astype(dtype))
        at[slots] = -1
        progress(len(slots))

    while True:
        free = np.flatnonzero(at < 0)[: T - queued]
        if free.size:  # the next items take the free slots, at their start points
            at[free] = np.arange(queued, queued + len(free))
            queued += len(free)
            X[free] = system.start(items[at[free]])
            if plan.lift != 1:  # (exact: a power of two; replayed as a division by its inverse)
                X[free] *= plan.lift
                if recorder is not None:
                    recorder.step(scaled=at[free], scale=np.full(len(free), 1 / plan.lift, dtype=X.dtype))
            best[free], best_x[free], since[free], age[free], recent[free] = -np.inf, np.nan, 0, 0, -1
            if sets is not None:
                sets.clear(free)
        active = np.flatnonzero(at >= 0)
        if active.size == 0:
            break
        if system.homogeneous:  # no offsets: the region is a cone, scaling into the box changes nothing
            scale = shrink_factors(X[active], *box)
            fits = active[np.isfinite(scale)]
            shrink = scale[np.isfinite(scale)].astype(X.dtype)
            X[fits] /= shrink[:, None]
            if recorder is not None:  # (a division by 1 changes no point; restarted items are not replayed)
                rec = (shrink != 1) & ~restarted[at[fits]]
                recorder.step(scaled=at[fits[rec]], scale=shrink[rec])
        near = np.full((len(active), NEAR_ROWS if sets is not None else 0), -2, dtype=np.int64)
        if sets is not None:
            # the rows near the points of restarted items that keep their sets (:class:`_WorkingSets`)
            near[restarted[at[active]] & ~sets.dropped[active]] = -1
            worst, m = evaluate(items[at[active]], X[active], eps, near=near)  # one (b × d) @ (d × n) product
        else:
            worst, m = evaluate(items[at[active]], X[active], eps)
        wins = m > eps  # certified: the rounding of the product is accounted for
        better = m > best[active]
        best[active[better]] = m[better]
        best_x[active[better]] = X[active[better]]
        since[active] = np.where(better, 0, since[active] + 1)
        if sets is not None:
            sets.unsettled[active[better]] = 0
        recent[active, age[active] % SEED_STEPS] = worst
        # A winning point outside the box goes to the exact LP, as in 002 §4 (with no rows: none beat it); so does
        # an item that has stalled or run out of patience.
        done = wins & inside(X[active].astype(np.float64), *box)
        out = wins | (since[active] >= stall) | (age[active] == patience)
        leave(active[out], done[out], ~wins[out])
        active, worst, near = active[~out], worst[~out], near[~out]
        if recorder is not None and recorder.entries > recorder.limit:  # the proven so far as rows, from now on all
            path = recorder.path(items, proven & ~restarted)
            kept.append(path.where)
            points.append(np.empty((len(path.items), system.d), dtype=dtype))
            path.replay(system, points[-1], np.arange(len(path.items)))
            recorder = None
        if whitens:  # evaluated at the next step
            back = age[active] == RESTART_AFTER
            r = active[back]
            X[r] = system.restart(items[at[r]], box)
            restarted[at[r]], best[r], since[r] = True, -np.inf, 0
            age[r] += 1
            active, worst, near = active[~back], worst[~back], near[~back]
        a, c = system.rows(items[at[active]], worst)  # (b, d), (b,)
        direction, metric = a, restarted[at[active]]
        if metric.any():
            direction = a.copy()
            direction[metric] = system.metric(a[metric])
        sq = np.einsum("bd,bd->b", a, direction)
        movable = sq > 0  # a zero row (duplicate) cannot be reflected across: leave it to the LP
        val = np.einsum("bd,bd->b", a, X[active]) + c
        coef = np.where(movable, 2.0 * val / np.where(movable, sq, 1.0), 0.0)
        X[active] -= coef[:, None] * direction
        if recorder is not None:
            recorder.step(moved=at[active[~metric]], rows=worst[~metric], coef=coef[~metric])
        if sets is not None and metric.any():  # then across the rows near its points, evaluated or not
            keeps = metric & movable & ~sets.dropped[active]
            r = active[keeps]
            sets.add(system, items[at[r]], r, near[keeps])
            X[r] = sets.settle(system, r, X[r], SETTLE_STEPS)
        age[active] += 1
        stuck = np.zeros(int((~movable).sum()), dtype=bool)
        leave(active[~movable], stuck, ~stuck)
    path = None if recorder is None else recorder.path(items, proven & ~restarted)
    return _Pool(proven, steps, margin, seen, np.concatenate(kept), np.concatenate(points), path)
