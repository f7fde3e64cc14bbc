"""A sample of the ``multilabel_verify_bioasq`` row, old and new in one window: ``python -m
benchmarks.multilabel_verify_sample [M] [PAIRED] [BSL]``.

The row's DFT head and its first M label sets (default 300): the proposals' cost and the share of sets they close;
then PAIRED of the closed sets (default 10) checked one at a time with proposals and without (the old path cut at
120 s a set), verdicts compared and re-checked by the independent verifier; then the row's BSL head on its first BSL
sets (default 200), re-checked by the verifier.
"""

from __future__ import annotations

import signal
import sys
import time

import numpy as np

from benchmarks.__main__ import bioasq_heads, bioasq_sets, trained_like_bsl

OLD_LIMIT_S = 120


class _Late(Exception):
    pass


def _late(*_):
    raise _Late


def main(m: int = 300, paired: int = 10, bsl: int = 200) -> None:
    import argmaxable as am
    from argmaxable.core.box import make_box
    from argmaxable.core.questions.assignments import Proposed, as_signs
    from argmaxable.core.settings import Settings
    from argmaxable.core.systems import AssignmentSystem
    from argmaxable.multilabel.witnesses import dft_proposals

    n, d, k = 20000, 50, 24
    Y = bioasq_sets(n, m)
    W = bioasq_heads(n, d, k, Y)["dft"][0]
    t0 = time.perf_counter()
    P = dft_proposals(W, k, Y, 1e4, workers=2)
    t_prop = time.perf_counter() - t0
    settings = Settings(1e4, None, None, 1e-8, 100, "highs", 2, False, False, device=None, regions=False)
    t0 = time.perf_counter()
    found = Proposed.check(AssignmentSystem(W, None, as_signs(Y, n)), P, make_box(d, 1e4, None, None), settings)
    t_check = time.perf_counter() - t0
    closed = np.flatnonzero(found.closed)
    print(f"{m} sets: proposals {t_prop:.1f} s ({t_prop / m * 1e3:.0f} ms/set), {int((~np.isnan(P[:, 0])).sum())} "
          f"proposed; float64 check and local LPs {t_check:.1f} s; closed {len(closed)} ({len(closed) / m:.0%})",
          flush=True)
    signal.signal(signal.SIGALRM, _late)
    sample = closed[:: max(1, len(closed) // paired)][:paired]
    same = late = 0
    t_new = t_old = 0.0
    for j in sample:
        t0 = time.perf_counter()
        new = am.check_assignments(W, [Y[j]], workers=1, proposals=P[j : j + 1])
        t_new += time.perf_counter() - t0
        assert am.verify_certificate(new, W, items=[Y[j]]).all()
        signal.alarm(OLD_LIMIT_S)
        try:
            t0 = time.perf_counter()
            old = am.check_assignments(W, [Y[j]], workers=1)
            t_old += time.perf_counter() - t0
            signal.alarm(0)
            same += bool(old.status[0] == new.status[0] and old.answers["1"][0] == new.answers["1"][0])
        except _Late:
            t_old += OLD_LIMIT_S
            late += 1
    print(f"{len(sample)} closed sets one at a time: with proposals {t_new:.1f} s, without {t_old:.1f} s "
          f"({late} cut at {OLD_LIMIT_S} s); same verdicts and answers {same}/{len(sample) - late}", flush=True)
    Yb = bioasq_sets(n, bsl)
    Wb = trained_like_bsl(n, d, Yb)
    t0 = time.perf_counter()
    res = am.check_assignments(Wb, Yb, workers=2)
    t_bsl = time.perf_counter() - t0
    t0 = time.perf_counter()
    valid = am.verify_certificate(res, Wb, items=Yb)
    print(f"BSL {bsl} sets: {t_bsl:.1f} s, {res.counts()}, LP items {int((res.lp_rounds > 0).sum())}; verified "
          f"{int(valid.sum())}/{bsl} in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
