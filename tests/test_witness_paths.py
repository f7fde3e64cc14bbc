"""Compact evidence: witnesses stored as the reflections that reached them, made again from the layer bit for bit,
checked by the verifier like any point; a tampered step gives a point the verifier refuses, inconsistent paths one
line."""

from __future__ import annotations

import numpy as np
import pytest

import argmaxable as am
from argmaxable.core import CheckResult
from argmaxable.witness_paths import replay


@pytest.fixture(scope="module")
def checked():
    # Gaussian rows of spread norms: a third of the categories lose at their own row and win one reflection later
    # (most of an LLM head's do), the others at their row, after a restart, or never.
    rng = np.random.default_rng(11)
    W = (rng.standard_normal((3000, 24)) * rng.lognormal(0, 0.3, (3000, 1))).astype(np.float32)
    return W, am.check_categories(W, workers=1)


def _members(path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def test_reflected_witnesses_are_stored_as_their_steps_and_made_again_bit_for_bit(checked, tmp_path):
    W, res = checked
    walked = res.paths.positions
    assert len(walked) > 300 and (res.steps[walked] >= 2).all()  # reflected, not start points
    np.testing.assert_array_equal(replay(W, res.items[walked], res.paths), res.witness[walked])
    res.write_npz(tmp_path / "paths.npz", W=W)
    res.paths, paths = None, res.paths
    res.write_npz(tmp_path / "points.npz", W=W)
    res.paths = paths
    z = _members(tmp_path / "paths.npz")
    assert len(z["path_positions"]) == len(walked) and len(z["witness"]) < len(W) - len(walked)
    saved = (tmp_path / "points.npz").stat().st_size - (tmp_path / "paths.npz").stat().st_size
    assert saved > 0.8 * len(walked) * W[0].nbytes  # a few numbers a path where its point is 24 float32
    back = CheckResult.load(tmp_path / "paths.npz", W=W)
    for name in ("items", "status", "radius", "witness", "message"):
        np.testing.assert_array_equal(getattr(back, name), getattr(res, name))
    assert am.verify_certificate(back, W).all()


def test_a_witness_a_later_stage_replaced_keeps_its_point(checked, tmp_path):
    W, res = checked
    p = int(res.paths.positions[0])
    moved = CheckResult(**{f: getattr(res, f) for f in res.__dataclass_fields__})
    moved.witness = res.witness.copy()
    moved.witness[p] *= np.float32(0.5)  # as if the LP had put its own point there
    moved.write_npz(tmp_path / "r.npz", W=W)
    z = _members(tmp_path / "r.npz")
    assert p not in set(z["path_positions"].tolist())
    np.testing.assert_array_equal(CheckResult.load(tmp_path / "r.npz", W=W).witness[p], moved.witness[p])


def test_a_tampered_step_makes_a_point_the_verifier_refuses(checked, tmp_path):
    W, res = checked
    res.write_npz(tmp_path / "r.npz", W=W)
    z = _members(tmp_path / "r.npz")
    first = int(z["path_positions"][0])
    z["path_values"][z["path_offsets"][0]] *= 1e6  # its reflection's coefficient: far out of the box
    np.savez(tmp_path / "t.npz", **z)
    ok = am.verify_certificate(CheckResult.load(tmp_path / "t.npz", W=W), W)
    assert not ok[first] and ok.sum() == len(W) - 1
    with pytest.raises(ValueError, match=r"r.npz: not a readable evidence file \(member 'witness' has shape"):
        CheckResult.load(tmp_path / "r.npz", W=W[:, :20])  # a layer of another width


@pytest.mark.parametrize(("member", "value", "why"), [
    ("path_rows", lambda a: a + 10**9, "reflect across rows outside the layer's 3000"),
    ("path_positions", lambda a: np.concatenate([a[:1], a[:-1]]), "or one twice"),
    ("path_offsets", lambda a: a[::-1].copy(), "offsets, rows and values do not match"),
    ("path_dtypes", lambda a: np.array(["float16", "float32", "float64"]), "name dtypes"),
])
def test_inconsistent_paths_are_one_line(checked, tmp_path, member, value, why):
    W, res = checked
    res.write_npz(tmp_path / "r.npz", W=W)
    z = _members(tmp_path / "r.npz")
    z[member] = value(z[member])
    np.savez(tmp_path / "bad.npz", **z)
    with pytest.raises(ValueError, match=f"bad.npz: not a readable evidence file .*{why}"):
        CheckResult.load(tmp_path / "bad.npz", W=W)


def test_witnesses_from_lifted_start_points_are_stored_as_their_steps_and_own_rows(tmp_path):
    """A biased layer's start points are its rows times 8 (the box of 100 over entries up to 7.6): a witness proven
    there is stored as its exponent, one reflected from there as its steps (the lift a division by 1/8 first), and
    both are made again from the layer bit for bit."""
    rng = np.random.default_rng(11)
    W = (rng.standard_normal((3000, 64)) * rng.lognormal(0, 0.3, (3000, 1))).astype(np.float32)
    b = rng.standard_normal(3000).astype(np.float32)
    res = am.check_categories(W, b=b, bound=100.0, workers=1)
    walked = res.paths.positions
    assert len(walked) > 300 and (res.steps[walked] >= 2).all()
    np.testing.assert_array_equal(replay(W, res.items[walked], res.paths), res.witness[walked])
    res.write_npz(tmp_path / "r.npz", W=W)
    z = _members(tmp_path / "r.npz")
    assert ((z["witness_own"] == 3) == (res.steps == 1)).all() and len(z["witness"]) < 10
    back = CheckResult.load(tmp_path / "r.npz", W=W)
    np.testing.assert_array_equal(back.witness, res.witness)
    assert am.verify_certificate(back, W, b).all()
