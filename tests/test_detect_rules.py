"""The detection rules through Snakemake: the paper experiment schedules one download and one check per model
(the whole study as the papers ran it), and a download that fails stops with one line naming the model and the URL."""

from __future__ import annotations

import re

import pytest
from test_config import snakemake


@pytest.mark.slow
def test_paper_dry_run_has_one_download_and_one_check_per_model():
    out = snakemake("--cores", "2", "-n", "--quiet", "rules", "--config", "overrides=[experiment=paper]")
    assert out.returncode == 0, out.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out.stdout + out.stderr, flags=re.M))
    # ACL 2022's 149 released models, plus the four trained heads of Basri & Jacobs Fig. 1 that are not among them
    # (topm family)
    assert counts["download_model"] == counts["check_model"] == str(149 + 4)


def test_a_failed_download_is_one_line_and_leaves_nothing(tmp_path):
    missing = (tmp_path / "gone.npz").as_uri()
    overrides = (f'overrides=["results_dir={tmp_path}/results","data_dir={tmp_path}/data",'
                 f'"model.random_gaussian.download.kind=url","++model.random_gaussian.download.url={missing}"]')
    out = snakemake(f"{tmp_path}/data/models/random_gaussian/manifest.json", "--cores", "1", "--config", overrides)
    assert out.returncode != 0
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("argmaxable:")]
    assert len(lines) == 1 and "'random_gaussian'" in lines[0] and missing in lines[0], out.stderr[-3000:]
    assert "may be offline" in lines[0]
    assert list((tmp_path / "data" / "models").iterdir()) == []


def test_quantisation_rules_run_on_a_tiny_gguf_head(tmp_path):
    """quantise_model and make_quant_table through Snakemake: the SmolLM2 config pointed at a tiny GGUF file by
    URL, studied at Q8_0 (returned bit for bit) and Q4_0; Gemma-3's and Qwen2.5-Coder's studies switched off."""
    import hashlib

    import pandas as pd
    from test_detect_gguf import head_rows, write_gguf

    src = write_gguf(tmp_path / "tiny.gguf", head_rows(32), qtype="Q8_0")
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    m = "model.smollm2_135m_instruct"
    overrides = (f'overrides=["results_dir={tmp_path}/results","data_dir={tmp_path}/data","detect.patience=50",'
                 f'"{m}.download.kind=url","++{m}.download.url={src.as_uri()}","++{m}.download.filename=m.gguf",'
                 f'"{m}.download.sha256={digest}","{m}.params.path=m.gguf","{m}.quant=[Q8_0,Q4_0]",'
                 f'"model.gemma3_270m.quant=[]","model.qwen25_coder_05b_instruct.quant=[]"]')
    out = snakemake(f"{tmp_path}/results/detect/tables/quant.md", "--cores", "1", "--config", overrides)
    assert out.returncode == 0, out.stderr[-3000:]
    table = pd.read_parquet(tmp_path / "results" / "detect" / "tables" / "quant.parquet")
    assert table["type"].tolist() == ["Q8_0", "Q4_0"] and table["identical"].tolist() == [True, False]
    assert set(table["model"]) == {"SmolLM2-135M-Instruct"} and (table["source # unargmaxable"] >= 5).all()


def test_audit_rules_card_a_tiny_gguf_head_from_its_checks_evidence(tmp_path):
    """check_model keeps its evidence, audit_model cards the head from it, make_audit_index links the card: the
    SmolLM2 config pointed at a tiny GGUF file by URL, the study limited to it."""
    import hashlib
    import json

    import pandas as pd
    from test_detect_gguf import head_rows, write_gguf

    src = write_gguf(tmp_path / "tiny.gguf", head_rows(8), qtype="F32")
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    m = "model.smollm2_135m_instruct"
    overrides = (f'overrides=["results_dir={tmp_path}/results","data_dir={tmp_path}/data","detect.patience=50",'
                 f'"{m}.download.kind=url","++{m}.download.url={src.as_uri()}","++{m}.download.filename=m.gguf",'
                 f'"{m}.download.sha256={digest}","{m}.params.path=m.gguf","{m}.quant=[]",'
                 f'"detect.study_models=[smollm2_135m_instruct]","detect.audit.hardest=2",'
                 f'"detect.audit.prompt_models=[]"]')  # a head alone: no whole model to prompt
    out = snakemake(f"{tmp_path}/results/detect/tables/audit_cards.md", "--cores", "1", "--config", overrides)
    assert out.returncode == 0, out.stderr[-3000:]
    results = tmp_path / "results" / "detect"
    assert (results / "smollm2_135m_instruct" / "evidence.npz").is_file()
    card = json.loads((results / "audit" / "smollm2_135m_instruct.json").read_text())
    table = pd.read_parquet(results / "smollm2_135m_instruct" / "categories.parquet")
    assert card["counts"]["unargmaxable"] == int((table["status"] == "unargmaxable").sum()) > 0
    assert len(card["hardest"]) == 2
    index = pd.read_parquet(results / "tables" / "audit_cards.parquet")
    assert index["card"].tolist() == ["detect/audit/smollm2_135m_instruct.html"]
