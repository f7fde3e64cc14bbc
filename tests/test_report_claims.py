"""Each claim check of workflow/report/ read against its seed sentence: every test runs the real declaration on a
results directory holding the numbers a review found in a real run and asserts the verdict a reader of
the cited seed lines would reach. Each one failed on the declaration it replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from argmaxable.report import (
    assess,
    check_claim,
    coverage_counts,
    load_catalogue,
    load_declarations,
    load_methods,
    mark_shared,
    method_differences,
)
from argmaxable.report.render import _claim_text

REPORT_DIR = Path(__file__).resolve().parents[1] / "workflow" / "report"
CATALOGUE = load_catalogue(REPORT_DIR / "papers.yaml")
DECLS = load_declarations(REPORT_DIR, CATALOGUE)


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
    return assess(key[0], entry, decl, results, experiment, papers=CATALOGUE)


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
            {"time_to_best_s": seconds, "best_criterion": 0.01, "epochs": 5, "wall_time_s": 20.0, "best_step": 400})


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


def _verify(regions: list[str]) -> pd.DataFrame:
    """One DFT run's verify.parquet: gold head-space k-active assignments the LP did not show eps-argmaxable, with
    the exact stage's region verdict ("yes" thin, "no" empty, "" none), and one it did."""
    return pd.DataFrame({"split": "test", "source": "gold", "space": "head", "within_k": True,
                         "eps_argmaxable": [False] * len(regions) + [True], "region": [*regions, ""]})


def test_tables_5_1_and_5_2_read_the_caption_whole_as_one_check(tmp_path):
    """001 l. 3038, the caption both tables quote: DFT layers make all examples argmaxable, "Nevertheless, when
    slack dimensionality is very small, the regions can be too small to detect with the precision of the LP". LP
    exceptions at the two smallest slacks only are that caveat; an exception at the widest slack run is not. The
    two tables run one check (counted once), and say how many exceptions the exact stage left without a verdict
    rather than "0 undecided" (the LP's status, which says nothing of them)."""
    sweep = pd.DataFrame({"d": [2, 8, 32, 64, 128]})
    small = _exceptions([(2, "dev", 0, 3), (2, "test", 0, 6), (8, "test", 0, 2)])
    summary = pd.DataFrame({"head": "dft", "source": "gold", "space": "head", "split": ["dev", "test"],
                            "thin_within_k": [2, 3], "empty_within_k": [0, 0]})
    files = {"multilabel/tables/table_5_1.csv": sweep, "multilabel/tables/table_5_2.csv": sweep,
             "multilabel/tables/table_dft_exceptions.csv": small, "multilabel/tables/summary.csv": summary,
             "multilabel/debtags/dft/d2/seed0/verify.parquet": _verify(["yes", "yes", "", "", ""]),
             "multilabel/debtags/dft/d8/seed0/verify.parquet": _verify(["yes", "yes", "yes", ""])}
    tables = [_run(tmp_path / item, ("thesis", item), files) for item in ("Table 5.1", "Table 5.2")]
    for a in tables:
        assert a.claim["verdict"] == "agrees" and "exc_d_max 8 < d_max 128: holds" in a.claim["detail"]
        text = "\n".join(_claim_text(a))
        assert "Of the 9 gold head-space ones" in text and "finds 5 with a non-empty region thinner than eps" in text
        assert "leaves 4 without a verdict" in text and "0 undecided" in text.split("Of the")[0]
    assert tables[0].claim["key"] == tables[1].claim["key"]
    mark_shared(tables)
    assert coverage_counts(tables)["claims"] == 1 and tables[1].claim["shared"] == ["thesis Table 5.1"]
    files["multilabel/tables/table_dft_exceptions.csv"] = _exceptions([(2, "test", 5, 1), (128, "test", 1, 0)])
    assert _run(tmp_path / "wide", ("thesis", "Table 5.1"), files).claim["verdict"] == "differs"
    files["multilabel/tables/table_dft_exceptions.csv"] = _exceptions([])
    assert _run(tmp_path / "none", ("thesis", "Table 5.2"), files).claim["verdict"] == "agrees"


def _crossings(bound: int, below: int, not_above: int, low: int, high: int) -> pd.DataFrame:
    return pd.DataFrame({"curve": ["bound_gumbel", "bound_direct", "simulation"],
                         "largest_m_at_or_above": [bound - 1, bound + 3, below - 1],
                         "first_m_below": [bound, bound + 4, below], "first_m_not_above": [bound, bound + 4, not_above],
                         "m_interval_low": [None, None, low], "m_interval_high": [None, None, high],
                         "paper": [27, None, 28]}).astype({c: "Int64" for c in (
        "first_m_below", "first_m_not_above", "m_interval_low", "m_interval_high", "paper")})


def test_basri_jacobs_fig_5_refuses_a_tolerance_that_admits_every_value(tmp_path):
    """004 l. 299: 27 (bound) and 28 (simulation) are each curve's first m below 0.99. The bound's 27 is exact.
    At 200 sets per m the simulation's Wilson interval holds the threshold for m = 1-30: every paper value up to 30
    would pass, so no tolerance is granted and the item is unresolved, not within tolerance. An interval that does
    not reach m = 1 is a tolerance (29-30 refuses the paper's 28; 26-30 admits it). The claim reads the curves where
    the Monte Carlo can tell them apart (a run's numbers: the bound under the interval at m = 29-40)."""
    sides = ["within"] * 28 + ["below"] * 12
    sim = pd.DataFrame({"m": range(1, 41), "trials": 200, "simulation": 1.0, "bound_vs_simulation": sides})
    files = {"theory/tables/basri_jacobs_crossings.parquet": _crossings(27, 30, 25, 1, 30),
             "theory/tables/basri_jacobs_appendix_b.parquet": sim}
    a = _run(tmp_path, ("basri_jacobs", "Fig. 5"), files)
    assert a.comparison["ours"].astype(int).tolist() == [27, 30]  # first_m_below of both curves
    assert a.status == "unresolved" and a.line.startswith("unresolved (bound: exact match (1/1 cells equal)")
    assert "simulation: unresolved (ours 30 against the paper's 28" in a.line and "1-30) reaches the smallest" in a.line
    files["theory/tables/basri_jacobs_crossings.parquet"] = _crossings(27, 30, 25, 29, 30)
    assert _run(tmp_path / "resolved", ("basri_jacobs", "Fig. 5"), files).status == "differs"
    files["theory/tables/basri_jacobs_crossings.parquet"] = _crossings(27, 30, 25, 26, 30)
    assert _run(tmp_path / "within", ("basri_jacobs", "Fig. 5"), files).status == "within tolerance"
    files["theory/tables/basri_jacobs_crossings.parquet"] = _crossings(27, 28, 25, 1, 30)
    assert _run(tmp_path / "equal", ("basri_jacobs", "Fig. 5"), files).status == "exact match"  # no tolerance needed
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
    """Summaries of checked models ({key: (group, unargmaxable)}), the LM study's record of each released one (its
    ties and rows strictly inside, from ``tokens``) and the study's token table."""
    files: dict[str, object] = {f"detect/{k}/summary.json": {"model": k, "group": g, "unargmaxable": u}
                                for k, (g, u) in unarg.items()}
    for k, (g, u) in unarg.items():
        mine = tokens[tokens["model"] == k]
        ties = int((mine["kind"] == "tie").sum())
        files[f"detect/study/{k}.json"] = {"model": k, "group": g, "n": 100, "n_over_d": 10.0, "boxes": [
            {"box": "paper", "unargmaxable": u, "ties": ties, "strictly_inside": u - ties, "near_ties": 0}]}
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


def test_table_1_says_which_heads_fail_it_and_that_they_are_not_mt_models(tmp_path):
    """002 l. 252 is about MT models. A run whose failures are OCR recognisers says so, with the one translation
    model's count (0 agrees with the claim) and how many heads keep unargmaxable rows once ties are set aside (the
    paper's LP passes a tie: the method difference the verdict names)."""
    ocr, mt, llm = "OCR heads (wheels)", "Translation (wheels)", "LLM heads (GGUF, wheels)"
    unarg = {**{f"ocr_{i}": (ocr, u) for i, u in enumerate([5, 3, 0, 2])}, "cn2en": (mt, 0), "smol": (llm, 4)}
    tokens = _tokens([("ocr_0", ocr, "strictly inside", "", "common")] * 5 + [("ocr_1", ocr, "tie", "", "")] * 3
                     + [("ocr_3", ocr, "strictly inside", "", "common")] * 2 + [("smol", llm, "tie", "", "")] * 4)
    a = _run(tmp_path, ("acl2022", "Table 1"), _detect_run(unarg, tokens))
    assert a.claim["verdict"] == "differs" and "with_unarg 4 <= 0.091 x models 6: fails" in a.claim["detail"]
    assert "3 of the 4 OCR recognisers have unargmaxable tokens" in a.claim["evidence"]
    assert "of the translation models run here (1), 0 have any" in a.claim["evidence"]
    assert "counting only rows strictly inside, 2 heads" in a.claim["evidence"]
    assert "3 of them OCR recognisers, which are not the MT models" in a.claim["cause"]
    methods = method_differences(load_methods(REPORT_DIR / "papers.yaml"), CATALOGUE, tmp_path / "results", None)
    ties = next(m for m in methods if m["what"].startswith("ties"))
    assert ("acl2022", "Table 1") in ties["items"] and ("acl2022", "Table 4") in ties["items"]
    assert "in this run's real heads 7 of the 14 unargmaxable tokens are ties" in ties["ours"]
    assert ties["cite"] == "ACL 2022 §3.3.1 — line 205 of 002_6008ffe8464613bf.txt"


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


def _lm_models(shares: list[float], medians: list[float]) -> pd.DataFrame:
    """lm_models.csv of the small LM at d = 4, 8, 16 (4000 words): the paper's box and the activation's."""
    paper = pd.DataFrame({"model": [f"debtags_lm_d{d}" for d in (4, 8, 16)], "d": [4, 8, 16], "box": "paper",
                          "n": 4000, "# unargmaxable": [round(40 * x) for x in shares], "% unargmaxable": shares,
                          "median rank of unargmaxable": medians})
    return pd.concat([paper, paper.assign(box="activation", **{"median rank of unargmaxable": 2500.0})])


def test_section_5_1_is_decided_only_where_the_median_rank_can_move(tmp_path):
    """002 l. 320: the unargmaxable tokens are the infrequent ones. A review's numbers: at d = 4 and 8, 95% and 74%
    of the 4000 words are unargmaxable, which forces their median rank near 2000 whatever the frequencies; at
    d = 16 (9%) the median, 1872, lies within a tenth of the vocabulary of the middle: the run cannot decide. A
    median clearly in the rarer half (3500) agrees, one clearly in the frequent half (1000) differs."""
    buckets = pd.DataFrame({"d": 4, "box": "paper", "bucket": [1, 1001, 2001, 3751],
                            "share_unargmaxable": [0.82, 0.97, 0.95, 0.91]})
    files = {"lm/tables/lm_models.csv": _lm_models([94.6, 73.9, 8.7], [2100.0, 2400.0, 1872.0]),
             "lm/tables/lm_rank_buckets.csv": buckets}
    a = _run(tmp_path, ("acl2022", "§5.1"), files)
    assert a.claim["verdict"] == "inconclusive" and "open_min 1872 > 0.5 x n 4000: fails" in a.claim["detail"]
    assert "(d = 16) the median rank of the unargmaxable tokens, 1872 to 1872 of 4000, lies within a tenth" in \
        a.claim["why"] and "up to 95 percent" in a.claim["why"]
    assert "runs from 82% to 97% (the most frequent bucket 82%, the rarest 91%)" in a.claim["evidence"]
    assert "82% in the most frequent" not in a.line  # the note no longer picks the two ends of the curve
    files["lm/tables/lm_models.csv"] = _lm_models([94.6, 73.9, 8.7], [2100.0, 2400.0, 3500.0])
    assert _run(tmp_path / "rare", ("acl2022", "§5.1"), files).claim["verdict"] == "agrees"
    files["lm/tables/lm_models.csv"] = _lm_models([94.6, 73.9, 8.7], [2100.0, 2400.0, 1000.0])
    assert _run(tmp_path / "frequent", ("acl2022", "§5.1"), files).claim["verdict"] == "differs"
    files["lm/tables/lm_models.csv"] = _lm_models([94.6, 73.9, 60.0], [2100.0, 2400.0, 3500.0])
    forced = _run(tmp_path / "forced", ("acl2022", "§5.1"), files)
    assert forced.claim["verdict"] == "inconclusive" and "from 60 to 95 percent" in forced.claim["why"]


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
    assert "Its 3 ties and 114 near-ties" in a.claim["evidence"] and "direction" not in a.claim["evidence"]
    assert "reaches 2 against its Gaussian twin's 12 and is set aside" in a.claim["evidence"]  # named, not hidden


def test_table_4_with_only_ties_is_inconclusive_under_the_stated_convention(tmp_path):
    """002 l. 587: no token of the paper's LMs is unargmaxable. The run's evidence is its real LLM heads (the LM
    study's records of the GGUF LLM group), not the toy LM. When every unargmaxable token is a tie, the verdict is
    the tie convention's: this project counts a tie unargmaxable, the paper's LP (002 l. 205) passes a duplicate
    row. So it is inconclusive, naming the convention; a row strictly inside makes it differ."""
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
        assert a.claim["verdict"] == "inconclusive" and "llm_unarg 15 == the paper's 0: fails" in a.claim["detail"]
        assert "every unargmaxable token of the LLM heads is a tie" in a.claim["why"]
        assert "this project's convention" in a.claim["why"] and "ACL 2022 §3.3.1" in a.claim["why"]
        assert [title for title, _, _ in a.views] and a.views[0][1]["model"].tolist() == ["SmolLM2"]
        assert any("detect/study/*.json (3 files), 2 of 3 records" in r for r in a.claim["read"])
        assert a.claim["cite"] == "ACL 2022 Table 4 — line 587 of 002_6008ffe8464613bf.txt"
    study["detect/study/gemma.json"] = record("Gemma", llm, 2, 0)
    inside = _run(tmp_path / "inside", ("acl2022", "Table 4"), study)
    assert inside.claim["verdict"] == "differs" and "17: 15 ties, 2 strictly inside" in inside.claim["cause"]
    assert "counting a tie as unargmaxable" in inside.claim["cause"]
    study.pop("detect/study/smol.json"), study.pop("detect/study/gemma.json")
    assert _run(tmp_path / "none", ("acl2022", "Table 4"), study).claim["verdict"] == "inconclusive"


def test_fig_12_without_distilled_students_is_inconclusive_for_that_reason(tmp_path):
    """002 l. 671: distilled students were easier to prove than their teachers. The offline run has none (the
    small LM's widths are each trained alone), so the check cannot speak to the claim whatever it finds; the
    paper's own expectation (l. 330: narrower should need more steps) and how few tokens the narrowest mean
    covers are said. With the paper's Bergamot models the check decides."""
    summary = pd.DataFrame({"model": ["debtags_lm_d4", "debtags_lm_d64"], "d": [4, 64], "tokens": [4000, 4000],
                            "proven_approximate": [197, 4000], "mean_steps": [8.68, 1.2]})
    for item in (("acl2022", "Fig. 12"), ("thesis", "Fig. 4.7")):
        a = _run(tmp_path / item[1], item, {"detect/tables/fig12_steps_summary.csv": summary})
        assert a.claim["verdict"] == "inconclusive" and "narrow_steps 8.68 <= wide_steps 1.2: fails" in \
            a.claim["detail"]
        assert a.claim["why"].startswith("the claim compares distilled students with their teachers, and this run "
                                         "has none")
        assert "8.68 against the widest's 1.2, covers only the 197 of its 4000" in a.claim["why"]
        assert a.claim["cause"] == ""  # an inconclusive verdict states why, not a cause
    paper = _run(tmp_path / "paper", ("acl2022", "Fig. 12"), {"detect/tables/fig12_steps_summary.csv": summary},
                 experiment="paper")
    assert paper.claim["verdict"] == "differs"


def test_section_4_1_reads_the_llm_heads_steps_per_token(tmp_path):
    """002 l. 268: the LMs needed fewer than 1.2 approximate-stage steps per token on average. SmolLM2 takes 1.92
    here (a review's number); with none of the LLM heads the run cannot decide."""
    llm = "LLM heads (GGUF, wheels)"
    files = {f"detect/{k}/summary.json": {"model": k, "group": g, "mean_steps": v} for k, g, v in (
        ("smol", llm, 1.92), ("gemma", llm, 1.05), ("ocr", "OCR heads (wheels)", 9.0))}
    files["detect/tables/detect.parquet"] = pd.DataFrame({"model": ["smol"]})
    a = _run(tmp_path, ("acl2022", "§4.1"), files)
    assert a.claim["verdict"] == "differs" and "steps_max 1.92 < the paper's 1.2: fails" in a.claim["detail"]
    assert "from 1.05 to 1.92" in a.claim["cause"]
    assert a.claim["cite"] == "ACL 2022 §4.1 — line 268 of 002_6008ffe8464613bf.txt"
    files["detect/smol/summary.json"]["mean_steps"] = 1.1
    assert _run(tmp_path / "easy", ("acl2022", "§4.1"), files).claim["verdict"] == "agrees"
    files = {k: v for k, v in files.items() if "ocr" in k or k.endswith("parquet")}
    assert _run(tmp_path / "none", ("acl2022", "§4.1"), files).claim["verdict"] == "inconclusive"


def test_thesis_table_1_1_sets_the_llm_heads_beside_the_table(tmp_path):
    """001 l. 497: d << n across the 2024 LLMs of Table 1.1. The LLM heads checked here are set beside its rows;
    read as: each has at least the n/d of the table's least bottlenecked row (LLaMa 2, 7.8)."""
    llm = "LLM heads (GGUF, wheels)"
    files = {f"detect/study/{k}.json": {"model": k, "group": llm, "n": n, "d": d, "n_over_d": n / d, "boxes": []}
             for k, n, d in (("SmolLM2", 49152, 576), ("Gemma", 262144, 640))}
    files["detect/tables/lm_study.parquet"] = pd.DataFrame({"model": ["SmolLM2", "Gemma", "PP-OCRv4"],
                                                           "model group": [llm, llm, "OCR"], "box": "paper",
                                                           "n": [49152, 262144, 6625], "d": [576, 640, 120]})
    a = _run(tmp_path, ("thesis", "Table 1.1"), files)
    assert a.status == "substitute data" and a.claim["verdict"] == "agrees"
    assert "ratio_min 85 >= LLaMa 2's n/d in the table 7.8: holds" in a.claim["detail"]
    assert a.paper_values["d"].tolist() == [4096, 4096, 4096, 8192]
    assert a.views[0][1]["model"].tolist() == ["SmolLM2", "Gemma"]
    assert a.paper_cite == "Thesis Table 1.1, p. 34 — lines 492-495 of 001_b7c21f74bf9df842.txt"
    files["detect/study/Tiny.json"] = {"model": "Tiny", "group": llm, "n": 1000, "d": 500, "n_over_d": 2.0}
    assert _run(tmp_path / "wide", ("thesis", "Table 1.1"), files).claim["verdict"] == "differs"


def test_basri_jacobs_fig_4_needs_gpt2_and_reads_roughly_200_on_the_grid(tmp_path):
    """004 l. 285: roughly 200 tokens reach 0.9 for GPT-2 on news. The offline run has no GPT-2: inconclusive with
    that reason, its own number stated. On GPT-2 (experiment=paper) the grid's first m reaching 0.9 decides:
    between the grid's neighbours of 200 (100, 500] agrees, 1000 differs."""
    grid = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]

    def cumulative(first_at: int) -> pd.DataFrame:
        return pd.DataFrame({"model": "x", "m": grid, "texts": 10, "std": 0.01,
                             "mean": [0.95 if m >= first_at else 0.5 for m in grid]})
    off = _run(tmp_path, ("basri_jacobs", "Fig. 4"), {"topm/tables/debtags_lm_d64_cumulative.parquet": cumulative(20)})
    assert off.claim["verdict"] == "inconclusive" and "this run has no GPT-2" in off.claim["why"]
    assert "m = 20 on the grid" in off.claim["why"]
    assert "m90 20 > the grid's m below 200 100: fails" in off.claim["detail"]
    for first_at, verdict in ((200, "agrees"), (500, "agrees"), (1000, "differs")):
        a = _run(tmp_path / str(first_at), ("basri_jacobs", "Fig. 4"),
                 {"topm/tables/gpt2_cumulative.parquet": cumulative(first_at)}, experiment="paper")
        assert a.claim["verdict"] == verdict, first_at
    never = _run(tmp_path / "never", ("basri_jacobs", "Fig. 4"),
                 {"topm/tables/gpt2_cumulative.parquet": cumulative(5000)}, experiment="paper")
    assert never.claim["verdict"] == "inconclusive" and "at no m of the grid" in never.claim["why"]


def test_basri_jacobs_fig_6_compares_natural_and_uniform_targets(tmp_path):
    """004 l. 336: "little difference" between natural and uniform prescribed probabilities (Fig. 6). Read on the
    largest m at which every sampled set receives its targets: within a factor 2 agrees."""
    def curves(natural: int, uniform: int) -> pd.DataFrame:
        rows = [{"model": "lm", "m": m, "test": test, "trials": 20, "feasible": 20 if m <= top else 10,
                 "undecided": 0, "fraction": 1.0 if m <= top else 0.5}
                for test, top in (("prescribed, natural", natural), ("prescribed, uniform", uniform))
                for m in (2, 4, 6, 8, 10, 12, 16, 24)]
        return pd.DataFrame(rows)
    path = "topm/tables/debtags_lm_d64_natural.parquet"
    a = _run(tmp_path, ("basri_jacobs", "Fig. 6"), {path: curves(12, 16)})
    assert a.claim["verdict"] == "agrees" and "m_natural 12 >= 0.5 x m_uniform 16: holds" in a.claim["detail"]
    assert _run(tmp_path / "far", ("basri_jacobs", "Fig. 6"), {path: curves(4, 16)}).claim["verdict"] == "differs"
    none = _run(tmp_path / "none", ("basri_jacobs", "Fig. 6"), {path: curves(0, 0)})
    assert none.claim["verdict"] == "inconclusive" and "nothing to compare" in none.claim["why"]


def test_figs_5_6_and_5_7_test_the_speed_half_of_the_quote_in_steps(tmp_path):
    """001 l. 2788 ("while training faster") and l. 3052 ("starts training at a lower loss and converges
    faster"): each quote's speed half is checked, in optimiser steps to the best dev loss (no machine load moves
    them), and Fig. 5.7 says its lower start is what the initialisation trick builds in."""
    files = dict(_train_json(h, d, s, 10.0) for h in ("bsl", "dft") for d in (8, 32) for s in (0, 1))
    for name in [k for k in files if "/dft/" in k]:
        files[name] = {**files[name], "best_step": 500}  # the DFT takes more steps to its best
    files["multilabel/tables/table_metrics.csv"] = pd.DataFrame({"head": ["bsl", "dft"], "test_f1@k": [0.5, 0.5]})
    for head, start in (("bsl", 2.0), ("dft", 1.0)):
        files[f"multilabel/debtags/{head}/d8/seed0/curve.csv"] = pd.DataFrame({"train_loss": [start, 0.5]})
    files["multilabel/figures/fig_5_7.png"] = pd.DataFrame()  # placeholders for the declared outputs
    fig56 = _run(tmp_path / "56", ("thesis", "Fig. 5.6"), files)
    assert fig56.claim["verdict"] == "differs" and "dft_steps 500 < bsl_steps 400: fails" in fig56.claim["detail"]
    fig57 = _run(tmp_path / "57", ("thesis", "Fig. 5.7"), files)
    assert fig57.claim["verdict"] == "differs" and "dft_start 1.000 < bsl_start 2.000: holds" in fig57.claim["detail"]
    assert "what the initialisation trick builds in" in fig57.claim["evidence"]
    for name in [k for k in files if "/dft/" in k and k.endswith("train.json")]:
        files[name] = {**files[name], "best_step": 300}
    assert _run(tmp_path / "faster", ("thesis", "Fig. 5.7"), files).claim["verdict"] == "agrees"


def test_fig_4_3_quotes_the_whole_takeaway_and_says_what_it_tests(tmp_path):
    """001 l. 2556: "BSL layers have unargmaxable label assignments starting from d = 200". The quote keeps its
    threshold, and the evidence says the check reads the narrowest d only."""
    table = pd.DataFrame({"d": ["2", "8", "test size"], "debtags": [900, 1000, 1000]})
    for item in ("Fig. 4.3", "Table 4.2"):
        a = _run(tmp_path / item, ("thesis", item), {"multilabel/tables/table_4_2.csv": table})
        assert a.claim["text"].endswith("starting from $d = 200$.") and a.claim["verdict"] == "agrees"
        assert "the check reads the narrowest d run only" in a.claim["evidence"]


def test_an_inconclusive_condition_can_need_more_than_one_thing_to_hold():
    cond = [{"left": "n", "op": "<", "right": 2048, "and": [{"left": "ok", "op": "==", "right": "samples"}],
             "why": "stops short"}]
    checks = [{"left": "ok", "op": "<", "right": "samples"}]
    assert check_claim(checks, {"n": 1024, "ok": 200, "samples": 200}, inconclusive=cond)[0] == "inconclusive"
    assert check_claim(checks, {"n": 1024, "ok": 190, "samples": 200}, inconclusive=cond)[0] == "agrees"
    assert check_claim(checks, {"n": 2048, "ok": 200, "samples": 200}, inconclusive=cond)[0] == "differs"
