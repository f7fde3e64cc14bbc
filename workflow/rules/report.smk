# report family: the replication report over every table and figure of the three papers (issue 14). Each family
# declares its items in workflow/report/<family>.yaml; papers.yaml is the catalogue of all items.
import glob

REPORT_DIR = f"{workflow.basedir}/workflow/report"


rule make_report:
    input:
        detect_targets(),
        datasets_targets(),
        theory_targets(),
        multilabel_targets(),
        declarations=sorted(glob.glob(f"{REPORT_DIR}/*.yaml")),
    output:
        md=f"{RESULTS}/report.md",
        html=f"{RESULTS}/report.html",
    log:
        f"{RESULTS}/logs/make_report.log",
    params:
        report_dir=REPORT_DIR,
        results_dir=RESULTS,
        experiment=CFG.experiment,
    script:
        "../scripts/report_make.py"
