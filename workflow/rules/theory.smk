# theory family: closed forms, toy layers and random matrices (thesis App. A.1, Figs 4.1, 4.2, 4.4, Ch. 5;
# ACL 2022 Figs 1-5, 7-10; Basri & Jacobs Table 1).
# Every rule compares its exact cells with the seeds' numbers and fails, naming the cells, if one differs.

THEORY = f"{RESULTS}/theory"
THEORY_SETTINGS = settings(CFG.theory)


rule count_regions:
    conda:
        ENVIRONMENT
    output:
        **family_outputs(THEORY, tables={"table": "regions", "no_bias": "regions_no_bias", "bias": "regions_bias"}),
    params:
        settings=THEORY_SETTINGS["regions"],
        seed=CFG.seed,
    log:
        f"{THEORY}/logs/count_regions.log",
    script:
        "../scripts/theory_count_regions.py"


rule count_cover:
    conda:
        ENVIRONMENT
    output:
        **family_outputs(THEORY, tables={"percentage": "cover_percentage", "enumeration": "cover_enumeration"},
                                 figures={"figure": "cover_percentage"}),
    params:
        settings=THEORY_SETTINGS["cover"],
        seed=CFG.seed,
    log:
        f"{THEORY}/logs/count_cover.log",
    script:
        "../scripts/theory_count_cover.py"


rule measure_dft:
    conda:
        ENVIRONMENT
    output:
        **family_outputs(THEORY, tables={"alternation": "dft_alternation", "radius": "dft_radius"},
                                 figures={"geometry": "dft_geometry", "radius_figure": "dft_radius"}),
    params:
        settings=THEORY_SETTINGS["dft"],
        seed=CFG.seed,
    log:
        f"{THEORY}/logs/measure_dft.log",
    script:
        "../scripts/theory_measure_dft.py"


rule check_random_layer:
    conda:
        ENVIRONMENT
    output:
        f"{THEORY}/random_layers/d{{d}}.parquet",
    wildcard_constraints:
        d="|".join(str(d) for d in THEORY_SETTINGS["random_layers"]["d_values"]),
    params:
        settings=THEORY_SETTINGS["random_layers"],
        seed=CFG.seed,
    threads: THEORY_SETTINGS["random_layers"]["workers"]
    log:
        f"{THEORY}/logs/check_random_layer_d{{d}}.log",
    script:
        "../scripts/theory_check_random_layer.py"


rule summarize_random_layers:
    conda:
        ENVIRONMENT
    input:
        expand(f"{THEORY}/random_layers/d{{d}}.parquet", d=THEORY_SETTINGS["random_layers"]["d_values"]),
    output:
        **family_outputs(THEORY, tables={"summary": "random_layers", "qhull": "random_layers_qhull"},
                                 figures={"figure": "random_layers"}),
    params:
        settings=THEORY_SETTINGS["random_layers"],
        seed=CFG.seed,
    threads: THEORY_SETTINGS["random_layers"]["workers"]
    log:
        f"{THEORY}/logs/summarize_random_layers.log",
    script:
        "../scripts/theory_summarize_random_layers.py"


rule plot_toy:
    conda:
        ENVIRONMENT
    output:
        **family_outputs(THEORY, tables={"table": "toy"}, figures={"figure": "toy"}),
    log:
        f"{THEORY}/logs/plot_toy.log",
    script:
        "../scripts/theory_plot_toy.py"


rule plot_illustrations:
    conda:
        ENVIRONMENT
    output:
        **family_outputs(
            THEORY,
            tables={"arrangements": "arrangements", "braid_reflect": "braid_reflect",
                    "chebyshev_balls": "chebyshev_balls", "overcrowding": "overcrowding"},
            figures={"fig3": "acl_fig3_braid", "fig7": "acl_fig7_bias", "fig8": "acl_fig8_construction",
                     "reflect_figure": "braid_reflect", "balls_figure": "chebyshev_balls",
                     "overcrowding_figure": "overcrowding"},
        ),
    params:
        settings=THEORY_SETTINGS["illustrations"],
        seed=CFG.seed,
    log:
        f"{THEORY}/logs/plot_illustrations.log",
    script:
        "../scripts/theory_plot_illustrations.py"


rule bound_topm:
    conda:
        ENVIRONMENT
    output:
        **family_outputs(
            THEORY,
            tables={"table1": "basri_jacobs_table1", "appendix_b": "basri_jacobs_appendix_b",
                    "crossings": "basri_jacobs_crossings"},
            figures={"fig2": "basri_jacobs_fig2", "fig_b": "basri_jacobs_appendix_b"},
        ),
    params:
        settings=THEORY_SETTINGS["basri_jacobs"],
        seed=CFG.seed,
    log:
        f"{THEORY}/logs/bound_topm.log",
    script:
        "../scripts/theory_bound_topm.py"


# Every output of the theory family (none when theory.enabled is false).
THEORY_TARGETS = [
    *rules.count_regions.output,
    *rules.count_cover.output,
    *rules.measure_dft.output,
    *rules.summarize_random_layers.output,
    *rules.plot_toy.output,
    *rules.plot_illustrations.output,
    *rules.bound_topm.output,
] if CFG.theory.enabled else []
