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
