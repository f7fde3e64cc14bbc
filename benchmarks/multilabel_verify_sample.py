"""The DFT half of the ``multilabel_verify_bioasq`` row on its first M label sets (default 100):
``python -m benchmarks.multilabel_verify_sample [M] [WORKERS]``.

The row's DFT head (n = 20,000, k = 24, one slack column) and its first M sets: the construction's proposals, the
check with them (``workers`` LPs at once, default 2), then the independent verifier's re-check. Printed: each
part's wall time, the verdicts, how many sets the proposals closed with no LP over the rows, how many took the
LP and the exact stage, and the LP rounds. The exact stage settles, one set at a time, what the float LP leaves
undecided (about a fifth of these sets, minutes each at n = 20,000): most of the time of a sample goes there.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from benchmarks.__main__ import bioasq_heads, bioasq_sets


def main(m: int = 100, workers: int = 2) -> None:
    import argmaxable as am
    from argmaxable.multilabel.witnesses import dft_proposals

    n, d, k = 20000, 50, 24
    Y = bioasq_sets(n, m)
    W = bioasq_heads(n, d, k, Y)["dft"][0]
    t0 = time.perf_counter()
    P, R = dft_proposals(W, k, Y)
    t_prop = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = am.check_assignments(W, Y, workers=workers, proposals=P, proposal_rows=R)
    t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    valid = am.verify_certificate(res, W, items=Y)
    t_verify = time.perf_counter() - t0
    closed = np.array(["proposed witness" in msg for msg in res.message])
    lp = res.lp_rounds > 0
    print(f"{m} sets of the DFT head: proposals {t_prop:.1f} s ({int((~np.isnan(P[:, 0])).sum())} points), check "
          f"{t_check:.1f} s ({t_check / m * 1e3:.0f} ms/set, {workers} workers), verifier {t_verify:.1f} s "
          f"({int(valid.sum())}/{m} verified); {res.counts()}, 1-argmaxable {int(res.one_argmaxable().sum())}; "
          f"closed by a proposal {int(closed.sum())}, LP {int(lp.sum())} (rounds {int(res.lp_rounds.sum())}, at most "
          f"{int(res.lp_rounds.max())}), exact stage {len(res.exact)}", flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
