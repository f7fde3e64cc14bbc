"""The ledger where the stages' proofs meet: two proofs of opposite kinds make an item undecided."""

from __future__ import annotations

import numpy as np

from argmaxable.core.ledger import Ledger


def _ledger(k=3, threshold=None):
    ledger = Ledger(np.arange(k), kind="categories", eps=1e-8, threshold=threshold, settings={"eps": 1e-8})
    ledger.witness = np.full((k, 2), np.nan)
    return ledger


def test_a_certificate_against_a_standing_witness_makes_the_item_undecided():
    ledger = _ledger()
    ledger.witness[0] = [1.0, 2.0]
    ledger.prove(np.array([0]), "reflect", lower=1e-8)
    stands = ledger.refute(0, "lp", (np.array([1]), np.array([1.0])), -0.5, source="an LP dual bound")
    res = ledger.result()
    assert not stands and res.status[0] == "undecided"
    assert res.message[0] == ("stages disagree: a witness with margin > 1e-08 and an LP dual bound -0.5 <= eps "
                              "(numerical trouble)")
    assert res.certificates[0][0].size == 0 and res.answers["eps"][0] == "undecided"


def test_a_witness_against_a_standing_certificate_makes_the_item_undecided():
    ledger = _ledger()
    assert ledger.refute(1, "dual", (np.array([0, 2]), np.array([0.5, 0.5])), 0.0, "Gordan certificate")
    ledger.witness[1] = [0.0, 0.0]
    ledger.prove(np.array([1, 2]), "reflect", lower=1e-8)
    res = ledger.result()
    assert res.status.tolist() == ["undecided", "undecided", "argmaxable"]  # item 0: no stage proved it
    assert res.message[1].startswith("stages disagree: a certificate bounding the radius by 0 <= eps")
    assert ledger.stage.tolist() == ["", "dual", "reflect"]


def test_proofs_that_agree_stand_and_bounds_only_tighten():
    ledger = _ledger(threshold=1.0)
    ledger.witness[0] = [3.0, 0.0]
    ledger.prove(np.array([0]), "reflect", lower=1e-8)
    ledger.bound(0, 2.0, 5.0)
    ledger.bound(0, 1.5, 4.0)  # a looser lower bound and a tighter upper one
    ledger.bound(1, -np.inf, -np.inf)  # a zero row: no point at all
    ledger.refute(1, "lp", (np.array([2]), np.array([1.0])), -np.inf)
    res = ledger.result()
    assert res.status[:2].tolist() == ["argmaxable", "unargmaxable"]
    assert res.radius[0] == 2.0 and res.radius_upper[0] == 4.0 and res.radius[1] == -np.inf
    assert res.answers["1"][:2].tolist() == ["yes", "no"]


def test_withdrawn_evidence_leaves_the_item_undecided_without_a_witness():
    ledger = _ledger()
    ledger.witness[:] = 1.0
    ledger.prove(np.arange(3), "reflect", lower=1e-8)
    ledger.withdraw(np.array([False, True, False]), "the evidence does not hold")
    res = ledger.result()
    assert res.status.tolist() == ["argmaxable", "undecided", "argmaxable"]
    assert np.isnan(res.witness[1]).all() and res.message[1] == "the evidence does not hold"


def _ledger_writes(tree) -> list[str]:
    """Assignments to a ledger's fields (``ledger.x = ...``, ``ledger.x[i] = ...``, ``ledger.x[i] += ...``) and
    calls mutating one (``ledger.settings.update(...)``) in a module's syntax tree."""
    import ast

    def field_of(node):  # the ledger field a target writes, or None
        while isinstance(node, ast.Subscript | ast.Tuple):
            node = node.value if isinstance(node, ast.Subscript) else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ledger":
            return node.attr
        return None

    found = []
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                   if isinstance(node, ast.AugAssign) else [])
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if (name := field_of(t)) is not None:
                    found.append(f"{name} (line {node.lineno})")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "update", "pop", "append", "clear", "setdefault") and (name := field_of(node.func.value)):
            found.append(f"{name}.{node.func.attr} (line {node.lineno})")
    return found


def test_the_core_writes_a_ledger_only_through_its_methods():
    """Every write to a ledger goes through :class:`Ledger`'s methods (prove, refute, bound, lp_run, note, ...):
    no other module of the core assigns to its fields, so what a stage may record is the ledger's API."""
    import ast
    from pathlib import Path

    import argmaxable.core as core

    planted = ast.parse("ledger.message[pos] = 'x'\nledger.radius_exact[p], ledger.steps[p] = 1, 2\n"
                        "ledger.settings.update({})\nledger.witness = None\n")
    assert len(_ledger_writes(planted)) == 5  # the scan sees each form of write
    writes = {path.name: _ledger_writes(ast.parse(path.read_text(encoding="utf-8")))
              for path in Path(core.__file__).parent.glob("*.py") if path.name != "ledger.py"}
    assert {name: w for name, w in writes.items() if w} == {}
