"""Thesis Table 4.1 (dataset statistics) and Table A.4 (dataset attributes and hyperparameters), ours beside
the paper's.

Ours come from each built dataset's ``stats.json`` and the composed ``multilabel.runs`` config; the paper's
columns are transcribed from the thesis (§4.1.2 and Appendix A.6).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from argmaxable.multilabel.schema import encoder_label
from argmaxable.provenance import write_table

SETUP_TABLES = ("table_4_1", "table_A_4")  # file stems of thesis Tables 4.1 and A.4

# Thesis Table 4.1: dataset, n (labels), k (most active labels), N (training examples), encoder, e, modality.
PAPER_TABLE_4_1 = pd.DataFrame(
    [("MIMIC-III", 8921, 80, "44k", "CNN", 500, "text"),
     ("BioASQ task A", 20000, 50, "100k", "BERT", 768, "text"),
     ("OpenImagesV6", 8933, 50, "108k", "TResnet", 2432, "images")],
    columns=["dataset", "n", "k", "N", "encoder", "e", "modality"],
)
# Thesis Table A.4: one column per dataset, one row per attribute.
PAPER_TABLE_A_4 = {
    "MIMIC-III": {"n": 8921, "d": "25-400", "encoder": "CNN", "pretrained": "no", "encoder dim e": 500,
                  "lr (encoder)": 0.001, "lr (classifier)": 0.001, "batch size": 16, "patience": 10,
                  "eval every": "1 epoch", "criterion": "P@8", "# train": "44k", "# valid": "1.6k",
                  "# test": "3.3k"},
    "BioASQ task A": {"n": 20000, "d": "25-400", "encoder": "PubmedBERT", "pretrained": "yes",
                      "encoder dim e": 768, "lr (encoder)": 0.00005, "lr (classifier)": 0.001, "batch size": 32,
                      "patience": 10, "eval every": "500 steps", "criterion": "Valid loss", "# train": "100k",
                      "# valid": "5k", "# test": "10k"},
    "OpenImagesV6": {"n": 8933, "d": "25-400", "encoder": "T-Resnet-L", "pretrained": "yes",
                     "encoder dim e": 2432, "lr (encoder)": 0.0001, "lr (classifier)": 0.001, "batch size": 64,
                     "patience": 10, "eval every": "250 steps", "criterion": "Valid loss", "# train": "108k",
                     "# valid": "5k", "# test": "10k"},
}


def _encoder(run: dict) -> tuple[str, Any, str]:
    """(encoder name, its dimension e, modality) of one run's config."""
    enc = run["encoder"]
    if enc["kind"] == "cnn":
        return encoder_label(enc), enc["filters"], "text"
    e = (enc.get("arch") or {}).get("hidden_size", "from the encoder")  # a shrunk BERT's e is its width
    return encoder_label(enc), e, "images" if enc["kind"] == "timm" else "text"


def table_4_1(stats: dict[str, dict], runs: dict[str, dict]) -> pd.DataFrame:
    """Our datasets' rows (source "ours") under the paper's (source "paper")."""
    ours = []
    for name, st in stats.items():
        encoder, e, modality = _encoder(runs[name]) if name in runs else ("-", "-", "-")
        ours.append({"dataset": name, "n": st["n_labels"], "k": st["k"], "N": st["split_sizes"]["train"],
                     "encoder": encoder, "e": e, "modality": modality})
    return pd.concat([PAPER_TABLE_4_1.assign(source="paper"), pd.DataFrame(ours).assign(source="ours")],
                     ignore_index=True).astype({"N": str, "e": str})


def table_a_4(stats: dict[str, dict], runs: dict[str, dict]) -> pd.DataFrame:
    """Attributes as rows; the paper's three columns, then one column per dataset of ours."""
    cols = dict(PAPER_TABLE_A_4)
    for name, run in runs.items():
        st = stats[name]
        encoder, e, _ = _encoder(run)
        sizes = st["split_sizes"]
        cols[f"{name} (ours)"] = {
            "n": st["n_labels"], "d": ", ".join(map(str, run["d"])), "encoder": encoder,
            "pretrained": "yes" if run["encoder"]["pretrained"] else "no", "encoder dim e": e,
            "lr (encoder)": run["lr_encoder"], "lr (classifier)": run["lr_classifier"],
            "batch size": run["batch_size"], "patience": run["patience"],
            "eval every": f"{run['eval_every']} steps" if run["eval_every"] else "1 epoch",
            "criterion": {"loss": "Valid loss", "p@k": f"P@{run['metric_k']}"}.get(run["criterion"], run["criterion"]),
            "# train": sizes["train"], "# valid": sizes["dev"], "# test": sizes["test"]}
    df = pd.DataFrame(cols)
    df.index.name = "attribute"
    return df.reset_index().astype(str)


def make_setup_tables(dataset_dirs: dict[str, str], runs: dict[str, dict], out: dict[str, str], *,
                      config: Any = None) -> None:
    """Rule ``make_setup_tables``: thesis Tables 4.1 and A.4 as .csv and .md.

    Parameters
    ----------
    dataset_dirs : dict
        Dataset name -> built dataset directory (holding ``stats.json``).
    runs : dict
        The composed ``multilabel.runs``.
    out : dict
        Paths ``table_4_1`` and ``table_a_4`` (.csv; a .md is written beside each).
    """
    stats = {name: json.loads((Path(p) / "stats.json").read_text()) for name, p in dataset_dirs.items()}
    inputs = [Path(p) / "stats.json" for p in dataset_dirs.values()]
    for key, df in (("table_4_1", table_4_1(stats, runs)), ("table_a_4", table_a_4(stats, runs))):
        for path in (Path(out[key]), Path(out[key]).with_suffix(".md")):
            write_table(df, path, config=config, inputs=inputs)
