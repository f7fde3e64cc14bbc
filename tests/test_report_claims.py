"""Each claim check of workflow/report/ read against its seed sentence: every test runs the real declaration on a
results directory holding the numbers a review found in a real run (issue 34) and asserts the verdict a reader of
the cited seed lines would reach. Each one failed on the declaration it replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from argmaxable.report import (
    assess,
    check_claim,
    coverage_counts,
    load_catalogue,
    load_declarations,
    mark_shared,
)
from argmaxable.report.render import _claim_text

REPORT_DIR = Path(__file__).resolve().parents[1] / "workflow" / "report"
CATALOGUE = load_catalogue(REPORT_DIR / "papers.yaml")
DECLS = load_declarations(REPORT_DIR, CATALOGUE)
SEEDS = {paper: spec["seed"] for paper, spec in CATALOGUE.items()}


def _run(tmp_path: Path, key: tuple[str, str], files: dict[str, object], experiment: str = "offline"):
    """Assess one declared item on a results directory holding ``files`` (DataFrames as their suffix says,
    dicts as JSON); every other declared output is an empty placeholder (the assessment reads none of them)."""
    results = tmp_path / "results"
    for name, content in files.items():
        path = results / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, pd.DataFrame):
            content.to_parquet(path) if path.suffix == ".parquet" else content.to_csv(path, index=False)
        else:
            path.write_text(json.dumps(content))
    decl = DECLS[key]
    rel = decl["relation"].get(experiment, decl["relation"].get("offline"))
    for name in rel.get("outputs", decl.get("outputs", [])):
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        (results / name).touch(exist_ok=True)
    entry = next(e for e in CATALOGUE[key[0]]["items"] if e["item"] == key[1]) if key[0] in CATALOGUE else \
        {"item": key[1], "title": decl["title"]}
    return assess(key[0], entry, decl, results, experiment, seed=SEEDS.get(key[0], ""), seeds=SEEDS)


def test_table_9_reads_our_rows_not_the_papers(tmp_path):
    """002 l. 699: the box holds for the head's inputs. The paper's en-ru row (-95.4, 94.4) sits in the same table;
    the claim must test ours (-0.17 to 18.6), not the paper against itself."""
    table9 = pd.DataFrame({"model": ["bg-en (OPUS-MT)", "en-ru (OPUS-MT)", "debtags_lm_d4", "debtags_lm_d8"],
                           "origin": ["paper", "paper", "ours", "ours"],
                           "source": ["002 Table 9: paper", "002 Table 9: paper", "substitute", "substitute"],
                           "min range": ["", "", "", ""], "max range": ["", "", "", ""],
                           "min": [-57.47, -95.4, -0.17, -0.15], "max": [58.87, 94.4, 18.6, 12.0]})
    for item in (("acl2022", "Table 9"), ("thesis", "Table A.3")):
        a = _run(tmp_path / item[1], item, {"lm/tables/lm_table9.csv": table9, "lm/tables/lm_activations.csv":
                                            pd.DataFrame({"x": [0]})})
        assert a.claim["verdict"] == "agrees"
        assert "act_min -0.17 >= " in a.claim["detail"] and "act_max 18.6 <= " in a.claim["detail"]
        assert "95.4" not in a.claim["detail"] and "2 of 2 rows" not in " ".join(a.claim["read"])
        assert any("all 2 rows of ours (the paper's 2 not read)" in r for r in a.claim["read"])


def _train_json(head: str, d: int, seed: int, seconds: float) -> tuple[str, dict]:
    return (f"multilabel/debtags/{head}/d{d}/seed{seed}/train.json",
            {"time_to_best_s": seconds, "best_criterion": 0.01, "epochs": 5, "wall_time_s": 20.0})


def test_fig_5_8_needs_the_quarter_the_thesis_claims_not_any_speed_up(tmp_path):
    """001 l. 3055: "the DFT converges about 25% faster". 17.6 s against 17.7 s is not that."""
    files = dict(_train_json(h, d, s, t) for h, t in (("bsl", 17.7), ("dft", 17.6)) for d in (8, 32) for s in (0, 1))
    files["multilabel/tables/table_metrics.csv"] = pd.DataFrame({"x": [0]})
    a = _run(tmp_path, ("thesis", "Fig. 5.8"), files)
    assert a.claim["verdict"] == "differs" and "dft_best_s 17.6 <= 0.8 x bsl_best_s 17.7: fails" in a.claim["detail"]
    files.update(_train_json("dft", d, s, 12.0) for d in (8, 32) for s in (0, 1))
    assert _run(tmp_path / "fast", ("thesis", "Fig. 5.8"), files).claim["verdict"] == "agrees"


def _exceptions(rows: list[tuple[int, str, int, int]]) -> pd.DataFrame:
    """table_dft_exceptions.csv: (d, split, undecided, infeasible) per run and split."""
    return pd.DataFrame([{"dataset": "debtags", "head": "dft", "d": d, "seed": 0, "split": split,
                          "total_within_k": 100, "eps_argmaxable_within_k": 100 - u - i,
                          "unargmaxable_within_k": i, "undecided_within_k": u} for d, split, u, i in rows],
                        columns=["dataset", "head", "d", "seed", "split", "total_within_k", "eps_argmaxable_within_k",
                                 "unargmaxable_within_k", "undecided_within_k"])


@pytest.mark.parametrize("item", ["Table 5.1", "Table 5.2"])
def test_tables_5_1_and_5_2_read_the_caption_whole(tmp_path, item):
    """001 l. 3038: DFT layers make all examples argmaxable, "Nevertheless, when slack dimensionality is very small,
    the regions can be too small to detect with the precision of the LP". LP exceptions at the two smallest slacks
    only, mostly undecided, are that caveat; an exception at the widest slack run is not."""
    sweep = pd.DataFrame({"d": [2, 8, 32, 64, 128]})
    small = _exceptions([(2, "dev", 3, 0), (2, "test", 5, 1), (8, "test", 2, 0)])
    summary = pd.DataFrame({"head": "dft", "source": "gold", "space": "head", "split": ["dev", "test"],
                            "thin_within_k": [2, 3], "empty_within_k": [0, 0]})
    files = {"multilabel/tables/table_5_1.csv": sweep, "multilabel/tables/table_5_2.csv": sweep,
             "multilabel/tables/table_dft_exceptions.csv": small, "multilabel/tables/summary.csv": summary}
    a = _run(tmp_path, ("thesis", item), files)
    assert a.claim["verdict"] == "agrees" and "exc_d_max 8 < d_max 128: holds" in a.claim["detail"]
    thin = 5 if item == "Table 5.1" else 3  # the exact stage's thin regions: dev and test, or test alone
    assert f"finds {thin} of the gold head-space ones with a non-empty region thinner than eps" in "\n".join(
        _claim_text(a))
    files["multilabel/tables/table_dft_exceptions.csv"] = _exceptions([(2, "test", 5, 1), (128, "test", 1, 0)])
    assert _run(tmp_path / "wide", ("thesis", item), files).claim["verdict"] == "differs"
    files["multilabel/tables/table_dft_exceptions.csv"] = _exceptions([])
    assert _run(tmp_path / "none", ("thesis", item), files).claim["verdict"] == "agrees"


def _crossings(bound: int, below: int, not_above: int, low: int, high: int) -> pd.DataFrame:
    return pd.DataFrame({"curve": ["bound_gumbel", "bound_direct", "simulation"],
                         "largest_m_at_or_above": [bound - 1, bound + 3, below - 1],
                         "first_m_below": [bound, bound + 4, below], "first_m_not_above": [bound, bound + 4, not_above],
                         "m_interval_low": [None, None, low], "m_interval_high": [None, None, high],
                         "paper": [27, None, 28]}).astype({c: "Int64" for c in (
        "first_m_below", "first_m_not_above", "m_interval_low", "m_interval_high", "paper")})


def test_basri_jacobs_fig_5_reads_both_curves_the_same_way(tmp_path):
    """004 l. 299: 27 (bound) and 28 (simulation) are each curve's first m below 0.99. Pairing the bound's
    first_m_below (27) with the simulation's first_m_not_above (25) made "undershoots" fail. The claim reads the
    curves where the Monte Carlo can tell them apart (a run's numbers: the bound under the simulation's Wilson
    interval at m = 29-40, nowhere over it)."""
    sides = ["within"] * 28 + ["below"] * 12
    sim = pd.DataFrame({"m": range(1, 41), "trials": 200, "simulation": 1.0, "bound_vs_simulation": sides})
    files = {"theory/tables/basri_jacobs_crossings.parquet": _crossings(27, 30, 25, 1, 30),
             "theory/tables/basri_jacobs_appendix_b.parquet": sim}
    a = _run(tmp_path, ("basri_jacobs", "Fig. 5"), files)
    assert a.comparison["ours"].astype(int).tolist() == [27, 30]  # first_m_below of both curves
    # the paper's 28 lies in the m the Monte Carlo cannot tell from the threshold (1-30): not a difference
    assert a.status == "within tolerance" and "1/1 cells within m_interval_low-m_interval_high" in a.line
    files["theory/tables/basri_jacobs_crossings.parquet"] = _crossings(27, 30, 25, 29, 30)
    assert _run(tmp_path / "resolved", ("basri_jacobs", "Fig. 5"), files).status == "differs"
    files["theory/tables/basri_jacobs_crossings.parquet"] = _crossings(27, 30, 25, 1, 30)
    assert a.claim["verdict"] == "agrees" and "n_below 12 >= the paper's 1: holds" in a.claim["detail"]
    assert "from m = 29" in a.claim["evidence"]
    files["theory/tables/basri_jacobs_appendix_b.parquet"] = sim.assign(bound_vs_simulation="within")
    unsure = _run(tmp_path / "unsure", ("basri_jacobs", "Fig. 5"), files)
    assert unsure.claim["verdict"] == "inconclusive" and "cannot be told" in unsure.claim["why"]
    files["theory/tables/basri_jacobs_appendix_b.parquet"] = sim.assign(bound_vs_simulation=["above", *sides[1:]])
    assert _run(tmp_path / "over", ("basri_jacobs", "Fig. 5"), files).claim["verdict"] == "differs"


def test_basri_jacobs_fig_3_reads_m_over_d_in_the_papers_range_as_a_substitute(tmp_path):
    """004 l. 228: "With d << N, we observe that m ~ d/5", from Fig. 3's d = 100-2050 at N = 32000. At d = 20, m = 1
    says nothing about d/5; over d >= 100 m/d is 0.15-0.18. The offline run (N = 2000) is a substitute, and no
    slope is compared by equality with an approximate 1/5."""
    by_d = pd.DataFrame({"N": 2000, "d": [20, 40, 60, 80, 100, 150], "m": [1, 5, 9, 13, 15, 27],
                         "m_cor1_bound": [1, 2, 3, 4, 5, 7]})
    files = {"topm/tables/scaling_by_d.parquet": by_d,
             "topm/tables/scaling_slope.parquet": pd.DataFrame({"N": [2000], "slope_measured": [0.204],
                                                                "slope_paper": [0.2]})}
    a = _run(tmp_path, ("basri_jacobs", "Fig. 3"), files)
    assert a.status == "substitute data" and a.comparison is None
    assert a.claim["verdict"] == "agrees" and "ratio_min 0.150 >= 0.75 x the paper's 0.2: holds" in a.claim["detail"]


def test_fig_11_with_no_failure_on_either_member_is_inconclusive(tmp_path):
    """002 l. 681: members of one ensemble differ a lot (366 against 8 and 3). 0 against 0 cannot say whether
    they differ; the third panel (19) is another model, not a member."""
    summary = pd.DataFrame({"model": ["ddddocr common", "ddddocr common_old", "PP-OCRv4 rec"], "d": [1024, 1024, 120],
                            "tokens": [8210, 8210, 6625], "argmaxable_approximate_failed": [0, 0, 19]})
    for item in (("acl2022", "Fig. 11"), ("thesis", "Fig. 4.6")):
        a = _run(tmp_path / item[1], item, {"detect/tables/fig11_steps_summary.csv": summary})
        assert a.claim["verdict"] == "inconclusive" and "no difference to measure" in a.claim["why"]
        assert "19" in a.claim["evidence"]


def test_an_inconclusive_condition_or_a_missing_number_never_yields_a_verdict():
    checks = [{"left": "a", "op": ">", "right": "b", "times": 10}]
    assert check_claim(checks, {"a": 0, "b": 0})[0] == "differs"
    verdict, _, why = check_claim(checks, {"a": 0, "b": 0}, inconclusive=[
        {"left": "a", "op": "==", "right": 0, "why": "nothing to compare"}])
    assert verdict == "inconclusive" and why.startswith("nothing to compare (a 0 == the paper's 0)")
    assert check_claim(checks, {"a": float("nan"), "b": 1})[0] == "inconclusive"
    assert check_claim([{"left": "r", "op": ">=", "right": 0.2, "times": 0.75}], {"r": 0.15})[0] == "agrees"


def _detect_run(unarg: dict[str, tuple[str, int]], tokens: pd.DataFrame) -> dict[str, object]:
    """Summaries of checked models ({key: (group, unargmaxable)}) and the LM study's token table."""
    files: dict[str, object] = {f"detect/{k}/summary.json": {"model": k, "group": g, "unargmaxable": u}
                                for k, (g, u) in unarg.items()}
    files["detect/tables/lm_study_tokens.parquet"] = tokens
    return files


def _tokens(rows: list[tuple[str, str, str, str, str]]) -> pd.DataFrame:
    """The LM study's token table: (model, model group, kind, token_type, CJK frequency) per unargmaxable token."""
    return pd.DataFrame([{"model": m, "model group": g, "box": "paper", "category": i, "kind": k, "token_type": t,
                          "CJK frequency": f} for i, (m, g, k, t, f) in enumerate(rows)])


def test_table_1_counts_released_heads_and_tests_the_claims_second_half(tmp_path):
    """002 l. 252: "unargmaxable tokens only occur in 13 MT models, but these are mostly infrequent and noisy
    vocabulary tokens". The synthetic layers and the LM trained here are not released models; the second half
    reads the tokens' kind (ties, near-ties), type (special tokens) and, for CJK characters, frequency class."""
    unarg = {"random_gaussian": ("", 70), "debtags_lm_d4": ("", 3782), "ocr_a": ("OCR", 5), "ocr_b": ("OCR", 0),
             "llm": ("LLM", 2), **{f"ocr_{i}": ("OCR", 0) for i in range(20)}}
    noisy = _tokens([("ocr_a", "OCR", "near-tie", "", "common"), ("ocr_a", "OCR", "strictly inside", "", "rare"),
                     ("ocr_a", "OCR", "strictly inside", "", "rare"), ("ocr_a", "OCR", "strictly inside", "", "common"),
                     ("ocr_a", "OCR", "strictly inside", "", ""), ("llm", "LLM", "tie", "control", ""),
                     ("llm", "LLM", "tie", "normal", ""), ("debtags_lm_d4", "", "strictly inside", "", "")])
    a = _run(tmp_path, ("acl2022", "Table 1"), _detect_run(unarg, noisy))
    assert "with_unarg 2 <= 0.091 x models 23: holds" in a.claim["detail"]  # the 2 released heads of 23
    assert "noisy 5 > 0.5 x tokens 7: holds" in a.claim["detail"] and a.claim["verdict"] == "agrees"
    common = noisy.assign(**{"CJK frequency": "common"})
    assert _run(tmp_path / "common", ("acl2022", "Table 1"), _detect_run(unarg, common)).claim["verdict"] == "differs"


def test_items_sharing_a_check_say_so_and_count_once(tmp_path):
    """ACL Table 1, Fig. 6 and thesis Table 4.3, Fig. 4.5 state one claim with one check: one distinct check."""
    files = _detect_run({f"m{i}": ("OCR", u) for i, u in enumerate([0, 3, 0, 0])},
                        _tokens([("m1", "OCR", "tie", "", "")]))
    items = [_run(tmp_path / key[1], key, files) for key in DECLS
             if DECLS[key]["family"] == "detect" and key[1] in ("Table 1", "Fig. 6", "Table 4.3", "Fig. 4.5")]
    assert len(items) == 4 and all(a.claim for a in items)
    mark_shared(items)
    assert all(len(a.claim["shared"]) == 3 for a in items)
    counts = coverage_counts(items)
    assert (counts["claim items"], counts["claims"]) == (4, 1)


def test_section_5_1_reads_the_frequency_rank_of_every_width_not_one_chosen_width(tmp_path):
    """002 l. 320: the unargmaxable tokens are the infrequent ones. Read at every width that has some (their median
    frequency rank in the rarer half), not at the one width where the buckets differ most."""
    models = pd.DataFrame({"model": [f"debtags_lm_d{d}" for d in (4, 8, 16, 32)], "d": [4, 8, 16, 32],
                           "box": "paper", "n": 4000, "# unargmaxable": [3782, 2954, 348, 0],
                           "median rank of unargmaxable": [2100.0, 2400.0, 3500.0, float("nan")]})
    buckets = pd.DataFrame({"d": [4, 4], "box": "paper", "bucket": [1, 3751], "share_unargmaxable": [0.5, 1.0]})
    files = {"lm/tables/lm_models.csv": models, "lm/tables/lm_rank_buckets.csv": buckets}
    a = _run(tmp_path, ("acl2022", "§5.1"), files)
    assert a.claim["verdict"] == "agrees" and "median_min 2100 > 0.5 x n 4000: holds" in a.claim["detail"]
    assert "d = 4, 8, 16" in a.claim["evidence"]
    models.loc[0, "median rank of unargmaxable"] = 1500.0
    assert _run(tmp_path / "frequent", ("acl2022", "§5.1"), files).claim["verdict"] == "differs"


def test_basri_jacobs_fig_1_compares_an_lms_head_and_names_what_limits_the_ocr_head(tmp_path):
    """004 l. 35: the trained OPMs of LMs behave like random matrices. The small LM's head is an LM's; PP-OCRv4's
    recogniser is not, and what limits it is in the run (its tied and near-tied rows), not a shared direction."""
    summary = pd.DataFrame([{"matrix": m, "kind": k, "test": "top-m", "N": 1, "d": 1, "trials": 20, "m_measured": v}
                            for m, k, v in (("ppocrv4_rec", "trained", 2), ("ppocrv4_rec", "gaussian", 12),
                                            ("debtags_lm_d64", "trained", 6), ("debtags_lm_d64", "gaussian", 6))])
    study = pd.DataFrame({"model": ["PP-OCRv4 rec"], "box": ["paper"], "# ties": [3], "of which near-ties": [114]})
    a = _run(tmp_path, ("basri_jacobs", "Fig. 1"), {"topm/tables/fraction_summary.parquet": summary,
                                                   "detect/tables/lm_study.parquet": study})
    assert a.claim["verdict"] == "agrees" and "lm_trained 6 >= 0.5 x lm_gaussian 6: holds" in a.claim["detail"]
    assert "3 of its rows are ties and 114 near-ties" in a.claim["evidence"] and "direction" not in a.claim["evidence"]


def test_table_4_reads_the_real_llm_heads_whatever_models_the_run_has(tmp_path):
    """002 l. 587: no token of the paper's LMs is unargmaxable. The run's evidence is its real LLM heads (the LM
    study's records of the GGUF LLM group), not the toy LM at d = 4-16; without one the check cannot decide."""
    llm = "LLM heads (GGUF, wheels)"

    def record(name, group, unarg, ties):
        return {"model": name, "group": group, "n": 10, "boxes": [
            {"box": "paper", "unargmaxable": unarg, "ties": ties, "near_ties": 0, "strictly_inside": unarg - ties}]}
    study = {"detect/study/smol.json": record("SmolLM2", llm, 15, 15), "detect/study/gemma.json":
             record("Gemma", llm, 0, 0), "detect/study/lm4.json": record("debtags_lm_d4", "", 3782, 0),
             "detect/tables/lm_study.parquet": pd.DataFrame({"model": ["SmolLM2"], "model group": [llm]}),
             "detect/study/smol_tokens.parquet.meta.json": {"code_version": "x"}}  # a sidecar: not a record
    for item in (("acl2022", "Table 4"), ("thesis", "Fig. A.2")):
        a = _run(tmp_path / item[1], item, study)
        assert a.claim["verdict"] == "differs" and "llm_unarg 15 == the paper's 0: fails" in a.claim["detail"]
        assert "15 ties" in a.claim["cause"] and "0 strictly inside" in a.claim["cause"]
        assert [title for title, _, _ in a.views] and a.views[0][1]["model"].tolist() == ["SmolLM2"]
        assert any("detect/study/*.json (3 files), 2 of 3 records" in r for r in a.claim["read"])
    study.pop("detect/study/smol.json"), study.pop("detect/study/gemma.json")
    assert _run(tmp_path / "none", ("acl2022", "Table 4"), study).claim["verdict"] == "inconclusive"


def test_an_inconclusive_condition_can_need_more_than_one_thing_to_hold():
    cond = [{"left": "n", "op": "<", "right": 2048, "and": [{"left": "ok", "op": "==", "right": "samples"}],
             "why": "stops short"}]
    checks = [{"left": "ok", "op": "<", "right": "samples"}]
    assert check_claim(checks, {"n": 1024, "ok": 200, "samples": 200}, inconclusive=cond)[0] == "inconclusive"
    assert check_claim(checks, {"n": 1024, "ok": 190, "samples": 200}, inconclusive=cond)[0] == "agrees"
    assert check_claim(checks, {"n": 2048, "ok": 200, "samples": 200}, inconclusive=cond)[0] == "differs"
