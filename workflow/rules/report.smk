# report family: the replication report over every table and figure of the three papers. Each family
# declares its items in workflow/report/<family>.yaml; papers.yaml is the catalogue of all items.
import glob

from argmaxable.report import DeclarationError, load_catalogue, load_declarations

REPORT_DIR = f"{workflow.basedir}/workflow/report"
try:  # a malformed declaration stops the run before any job, in one line
    load_declarations(REPORT_DIR, load_catalogue(f"{REPORT_DIR}/papers.yaml"))
except DeclarationError as err:
    sys.exit(f"argmaxable: {err}")
# Each family's targets (empty when disabled); the report marks the items of families that did not run.
REPORT_FAMILIES = {"detect": DETECT_TARGETS + PAPER_FIGURE_TARGETS, "datasets": DATASETS_TARGETS,
                   "theory": THEORY_TARGETS, "multilabel": MULTILABEL_TARGETS, "lm": LM_TARGETS,
                   "topm": TOPM_TARGETS}


rule make_report:
    conda:
        ENVIRONMENT
    input:
        *REPORT_FAMILIES.values(),
        declarations=sorted(glob.glob(f"{REPORT_DIR}/*.yaml")),
    output:
        md=f"{RESULTS}/report.md",
        html=f"{RESULTS}/report.html",
        summary=f"{RESULTS}/report_summary.json",  # the README's generated blocks: argmaxable report readme
    log:
        f"{RESULTS}/logs/make_report.log",
    params:
        experiment=CFG.experiment,
        families=[name for name, targets in REPORT_FAMILIES.items() if targets],
    script:
        "../scripts/report_make.py"
