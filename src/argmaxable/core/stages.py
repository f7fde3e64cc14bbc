"""The stages of a check (002 Fig. 4's combined algorithm), each an object with one method.

``stage.run(system, ledger, open)`` works on the items at positions ``open`` of the ledger, writes what it proves
into the ledger (:mod:`argmaxable.core.ledger`), and returns the positions whose questions are still open for the
next stage. :func:`stages_for` lists a system's stages from the capabilities it declares
(:mod:`argmaxable.core.systems`):

1. :class:`Dual` (systems with a :class:`~argmaxable.core.systems.DualStage`): batched Gordan certificates prove
   items unargmaxable;
2. :class:`Reflect`: batched braid reflection proves items argmaxable, with a witness;
3. :class:`ExactLP`: the Chebyshev LP decides the rest, several at once on a thread pool; for systems whose
   certificates carry over (:class:`~argmaxable.core.systems.SharedCertificates`) in waves, between which
   :class:`SharedSupports` tries the new certificates on the items still waiting;
4. :class:`~argmaxable.core.exact.Exact`: what the float LP leaves undecided, settled in rational arithmetic.

Results do not depend on the number of workers: each item is solved on its own, deterministically.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits

from argmaxable.core.box import inside, to_edge
from argmaxable.core.chebyshev import FEASIBLE, INFEASIBLE, WarmStart, chebyshev
from argmaxable.core.exact import Exact
from argmaxable.core.ledger import Ledger
from argmaxable.core.reflect import reflect
from argmaxable.core.result import ARGMAXABLE, UNARGMAXABLE, UNDECIDED
from argmaxable.core.settings import Settings
from argmaxable.core.systems import DualStage, GramStart, SharedCertificates, System, Ties

# Items per wave of LPs between two tries of the shared certificates (:mod:`supports`): small, so that each
# certificate spares as many LPs as it can, and several, so that the workers run in parallel.
WAVE = 8


def progress_bar(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="item", disable=not enabled, leave=False)


class Dual:
    """Batched Gordan certificates (:mod:`gordan`) prove items unargmaxable before reflection."""

    name = "dual"

    def __init__(self, box, settings: Settings):
        self.box, self.settings = box, settings

    def run(self, system: DualStage, ledger: Ledger, open_: np.ndarray) -> np.ndarray:
        with progress_bar(len(open_), f"{ledger.kind}: dual", self.settings.progress) as bar:
            dual = system.gordan(ledger.items[open_], box=self.box, eps=self.settings.eps, progress=bar.update)
        message = f"Gordan certificate over {len(dual.rows)} rows (dual stage)"
        for j, weights in dual.weights.items():
            ledger.refute(int(open_[j]), self.name, (dual.rows, weights), dual.upper[j], message)
        return open_[~dual.proven]


class Reflect:
    """Batched braid reflection (:mod:`reflect`) proves items argmaxable; it leaves the items it did not prove,
    and those whose radius the exact LP must still compare with the second threshold (label sets' 1) or, with
    ``exact_radius``, compute."""

    name = "reflect"

    def __init__(self, box, settings: Settings):
        self.box, self.settings = box, settings

    def run(self, system: System, ledger: Ledger, open_: np.ndarray) -> np.ndarray:
        approx, whole = self._reflect(system, ledger, open_)
        proven, todo = open_[approx.proven], open_[~approx.proven]
        m = approx.margin[approx.proven]  # each witness's certified margin (> eps): a lower bound on the radius
        if ledger.threshold is not None and system.homogeneous:
            m = self._at_edge(system, ledger, proven, m, ledger.threshold)
        ledger.prove(proven, self.name, lower=m)
        ledger.measured(proven, m)
        if ledger.threshold is not None and not self.settings.exact_radius:  # to compare with the threshold
            todo = np.sort(np.concatenate([todo, proven[m <= ledger.threshold]]))
        if self.settings.exact_radius:
            todo = open_
        # The LP starts from reflection's best iterate, with the rows reflection saw beat it in its last steps
        # (unless the caller gave it a start).
        seeds = {int(open_[j]): system.dense_rows(int(ledger.items[open_[j]]), r) for j, r in approx.rows.items()}
        ledger.start_from({int(pos): WarmStart(ledger.witness[pos].copy(), seeds.get(int(pos))) for pos in todo
                           if int(pos) not in ledger.starts})
        ledger.unwitnessed(open_[~approx.proven])
        ledger.record(numeric_settings(system, whole))
        return todo

    def _at_edge(self, system: System, ledger: Ledger, proven: np.ndarray, m: np.ndarray, threshold: float):
        """The margins of ``proven`` items whose witness's margin is at most ``threshold``, measured again with the
        witness scaled to the box's edge (a cone's system: every distance grows with the scale), where that is
        larger; their witnesses replaced. Label sets at BioASQ's size (n = 20,000, d = 50, box 1e4): 63 of the 72
        witnesses of a trained-like head's first 200 sets pass radius > 1 there, each an LP spared."""
        low = np.flatnonzero(m <= threshold)
        if not low.size:
            return m
        pos = proven[low]
        # measured as stored: in the witnesses' dtype (a float32 rounding could leave the box: inside says)
        X = to_edge(np.asarray(ledger.witness[pos], dtype=np.float64), self.box).astype(ledger.witness.dtype)
        fits = inside(X, *self.box)
        _, at_edge = system.evaluate(ledger.items[pos[fits]], X[fits], self.settings.eps)
        better = at_edge > m[low[fits]]
        take = low[fits][better]
        ledger.moved(proven[take], X[fits][better])
        out = m.copy()
        out[take] = at_edge[better]
        return out

    def _reflect(self, system: System, ledger: Ledger, open_: np.ndarray):
        """Run reflection over the open items into the ledger's witnesses. With every item open (a whole
        vocabulary) it writes its iterates straight into the witness array: no n×d temporaries of 300 MB each."""
        whole = len(open_) == len(ledger.items)
        # A float32 layer checked in float32 keeps float32 witnesses: its start points w_t and reflected iterates
        # are float32 values, certified as stored (a layer of 2 GB needs no 4 GB float64 witness array).
        wdtype = np.float32 if system.dtype == np.float32 and system.start(ledger.items[:0]).dtype == np.float32 \
            else np.float64
        witness = ledger.new_witnesses(system.d, wdtype, filled=whole)
        with progress_bar(len(open_), f"{ledger.kind}: reflect", self.settings.progress) as bar:
            approx = reflect(system, ledger.items[open_], patience=self.settings.patience, box=self.box,
                             eps=self.settings.eps, progress=bar.update, out=witness if whole else None)
            if isinstance(system, GramStart) and system.bf16_steps:
                self._again_in_float32(system, ledger.items[open_], approx, bar)
                sharpened = system.sharpen(ledger.items[open_], approx.x, approx.margin, self.settings.eps)
                bar.set_postfix_str(f"{sharpened} radius bounds measured again in float32")
        ledger.reflected(open_, approx.steps, None if whole else approx.x, approx.paths)
        return approx, whole

    def _again_in_float32(self, system: GramStart, items: np.ndarray, approx, bar) -> None:
        """The items bfloat16 steps left unproven (not tied) reflect again from their start points in float32
        steps, into ``approx``. bfloat16's argmax (8-bit significands) often reflects across a row other than the
        most violated one, and the small region of an under-trained row is then not reached before the stall
        window ends: on a CPU with native bfloat16, 149 Thai and Arabic tokens of Qwen2.5-Coder-0.5B's head (norms
        in its lowest 2%) went to the LP, each minutes at d = 896, where float32 steps prove them."""
        tied = system.tied(items) if isinstance(system, Ties) else np.zeros(len(items), dtype=bool)
        left = np.flatnonzero(~approx.proven & ~tied)
        if not left.size:
            return
        bar.set_postfix_str(f"{left.size} again in float32 steps")
        with system.float32_steps():
            again = reflect(system, items[left], patience=self.settings.patience, box=self.box,
                            eps=self.settings.eps, out=np.empty((left.size, system.d), approx.x.dtype))
        approx.x[left] = again.x
        approx.proven[left], approx.steps[left], approx.margin[left] = again.proven, again.steps, again.margin
        for k in left:
            approx.rows.pop(int(k), None)
        approx.rows.update({int(left[k]): rows for k, rows in again.rows.items()})


class SharedSupports:
    """The supports of the exact LP's certificates (:mod:`supports`), tried on the items still waiting for
    theirs: a category inside the hull of another's support needs no LP."""

    name = "supports"

    def __init__(self, system: SharedCertificates, box, eps: float):
        self.pool = system.certificate_pool(box, eps)
        self.tried = 0  # supports already tried on every item still waiting

    def learn(self, rows: np.ndarray) -> None:
        """Keep the rows of a new certificate's positive weights."""
        self.pool.add(rows)

    def run(self, system: System, ledger: Ledger, open_: np.ndarray) -> np.ndarray:
        found = self.pool.prove(ledger.items[open_], start=self.tried)
        self.tried = len(self.pool.supports)
        for j, (rows, weights, upper) in found.items():
            ledger.refute(int(open_[j]), self.name, (rows, weights), upper,
                          f"certificate over the {len(rows)} rows of another category's (dual stage)")
        return open_[ledger.status[open_] != UNARGMAXABLE]


class ExactLP:
    """The Chebyshev LP (:func:`chebyshev`) for every item still open, ``workers`` at once; with shared supports,
    in waves of :data:`WAVE` items, the supports tried between waves. ``map_rows(item, rows)`` names a
    certificate's rows as the result does (default: as the system's dense rows). Leaves the items it could not
    decide."""

    name = "lp"

    def __init__(self, box, settings: Settings, map_rows=None, shared: SharedSupports | None = None):
        self.box, self.settings, self.map_rows, self.shared = box, settings, map_rows, shared

    def run(self, system: System, ledger: Ledger, todo: np.ndarray) -> np.ndarray:
        lp = self.settings.lp(ledger.thresholds)

        def solve(pos: int):
            return chebyshev(*system.dense(int(ledger.items[pos])), self.box, lp, ledger.starts[int(pos)])

        # Tied items (a duplicate row) stop at that row: all of them in the first wave, not WAVE at a time with the
        # shared supports tried on every item still waiting between two (Qwen2.5-Coder-0.5B: 2054 tied tokens,
        # 257 waves, 77 s of supports that could prove none of them).
        tied = system.tied(ledger.items[todo]) if isinstance(system, Ties) else np.zeros(len(todo), dtype=bool)
        first = np.concatenate([todo[tied], todo[~tied][:WAVE]]) if self.shared is not None else todo
        waves, pending = [first], todo[~np.isin(todo, first)]
        # One BLAS thread per LP: the LPs run in parallel, and nested BLAS threads oversubscribe the cores
        # (measured: a 50257x16 mat-vec went from 0.3 ms to 16 ms on a busy 2-core machine).
        with (
            progress_bar(len(todo), f"{ledger.kind}: exact LP", self.settings.progress) as bar,
            threadpool_limits(limits=1, user_api="blas"),
            ThreadPoolExecutor(self.settings.workers) as pool,
        ):
            while waves:
                wave = waves.pop()
                for pos, out in zip(wave, pool.map(solve, wave), strict=True):
                    bar.update(1)
                    self.record(ledger, int(pos), out)
                if self.shared is None or pending.size == 0:
                    continue
                left = self.shared.run(system, ledger, pending)
                bar.update(len(pending) - len(left))
                waves.append(left[:WAVE])
                pending = left[WAVE:]
        return todo[ledger.status[todo] == UNDECIDED]

    def record(self, ledger: Ledger, pos: int, out) -> None:
        """The LP's outcome for item ``pos``: its bounds, and its verdict where reflection's witness does not
        already stand (a witness and a dual bound <= eps rule each other out: the ledger makes that undecided)."""
        rows = out.dual_rows if self.map_rows is None else self.map_rows(int(ledger.items[pos]), out.dual_rows)
        certificate = (np.asarray(rows, dtype=np.int64), out.dual_weights)
        witnessed = ledger.status[pos] == ARGMAXABLE
        ledger.bound(pos, out.lower, out.upper)
        ledger.lp_run(pos, out.converged, out.rounds, out.message)
        if witnessed and out.upper <= ledger.eps:
            ledger.refute(pos, self.name, certificate, out.upper, source="an LP dual bound")
        elif out.status == FEASIBLE:
            ledger.prove(pos, self.name, x=out.x)
        elif witnessed:  # reflection's witness proved it; the LP only failed to size its radius
            ledger.note(pos, f"argmaxable by its witness; the LP did not size the radius: {out.message}")
        elif out.status == INFEASIBLE:
            ledger.refute(pos, self.name, certificate, out.upper)
            if self.shared is not None:
                self.shared.learn(certificate[0][out.dual_weights > 0])
        if ledger.status[pos] == ARGMAXABLE and np.isfinite(out.upper) and out.upper == ledger.upper[pos]:
            ledger.upper_by(pos, certificate)
        if ledger.status[pos] == UNDECIDED and out.x is not None:  # where the exact stage starts
            ledger.start_from({pos: WarmStart(out.x, out.dual_rows)})


def stages_for(system: System, box, settings: Settings, map_rows=None) -> list:
    """The stages that check ``system``'s items, in order. With ``exact_radius`` the one-sided dual stages are
    left out: their certificates bound the radius, they do not compute it. The exact stage sees only what the
    float stages leave undecided."""
    exact = settings.exact_radius
    dual = [Dual(box, settings)] if isinstance(system, DualStage) and not exact else []
    shared = SharedSupports(system, box, settings.eps) if isinstance(system, SharedCertificates) and not exact \
        else None
    return [*dual, Reflect(box, settings), ExactLP(box, settings, map_rows, shared), Exact(box, settings, map_rows)]


def numeric_settings(system: System, whole: bool) -> dict:
    """What the result's float arithmetic was: the approximate stage's number format, the BLAS that ran, and the
    tolerances (recorded in the result's settings and so in every sidecar)."""
    from threadpoolctl import threadpool_info

    from argmaxable.core.chebyshev import VIOLATION_TOLERANCE
    from argmaxable.core.gordan import FLOOR
    from argmaxable.core.solvers import FEASIBILITY_TOLERANCE

    if system.dtype == np.float32:
        bf16 = whole and isinstance(system, GramStart) and system.bf16_start  # the first step of a whole vocabulary
        path = "bfloat16 products (float32 accumulation), float32, float64" if bf16 else "float32, float64"
    else:
        path = "float64"
    blas = next((f"{i['internal_api']} {i['version']} ({i.get('architecture')} kernel)"
                 for i in threadpool_info() if i["user_api"] == "blas"), "unknown")
    return {"numeric_path": path, "blas": blas,
            "tolerances": {"lp_feasibility": FEASIBILITY_TOLERANCE, "lp_violation": VIOLATION_TOLERANCE,
                           "gordan_floor": FLOOR, "float64_rounding": "gamma_k bounds on every acceptance"}}
