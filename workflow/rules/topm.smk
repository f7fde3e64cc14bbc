# top-m family: Basri & Jacobs' LP experiments (Figs 1, 3, 7) and thesis Prop. 5.3 on the DFT layer.
# Trained matrices are read from model_dir(<key>) once rule download_model has written its manifest.json.
import re


TOPM = f"{RESULTS}/topm"
TOPM_SETTINGS = settings(CFG.topm)
TOPM_CHECK = {"check": TOPM_SETTINGS["check"], "probability": TOPM_SETTINGS["probability"]}
TOPM_MODELS = TOPM_SETTINGS["fraction"]["models"]  # each in the model group: argmaxable.topm.schema.CHECKS
TOPM_SCALING = TOPM_SETTINGS["scaling"]
TOPM_POINTS = sorted({(TOPM_SCALING["N"], d) for d in TOPM_SCALING["d_values"]}
                     | {(N, TOPM_SCALING["d"]) for N in TOPM_SCALING["N_values"]})


rule measure_topm:
    conda:
        ENVIRONMENT
    input:
        lambda wc: model_input(wc.model),
    output:
        f"{TOPM}/fraction/{{model}}_{{kind}}.parquet",
    wildcard_constraints:
        model="|".join(map(re.escape, TOPM_MODELS)) or "none",
        kind="trained|gaussian",
    params:
        settings={"fraction": TOPM_SETTINGS["fraction"], **TOPM_CHECK, "prescribed": TOPM_SETTINGS["prescribed"]},
        model=lambda wc: settings(CFG.model[wc.model]),
        root=lambda wc: model_dir(wc.model),
        seed=CFG.seed,
    threads: TOPM_SETTINGS["check"]["workers"]
    log:
        f"{TOPM}/logs/measure_topm/{{model}}_{{kind}}.log",
    script:
        "../scripts/topm_measure_fraction.py"


rule plot_topm_fraction:
    conda:
        ENVIRONMENT
    input:
        expand(f"{TOPM}/fraction/{{model}}_{{kind}}.parquet", model=TOPM_MODELS, kind=["trained", "gaussian"]),
    output:
        **family_outputs(TOPM, tables={"curves": "fraction_curves", "summary": "fraction_summary"},
                         figures={"figure": "fraction"}),
    params:
        settings=TOPM_CHECK,
    log:
        f"{TOPM}/logs/plot_topm_fraction.log",
    script:
        "../scripts/topm_plot_fraction.py"


rule measure_topm_scaling:
    conda:
        ENVIRONMENT
    output:
        f"{TOPM}/scaling/N{{N}}_d{{d}}.parquet",
    wildcard_constraints:
        N=r"\d+",
        d=r"\d+",
    params:
        settings={"scaling": {"trials": TOPM_SCALING["trials"]}, **TOPM_CHECK},
        seed=CFG.seed,
    threads: TOPM_SETTINGS["check"]["workers"]
    log:
        f"{TOPM}/logs/measure_topm_scaling/N{{N}}_d{{d}}.log",
    script:
        "../scripts/topm_measure_scaling.py"


rule plot_topm_scaling:
    conda:
        ENVIRONMENT
    input:
        by_d=[f"{TOPM}/scaling/N{TOPM_SCALING['N']}_d{d}.parquet" for d in TOPM_SCALING["d_values"]],
        by_n=[f"{TOPM}/scaling/N{N}_d{TOPM_SCALING['d']}.parquet" for N in TOPM_SCALING["N_values"]],
    output:
        **family_outputs(TOPM, tables={"by_d": "scaling_by_d", "by_n": "scaling_by_n", "slope": "scaling_slope"},
                         figures={"figure": "scaling"}),
    params:
        settings={"scaling": {"trials": TOPM_SCALING["trials"]}},
    log:
        f"{TOPM}/logs/plot_topm_scaling.log",
    script:
        "../scripts/topm_plot_scaling.py"


rule compare_topm_rows:
    conda:
        ENVIRONMENT
    input:
        [model_input(key) for key in TOPM_MODELS],
    output:
        **family_outputs(TOPM, tables={"table": "rows"}, figures={"figure": "rows"}),
    params:
        settings={"rows": TOPM_SETTINGS["rows"]},
        models={key: (settings(CFG.model[key]), model_dir(key)) for key in TOPM_MODELS},
        seed=CFG.seed,
    log:
        f"{TOPM}/logs/compare_topm_rows.log",
    script:
        "../scripts/topm_compare_rows.py"


rule check_dft_rankings:
    conda:
        ENVIRONMENT
    output:
        **family_outputs(TOPM, tables={"exhaustive": "dft_rankings_exhaustive", "sampled": "dft_rankings_sampled",
                                       "by_d": "dft_rankings_gaussian_by_d"},
                         figures={"figure": "dft_rankings"}),
    params:
        settings={"ranking": TOPM_SETTINGS["ranking"], "check": TOPM_SETTINGS["check"]},
        seed=CFG.seed,
    threads: TOPM_SETTINGS["check"]["workers"]
    log:
        f"{TOPM}/logs/check_dft_rankings.log",
    script:
        "../scripts/topm_check_dft_rankings.py"


TOPM_NATURAL = TOPM_SETTINGS["natural"]


rule predict_next_tokens:
    conda:
        ENVIRONMENT
    input:
        lambda wc: model_input(wc.model),
    output:
        f"{TOPM}/natural/{{model}}_top.npz",
    params:
        settings={"natural": TOPM_NATURAL},
        model=lambda wc: settings(CFG.model[wc.model]),
        root=lambda wc: model_dir(wc.model),
    log:
        f"{TOPM}/logs/predict_next_tokens/{{model}}.log",
    script:
        "../scripts/topm_predict_next_tokens.py"


rule measure_topm_natural:
    conda:
        ENVIRONMENT
    input:
        manifest=lambda wc: model_input(wc.model),
        tops=f"{TOPM}/natural/{{model}}_top.npz",
    output:
        **family_outputs(TOPM, tables={"cumulative": "{model}_cumulative", "curves": "{model}_natural"},
                         figures={"figure": "{model}_natural"}),
    params:
        settings={"natural": TOPM_NATURAL, "check": TOPM_SETTINGS["check"], "prescribed": TOPM_SETTINGS["prescribed"],
                  "fraction": {k: TOPM_SETTINGS["fraction"][k] for k in ("m_values", "trials")}},
        model=lambda wc: settings(CFG.model[wc.model]),
        root=lambda wc: model_dir(wc.model),
        seed=CFG.seed,
    threads: TOPM_SETTINGS["check"]["workers"]
    log:
        f"{TOPM}/logs/measure_topm_natural/{{model}}.log",
    script:
        "../scripts/topm_measure_natural.py"


# Every output of the top-m family (none when topm.enabled is false; no Fig. 1 or 7 without trained matrices,
# no Figs 4 and 6 without a causal language model).
TOPM_TARGETS = []
if CFG.topm.enabled:
    TOPM_TARGETS = [*rules.plot_topm_scaling.output, *rules.check_dft_rankings.output]
    if TOPM_MODELS:
        TOPM_TARGETS += [*rules.plot_topm_fraction.output, *rules.compare_topm_rows.output]
    if TOPM_NATURAL["model"] is not None:
        TOPM_TARGETS += expand(rules.measure_topm_natural.output, model=TOPM_NATURAL["model"])
