"""The token audit (argmaxable.audit): radius bounds against an exact LP that is not ours (scipy's HiGHS interface on
the Chebyshev LP written here), Land & Bartolo's indicator against a direct numpy computation (SVD), tie groups and
near-ties against brute force on constructed heads, the evidence the audit writes re-checked by ``verify`` (and
forged bounds refused), the card, the CLI as a user meets it, and the pipeline's cards and their index."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import linprog

import argmaxable as am
from argmaxable.audit import audit_layer, scale_witnesses
from argmaxable.audit.card import html_page, markdown
from argmaxable.audit.reach import witness_radii
from argmaxable.audit.signals import flagged, near_ties, reference_tokens, unembedding_indicator
from argmaxable.cli import main
from argmaxable.core import CheckResult
from argmaxable.core.box import make_box
from argmaxable.detect.loaders import Layer


def chebyshev_radius(W, b, t, bound):
    """The Chebyshev radius of category t's region in |x_j| <= bound (centre in the box), by scipy's linprog."""
    n, d = W.shape
    A = np.delete(W, t, axis=0) - W[t]
    c = (np.delete(b, t) - b[t]) if b is not None else np.zeros(n - 1)
    norms = np.linalg.norm(A, axis=1)
    # maximise r: A x + r ||a_i|| <= -c
    res = linprog(np.r_[np.zeros(d), -1.0], A_ub=np.column_stack([A, norms]), b_ub=-c,
                  bounds=[(-bound, bound)] * d + [(None, None)], method="highs")
    assert res.status == 0
    return -res.fun


def small_layer(n=40, d=3, bias=True, seed=0, tokens=None, types=None):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(n, d))
    b = rng.normal(size=n) if bias else None
    return Layer(W, b, f"test n={n} d={d}", tokens=tokens, token_types=types, precision="float64")


@pytest.mark.parametrize("bias", [True, False])
def test_radius_bounds_bracket_the_exact_lp_radius(bias):
    """Every certified lower bound (the check's, the tight one at the witness, the LP's) is at most the radius scipy
    computes, and the LP's upper bound at least it; the LP's own radius matches it."""
    layer = small_layer(bias=bias)
    W, b = layer.W, layer.b
    audit = audit_layer(layer, hardest=40, refine=40, workers=1)
    res, lp = audit.result, audit.hardest
    arg = np.flatnonzero(res.status == "argmaxable")
    assert 10 < len(arg) < 40 and set(lp.items) == set(res.items[arg])
    exact = np.array([chebyshev_radius(W, b, int(t), 100.0) for t in res.items[arg]])
    assert (res.radius[arg] <= exact * (1 + 1e-9)).all()
    tight = witness_radii(W, b, res.items[arg], res.witness[arg])
    assert (tight <= exact * (1 + 1e-9)).all() and (tight >= res.radius[arg] * (1 - 1e-12)).all()
    at = {int(t): r for t, r in zip(res.items[arg], exact, strict=True)}
    want = np.array([at[int(t)] for t in lp.items])
    assert (lp.radius <= want * (1 + 1e-9)).all() and (lp.radius_upper >= want * (1 - 1e-9)).all()
    np.testing.assert_allclose(lp.radius, want, rtol=1e-6)
    assert am.verify_certificate(res, W, b).all() and am.verify_certificate(lp, W, b).all()


def test_lps_started_at_witnesses_reach_the_radius_scipy_computes():
    """``starts`` moves where each exact LP begins, not what it proves: at d = 160 (rounds capped at 128 rows) the LPs
    started at the witnesses of a first check give scipy's radius, as the LPs started by reflection do; a start of
    the wrong shape is refused in one line."""
    rng = np.random.default_rng(3)
    W, items = rng.normal(size=(400, 160)), np.arange(4)
    plain = am.check_categories(W, items, exact_radius=True, workers=1)
    started = am.check_categories(W, items, exact_radius=True, workers=1, starts=plain.witness)
    want = np.array([chebyshev_radius(W, None, int(t), 100.0) for t in items])
    assert (started.status == "argmaxable").all() and started.lp_rounds.min() >= 1
    np.testing.assert_allclose(started.radius, want, rtol=1e-7)
    np.testing.assert_allclose(plain.radius, want, rtol=1e-7)
    assert am.verify_certificate(started, W, None).all()
    with pytest.raises(ValueError, match="'starts' parameter must be 4 finite points of dimension 160"):
        am.check_categories(W, items, exact_radius=True, starts=plain.witness[:, :3])
    with pytest.raises(ValueError, match=r"'starts' parameter must be finite\. Got nan at index"):
        am.check_categories(W, items, exact_radius=True, starts=np.where(plain.witness > 1, np.nan, plain.witness))


def test_lps_stopped_at_a_round_limit_keep_bounds_around_the_radius(tmp_path):
    """``lp_rounds`` stops each exact LP early with the certified bounds it reached: at d = 160 one round cannot hold
    the optimum's active rows, so each of the 4 LPs stops with radius <= scipy's radius <= radius_upper, says so,
    and its evidence still verifies; its lower bound is the best point on the segment from its start (a witness)
    to its last iterate, within 20% of the radius here; the audit's card marks those LPs; a limit of 0 is refused
    in one line."""
    rng = np.random.default_rng(3)
    W, items = rng.normal(size=(400, 160)), np.arange(4)
    want = np.array([chebyshev_radius(W, None, int(t), 100.0) for t in items])
    capped = am.check_categories(W, items, exact_radius=True, workers=1, lp_rounds=1)
    assert (capped.status == "argmaxable").all() and (capped.lp_rounds == 1).all() and not capped.radius_exact.any()
    assert (capped.radius <= want * (1 - 1e-6)).all() and (capped.radius_upper >= want * (1 + 1e-6)).all()
    assert (capped.radius > 0.8 * want).all()  # the best point between the start and the last iterate
    assert all(m.startswith("stopped after 1 rounds (the limit)") for m in capped.message)
    assert am.verify_certificate(capped, W, None).all()
    full = am.check_categories(W, items, exact_radius=True, workers=1, lp_rounds=50)
    assert full.radius_exact.all() and (full.lp_rounds > 1).all()
    np.testing.assert_allclose(full.radius, want, rtol=1e-7)
    with pytest.raises(ValueError, match=r"'lp_rounds' parameter must be a positive integer or None\. Got 0"):
        am.check_categories(W, items, exact_radius=True, lp_rounds=0)
    audit = audit_layer(Layer(W, None, "d=160", precision="float64"), hardest=2, refine=8, lp_rounds=1, workers=1)
    assert [(h["lp_rounds"], h["lp_exact"]) for h in audit.card["hardest"]] == [(1, False), (1, False)]
    text = markdown(audit.card)
    assert "| 1 (limit) " in text and "2 of these LPs stopped at the limit of 1 rounds" in " ".join(text.split())


def test_witness_radius_is_the_smallest_distance_to_the_hyperplanes():
    """At a witness x the bound is min_i (z_t - z_i) / ||w_t - w_i||, computed here directly, to rounding; an equal
    row with a lower offset is no constraint, one with an offset as high makes it -inf."""
    rng = np.random.default_rng(1)
    W, b = rng.normal(size=(30, 4)), rng.normal(size=30)
    X = rng.normal(size=(5, 4)) * 3
    items = np.argmax(X @ W.T + b, axis=1)  # the category each point makes the argmax
    z = X @ W.T + b
    want = [min((z[k, t] - z[k, i]) / np.linalg.norm(W[t] - W[i]) for i in range(30) if i != t)
            for k, t in enumerate(items)]
    np.testing.assert_allclose(witness_radii(W, b, items, X), want, rtol=1e-12)
    W2, b2 = np.vstack([W, W[items[0]]]), np.r_[b, b[items[0]] - 1.0]
    assert witness_radii(W2, b2, items[:1], X[:1])[0] == pytest.approx(want[0], rel=1e-12)
    b2[-1] = b[items[0]]
    assert witness_radii(W2, b2, items[:1], X[:1])[0] == -np.inf


def test_witnesses_of_a_cone_move_out_by_powers_of_two():
    """Without a bias every region is a cone: each witness is doubled as far as the box allows, its bound with it
    (exactly), and the evidence still verifies."""
    W = np.random.default_rng(2).normal(size=(50, 3))
    res = am.check_categories(W)
    before, X0 = res.radius.copy(), res.witness.copy()
    box = make_box(3, 100.0)
    factor = scale_witnesses(res, box)
    arg = res.status == "argmaxable"
    reflected = arg & (res.lp_rounds == 0)  # an LP's point, or a whitened restart's, may sit on the box already
    assert (factor[arg] >= 1).all() and (np.log2(factor) % 1 == 0).all() and (factor[reflected] >= 16).sum() >= 8
    np.testing.assert_array_equal(res.witness[arg], X0[arg] * factor[arg, None])
    np.testing.assert_array_equal(res.radius[arg], before[arg] * factor[arg])
    assert (np.abs(res.witness[arg]) <= 100).all() and (np.abs(res.witness[arg]).max(axis=1) > 50).all()
    assert am.verify_certificate(res, W).all()


def test_verify_refuses_forged_radius_bounds(tmp_path):
    """The audit's evidence re-checks: a lower bound raised above what the witness holds, or an upper bound pushed
    below what the certificate proves, fails ``verify``."""
    layer = small_layer(n=30, bias=False, seed=3)
    audit = audit_layer(layer, hardest=3, refine=30, workers=1)
    lp = audit.hardest
    assert am.verify_certificate(lp, layer.W).all()
    up = CheckResult(**{**lp.__dict__, "radius_upper": lp.radius_upper * 0.99})
    low = CheckResult(**{**lp.__dict__, "radius": lp.radius * 1.01})
    assert not am.verify_certificate(up, layer.W).any() and not am.verify_certificate(low, layer.W).any()
    whole = audit.result
    k = int(np.flatnonzero(whole.status == "argmaxable")[0])
    forged = CheckResult(**{**whole.__dict__, "radius": whole.radius.copy()})
    forged.radius[k] *= 1e3
    valid = am.verify_certificate(forged, layer.W)
    assert not valid[k] and valid[np.arange(len(valid)) != k].all()


def test_the_indicator_matches_a_direct_computation():
    """cos(u'_i, mean of the unused rows u'), with u' = u less its projection on the first principal component (the
    top right singular vector of the centred rows, from numpy's SVD)."""
    rng = np.random.default_rng(4)
    W = rng.normal(size=(200, 8)) + rng.normal(size=8) * 3
    W[190:] = 0.1 * rng.normal(size=(10, 8)) - 2.0
    reference = np.arange(190, 200)
    c = np.linalg.svd(W - W.mean(axis=0), full_matrices=False)[2][0]
    P = W - np.outer(W @ c, c)
    u = P[reference].mean(axis=0)
    want = P @ u / (np.linalg.norm(P, axis=1) * np.linalg.norm(u))
    got = unembedding_indicator(W.astype(np.float32), reference)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(unembedding_indicator(W, reference), want, atol=1e-12)
    flags = flagged(got, 0.05)
    assert flags.sum() == 10 and flags[reference].all()  # the planted cluster tops the ranking


def test_reference_tokens_from_types_names_ids_and_patterns():
    tokens = ["<pad>", "<unused0>", "hello", "<|reserved_special_token_3|>", "[unused7]", "x"]
    types = ["control", "control", "normal", "control", "normal", "unused"]
    ids, how = reference_tokens(6, tokens, types)
    assert ids.tolist() == [1, 3, 4, 5] and "GGUF type" in how
    assert reference_tokens(6, tokens, types, "0, 2-3")[0].tolist() == [0, 2, 3]
    assert reference_tokens(6, tokens, types, r"<pad>|x")[0].tolist() == [0, 5]
    assert reference_tokens(6, None, None)[0].size == 0
    for bad, why in (("1-", "neither an id"), ("9", "outside"), ("(", "not a regular expression")):
        with pytest.raises(ValueError, match=why):
            reference_tokens(6, tokens, types, bad)


def test_near_ties_match_brute_force():
    """Rows planted 1..8 float32 units in the last place from another are near-ties, 9 units and exact copies are not;
    the projection search finds exactly the pairs a comparison of every pair finds."""
    rng = np.random.default_rng(5)
    W = rng.normal(size=(400, 16)).astype(np.float32)
    for k, ulps in enumerate([1, 3, 8, 9, 0]):
        src = 10 * k
        W[src + 1] = W[src]
        j = int(np.argmax(np.abs(W[src])))
        W[src + 1, j] += np.float32(ulps) * np.spacing(np.abs(W[src, j]))
    W[300:310] = W[301] + np.spacing(np.abs(W[301])) * rng.integers(-2, 3, size=(10, 16))  # a cluster of them
    pairs, gap = near_ties(W)
    tol = 8 * np.spacing(np.abs(W).max(axis=1))
    brute = {(i, j) for i in range(400) for j in range(i + 1, 400)
             if 0 < np.abs(W[i] - W[j]).max() <= max(tol[i], tol[j])}
    assert {tuple(p) for p in pairs.tolist()} == brute
    assert {(0, 1), (10, 11), (20, 21)} <= brute and (30, 31) not in brute and (40, 41) not in brute
    assert (gap > 0).all()


def test_the_audit_names_ties_greedy_ids_and_flags():
    """A head with two tie groups (one inside the hull: no member can win, greedy decoding emits none of it), a row
    inside, and a cluster of <unused> rows: the card says each, escapes hostile names, and lists the ids."""
    rng = np.random.default_rng(6)
    W = rng.normal(size=(60, 3))
    W[[5, 9]] = W[2] * 3  # a tie far out: greedy decoding emits 2's group's lowest id
    W[2] = W[5]
    W[[20, 21]] = 0.01  # a tie inside the hull: none of it wins
    W[30] = 0.02 * W[0]
    W[40:48] = -1.5 + 0.01 * rng.normal(size=(8, 3))
    tokens = [f"t{i}" for i in range(60)]
    tokens[40:48] = [f"<unused{i}>" for i in range(8)]
    tokens[2] = "a|b <script>\n"
    layer = Layer(W, None, "tied test", tokens=tokens, token_types=["normal"] * 60, precision="float64", tied=True)
    audit = audit_layer(layer, hardest=3, refine=10, workers=1)
    card = audit.card
    groups = {tuple(m["id"] for m in g["members"]): g["greedy_emits"] for g in card["tie_groups"]}
    assert groups == {(2, 5, 9): 2, (20, 21): None}
    assert card["greedy_emits"] == [2] and {5, 9, 20, 21, 30} <= set(card["never_emitted"])
    assert card["ids"]["unargmaxable"] == sorted(card["ids"]["unargmaxable"])
    assert card["signals"]["reference_tokens"] == 8
    ind = audit.tokens["indicator"].to_numpy()
    assert (ind[40:48] > 0.99).all() and set(np.flatnonzero(audit.tokens["flag_indicator"])) <= set(range(40, 48))
    md, page = markdown(card), html_page(card)
    assert "a&#124;b &lt;script&gt;&#92;n" in md and "<script" not in md
    assert "a|b &lt;script&gt;" in page and "<script" not in page
    assert card["hardest"] and all(h["radius_at_least"] <= h["radius_at_most"] for h in card["hardest"])


def test_compact_evidence_makes_start_points_again_from_the_layer(tmp_path):
    rng = np.random.default_rng(7)
    W = rng.normal(size=(300, 5)).astype(np.float32)
    W[7] = W[3]
    res = am.check_categories(W)
    res.save(tmp_path / "full.npz")
    res.write_npz(tmp_path / "compact.npz", W=W)
    back = CheckResult.load(tmp_path / "compact.npz", W=W)
    for name in ("items", "status", "radius", "witness", "message", "radius_upper"):
        np.testing.assert_array_equal(getattr(back, name), getattr(res, name))
    with np.load(tmp_path / "compact.npz") as z:
        assert 0 < len(z["witness"]) < len(W)  # the start points are not stored
    with pytest.raises(ValueError, match="give W"):
        CheckResult.load(tmp_path / "compact.npz")
    assert am.verify_certificate(back, W).all()


def _gguf(tmp_path):
    from test_detect_gguf import head_rows, write_gguf

    W = head_rows(6)
    W[[17, 18]] = W[15]  # two more rows equal to the tie far outside (15, 16): one group of four
    return write_gguf(tmp_path / "m.gguf", W, qtype="F32"), W


def test_cli_audit_writes_a_card_that_verify_rechecks(tmp_path, capsys):
    path, W = _gguf(tmp_path)
    prefix = tmp_path / "out" / "m"
    assert main(["audit", str(path), "--out", str(prefix), "--workers", "1"]) == 2  # as check --out: no new directory
    assert "does not exist; create it first" in capsys.readouterr().err
    prefix.parent.mkdir()
    assert main(["audit", str(path), "--out", str(prefix), "--hardest", "2", "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "tie group 1: 15:' w10' (normal) = 16:' w11' (normal) = 17:' w12' (normal) = 18:' w13' (normal); " \
           "greedy decoding still emits 15" in out
    assert "hardest to reach of the 2 tokens the LP bounded" in out  # --hardest 2
    files = {p.name for p in prefix.parent.iterdir()}
    assert {"m.md", "m.html", "m.json", "m.tokens.parquet", "m.evidence.npz", "m.hardest.evidence.npz"} <= files
    card = json.loads((tmp_path / "out" / "m.json").read_text())
    assert card["counts"]["unargmaxable"] == 4 + 3 and card["greedy_emits"] == [15]
    assert card["stored_type"] == "F32" and card["tied"] is True and card["box"] == "|x_j| <= 100"
    for evidence in ("m.evidence.npz", "m.hardest.evidence.npz"):
        assert main(["verify", str(tmp_path / "out" / evidence), str(path)]) == 0
    tokens = pd.read_parquet(tmp_path / "out" / "m.tokens.parquet")
    assert len(tokens) == len(W) and tokens["flag_unargmaxable"].sum() == 7
    readme = tmp_path / "README.md"  # the README's excerpt is generated from a card, never typed
    readme.write_text("intro\n<!-- generated:audit -->\nstale text\n<!-- /generated:audit -->\nend\n")
    assert main(["report", "readme", "--card", str(tmp_path / "out" / "m.json"), "--readme", str(readme),
                 "--summary", str(tmp_path / "none.json")]) == 0
    text = readme.read_text()
    assert "stale text" not in text and "#### Token audit: m.gguf" in text and "greedy decoding emits" in text


def test_check_softmax_shows_ties_as_groups_and_greedy_ids(tmp_path, capsys):
    path, _ = _gguf(tmp_path)
    assert main(["check", "softmax", str(path), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "7 unargmaxable: 4 ties in 1 groups of equal rows, 3 strictly inside" in out
    assert "emitted by greedy decoding on a tie (first index wins; never the strict argmax), 1: 15\n" in out
    assert "never emitted by greedy decoding, 6: " in out


def test_evidence_none_writes_no_evidence_and_verify_says_why(tmp_path, capsys):
    W = np.random.default_rng(8).normal(size=(50, 3))
    np.savez(tmp_path / "w.npz", W=W)
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", str(tmp_path / "w.npz"), "--out", str(out), "--evidence", "none",
                 "--workers", "1"]) == 0
    assert "no evidence: 'verify' cannot re-check it" in capsys.readouterr().out
    assert not (tmp_path / "t.csv.evidence.npz").exists()
    assert main(["verify", str(out), str(tmp_path / "w.npz")]) == 2
    assert "--evidence none kept none" in capsys.readouterr().err


def test_help_names_no_seed_codes(capsys):
    for argv in (["--help"], ["check", "softmax", "--help"], ["check", "assignments", "--help"], ["audit", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = capsys.readouterr().out
        assert "§" not in text and "002" not in text and "thesis §" not in text


def test_the_pipeline_audits_from_the_checks_evidence(tmp_path):
    """check_model keeps its evidence; audit_model reads it (no second check: the result's witnesses are the
    check's) and the index links each card."""
    from argmaxable.audit.models import audit_model, make_audit_index
    from argmaxable.detect.check import check_model
    from argmaxable.report.render import _html_table

    model = {"name": "toy", "source": "random", "params": {"n": 200, "d": 4, "seed": 1}}
    detect = {"bound": 100.0, "patience": 50, "eps": 1e-8, "solver": "highs", "workers": 1,
              "audit": {"hardest": 2, "refine": 20, "lp_rounds": 10, "share": 0.02}}
    check_model(model, detect, tmp_path / "c.parquet", tmp_path / "s.json", evidence_path=tmp_path / "e.npz")
    card = audit_model(model, detect, tmp_path / "e.npz", tmp_path / "detect" / "audit" / "toy")
    table = pd.read_parquet(tmp_path / "c.parquet")
    assert card["counts"]["unargmaxable"] == int((table["status"] == "unargmaxable").sum())
    index = make_audit_index([tmp_path / "detect" / "audit" / "toy.json"], tmp_path, tmp_path / "i.parquet",
                             tmp_path / "i.md")
    assert index["card"].tolist() == ["detect/audit/toy.html"]
    assert '<a href="detect/audit/toy.html">' in _html_table(index)
