"""A system's stages follow from the capabilities it declares (protocols), not from flags."""

from __future__ import annotations

import numpy as np

from argmaxable.core.box import make_box
from argmaxable.core.exact import Exact
from argmaxable.core.settings import Settings
from argmaxable.core.stages import Dual, ExactLP, Reflect, stages_for
from argmaxable.core.systems import AssignmentSystem, CategorySystem, DualStage, GramStart, SharedCertificates

W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
BOX = make_box(2, 100.0)


def _kinds(stages):
    return [(type(s), getattr(s, "shared", None) is not None) for s in stages]


def test_categories_reflect_then_solve_lps_with_shared_supports():
    system = CategorySystem(W, None)
    assert isinstance(system, GramStart) and isinstance(system, SharedCertificates)
    assert not isinstance(system, DualStage)
    assert _kinds(stages_for(system, BOX, Settings())) == [(Reflect, False), (ExactLP, True), (Exact, False)]


def test_label_sets_start_with_the_dual_stage():
    system = AssignmentSystem(W, None, np.array([[1, -1, -1, 1]], dtype=np.int8))
    assert isinstance(system, DualStage) and not isinstance(system, (GramStart, SharedCertificates))
    assert _kinds(stages_for(system, BOX, Settings())) == [(Dual, False), (Reflect, False), (ExactLP, False),
                                                           (Exact, False)]


def test_exact_radius_leaves_out_the_one_sided_dual_stages():
    exact = Settings(exact_radius=True)
    assert _kinds(stages_for(CategorySystem(W, None), BOX, exact)) == [(Reflect, False), (ExactLP, False),
                                                                       (Exact, False)]
    signs = np.array([[1, -1, -1, 1]], dtype=np.int8)
    assert _kinds(stages_for(AssignmentSystem(W, None, signs), BOX, exact)) == [(Reflect, False), (ExactLP, False),
                                                                                 (Exact, False)]


def test_a_cone_s_witness_at_most_1_is_measured_again_at_the_box_edge():
    """Label set {0, 3} of the doctest's head is the cone x1 > -x2 > 0: reflection's witness lies near the rows'
    scale (margin below 1), the same direction at the box's edge (|x_j| <= 1e4) has a margin above 1, so the set
    answers radius > 1 with "yes" by that witness and no LP runs; the verifier re-checks it. Scaling a point of a
    cone by s > 0 multiplies every distance by s, so the verdict is the LP's."""
    import argmaxable as am

    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    res = am.check_assignments(W, [[0, 3]], workers=1)
    assert res.status.tolist() == ["argmaxable"] and res.answers["1"].tolist() == ["yes"]
    assert res.lp_rounds[0] == 0 and np.abs(res.witness[0]).max() > 0.99e4
    assert res.radius[0] > 1
    assert am.verify_certificate(res, W, items=[[0, 3]]).all()
    lp = am.check_assignments(W, [[0, 3]], workers=1, exact_radius=True)  # the LP's optimum: above 1 as well
    assert lp.radius[0] >= res.radius[0] * (1 - 1e-9)
