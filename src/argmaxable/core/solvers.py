"""LP backends for the Chebyshev programme over a growing working set of rows.

Both backends solve, for unit-norm rows ``a_i`` and offsets ``c_i`` added so far,

    maximise t   subject to   a_i . x + c_i + t <= 0,   lo_j <= x_j <= hi_j,   t free,

and return the optimum ``(x, t)`` with the row duals ``y``. ``t`` is free (not ``t >= 0`` as in 002 eq. 6) so the
programme is always feasible and bounded, and its duals give a certificate either way (see
:mod:`argmaxable.core.chebyshev`). Rows are added between solves and the previous basis is reused.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass

import numpy as np

# HiGHS's default feasibility tolerance (1e-7) is looser than the eps = 1e-8 the papers use; 1e-10 keeps the
# solver's own error far below eps. Witnesses are re-checked in float64 anyway.
FEASIBILITY_TOLERANCE = 1e-10

SOLVERS = ("highs", "gurobi")


class SolverError(RuntimeError):
    """The LP backend failed in a way that is not a verdict (licence limit, crash, unknown status)."""


_FIRST_HIGHS = threading.Lock()
_banner_shown = False


def _new_highs(highspy):
    """``highspy.Highs()``; the process's first with the C-level stdout pointed at the null device: HiGHS prints its
    banner there once per process, before any option can silence it, and neither a command's output nor a Python
    caller's is the place for it."""
    global _banner_shown
    with _FIRST_HIGHS:
        if _banner_shown:
            return highspy.Highs()
        sys.stdout.flush()
        saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            h = highspy.Highs()
            try:
                import ctypes

                ctypes.CDLL(None).fflush(None)  # the banner out of C's buffer while stdout is still stderr
            except (OSError, AttributeError):
                pass
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)
        _banner_shown = True
        return h


@dataclass
class LPSolution:
    """One solve of the working-set LP."""

    ok: bool  # an optimum was found; otherwise ``message`` says why
    x: np.ndarray | None
    t: float
    duals: np.ndarray | None  # one non-negative weight per working-set row (may be unnormalised)
    message: str


class HighsLP:
    """Chebyshev LP in HiGHS (highspy), rows added incrementally, warm-started by the dual simplex."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, options: dict | None = None):
        import highspy

        self._hs = highspy
        h = _new_highs(highspy)
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)  # parallelism comes from solving many LPs at once
        h.setOptionValue("presolve", "off")  # small dense working sets: presolve only costs (measured 2x at d=128)
        h.setOptionValue("primal_feasibility_tolerance", FEASIBILITY_TOLERANCE)
        h.setOptionValue("dual_feasibility_tolerance", FEASIBILITY_TOLERANCE)
        for name, value in (options or {}).items():  # e.g. the exact stage's other simplex strategies
            h.setOptionValue(name, value)
        d, inf = len(lo), highspy.kHighsInf
        costs = np.zeros(d + 1)
        costs[d] = 1.0
        lower = np.concatenate([lo, [-inf]])
        upper = np.concatenate([hi, [inf]])
        h.addCols(d + 1, costs, lower, upper, 0, np.array([], dtype=np.int32), np.array([], dtype=np.int32),
                  np.array([], dtype=np.float64))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self._h = h
        self._d = d
        self._rows = 0
        self._refused = ""  # why HiGHS refused rows (then no solve counts)

    def add_rows(self, A: np.ndarray, c: np.ndarray) -> None:
        k, d = A.shape
        values = np.hstack([A, np.ones((k, 1))]).ravel()
        index = np.tile(np.arange(d + 1, dtype=np.int32), k)
        starts = np.arange(k, dtype=np.int32) * (d + 1)
        status = self._h.addRows(k, np.full(k, -self._hs.kHighsInf), -c, values.size, starts, index, values)
        if status == self._hs.HighsStatus.kError:  # e.g. an infinite coefficient: the rows are not in the model
            self._refused = f"HiGHS refused {k} rows (addRows status {status})"
        self._rows += k

    def solve(self) -> LPSolution:
        if self._refused:
            return LPSolution(False, None, np.nan, None, self._refused)
        status = self._h.run()
        if status == self._hs.HighsStatus.kError:
            # A warm-started simplex can break down on nearly degenerate regions (tiny DFT cells); one cold restart
            # usually recovers. What still fails is numerical trouble, reported as such and never as a verdict.
            self._h.clearSolver()
            status = self._h.run()
        model_status = self._h.getModelStatus()
        text = self._h.modelStatusToString(model_status)
        if status == self._hs.HighsStatus.kError or model_status != self._hs.HighsModelStatus.kOptimal:
            return LPSolution(False, None, np.nan, None, f"HiGHS model status {int(model_status)}: {text}")
        sol = self._h.getSolution()
        col = np.asarray(sol.col_value, dtype=np.float64)
        return LPSolution(True, col[: self._d], float(col[self._d]), np.abs(np.asarray(sol.row_dual)), "optimal")

    def basis(self) -> tuple[list, list]:
        """The last solve's basis: HiGHS's status (``highspy.HighsBasisStatus``) of each column (x, then t) and of
        each row (where the exact stage starts, :mod:`argmaxable.core.exact`)."""
        basis = self._h.getBasis()
        return list(basis.col_status), list(basis.row_status)


class GurobiLP:
    """Chebyshev LP in Gurobi (optional backend; its pip licence caps models at 2000 rows or columns)."""

    # GurobiError 10010: the size-limited pip licence refuses the model. An error, never an "infeasible".
    SIZE_LIMIT_ERROR = 10010

    def __init__(self, lo: np.ndarray, hi: np.ndarray):
        d = len(lo)
        try:
            import gurobipy as gp
        except ImportError:
            raise SolverError("solver='gurobi' needs gurobipy: pip install 'argmaxable[gurobi]'") from None
        self._gp = gp
        try:
            env = gp.Env(empty=True)
            env.setParam("OutputFlag", 0)
            env.start()
            m = gp.Model(env=env)
            m.Params.Threads = 1
            m.Params.FeasibilityTol = 1e-9  # Gurobi's minimum allowed value
            m.Params.OptimalityTol = 1e-9
            self._x = m.addMVar(d, lb=lo, ub=hi)
            self._t = m.addVar(lb=-gp.GRB.INFINITY, ub=gp.GRB.INFINITY)
            m.setObjective(self._t, gp.GRB.MAXIMIZE)
        except gp.GurobiError as err:
            raise SolverError(f"Gurobi failed (GurobiError {err.errno}: {err})") from None
        self._m = m
        self._constrs: list = []

    def add_rows(self, A: np.ndarray, c: np.ndarray) -> None:
        constr = self._m.addConstr(A @ self._x + self._t <= -c)
        self._constrs.append(constr)

    def solve(self) -> LPSolution:
        gp = self._gp
        try:
            self._m.optimize()
        except gp.GurobiError as err:
            hint = " (the pip licence is limited to 2000 rows/columns)" if err.errno == self.SIZE_LIMIT_ERROR else ""
            raise SolverError(f"Gurobi refused the model (GurobiError {err.errno}: {err}){hint}") from None
        status = self._m.Status
        if status != gp.GRB.OPTIMAL:
            return LPSolution(False, None, np.nan, None, f"Gurobi status {status}")
        duals = np.concatenate([np.atleast_1d(c.Pi) for c in self._constrs])
        return LPSolution(True, np.asarray(self._x.X, dtype=np.float64), float(self._t.X), np.abs(duals),
                          "optimal")


def make_lp(solver: str, lo: np.ndarray, hi: np.ndarray):
    """Instantiate the named backend over the box ``lo <= x <= hi`` (arrays of shape (d,))."""
    if solver == "highs":
        return HighsLP(lo, hi)
    if solver == "gurobi":
        return GurobiLP(lo, hi)
    raise ValueError(f"solver must be one of {SOLVERS}. Got {solver!r} instead.")
