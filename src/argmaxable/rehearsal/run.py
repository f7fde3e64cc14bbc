"""The paper mode rehearsed: ``experiment=paper``'s detection family over replicas of its models, end to end.

    python scripts/rehearse_paper.py [--work DIR] [--models KEY ...] [--scale true|tiny] [--batch N]
                                     [--fault] [--break KEY ...] [--keep]

1. the manifest (:func:`argmaxable.rehearsal.replicas.manifest`) of the configured models, written to
   ``WORK/manifest.json``, and a local hub serving their replicas on 127.0.0.1, in this process;
2. a copy of the workflow (``Snakefile``, ``workflow/``, ``config/``, the conda environment) under ``WORK/tree``,
   its hub models pinned by ``argmaxable config pin`` against the local hub (the pinned path is what runs) and its
   ``mirrors`` pointed at the local mirror;
3. Snakemake over the detection family, with ``HF_ENDPOINT`` the local hub: every download through the hub's
   protocol or the mirror (head only), every check, the LM study; in batches of ``--batch`` models whose downloaded
   heads are deleted once checked (the disk holds one batch of heads at a time; ``--keep`` keeps them), then the
   tables and figures (ACL Tables 4-8, Figs. 6, 11, 12) and the report (families run: detect). A model whose
   download, check or study fails costs that model only: Snakemake keeps going, the tables cover the models that
   finished, the summary names the failed ones by key with their log's line, and a run again in the same WORK
   redoes only what is missing (a failed model's head stays on disk for it);
4. the checks: each replica's unargmaxable tokens are exactly the planted ones (by name where the pipeline reads
   the vocabulary), ties and strictly-inside rows as planted, nothing else unargmaxable, the counted tokens as the
   manifest says; per model the bytes fetched against the replica's size, the download and check times and peak
   memory (Snakemake's benchmark files); the disk used; all in ``WORK/rehearsal.json`` and ``WORK/rehearsal.md``.

Exit status 0 when every model finished and every check holds; 1 with the failures listed otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd

from argmaxable.rehearsal.replicas import (
    STATMT,
    TOKEN,
    Entry,
    local_hub,
    manifest,
    prewarm,
    repo_size,
    to_json,
    vocabulary,
)
from argmaxable.rehearsal.server import Fault, LocalHub

# experiment=paper's detection family only: top-m's paper settings name models a --models subset may lack
DETECTION = ("experiment=paper", "topm.enabled=false", "topm.fraction.models=[]", "topm.natural.model=null")
ROOT = Path(__file__).resolve().parents[3]  # the repository: Snakefile, workflow/, config/
TREE = ("Snakefile", "workflow", "config", "environment.yml", "environment.post-deploy.sh")


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _tree(work: Path, hub: LocalHub, entries: Sequence[Entry]) -> Path:
    """A fresh copy of the workflow, pinned against the local hub, its mirrors pointed at the local mirror."""
    from argmaxable.detect.pins import pin

    tree = work / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    for name in TREE:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, tree / name)
    hub_models = [e.key for e in entries if e.repo]
    # pin() reads no models as every declared one, of which the local hub serves only the selected
    results = pin(tree / "config", hub_models) if hub_models else []
    failed = [f"{d.key}: {what}" for d, _, what in results if what not in ("pinned", "unchanged")]
    if failed:
        raise RuntimeError(f"pinning against the local hub failed: {'; '.join(failed)}")
    config = tree / "config" / "config.yaml"
    mirrors = json.dumps({STATMT: hub.mirror_url("statmt")})
    config.write_text(config.read_text().replace("mirrors: {}", f"mirrors: {mirrors}"))
    return tree


@contextlib.contextmanager
def _held(lock: Path | None) -> Iterator[None]:
    """Hold ``lock`` (flock) for the block: on a shared machine each batch waits its turn and lets others run
    between batches."""
    if lock is None:
        yield
        return
    import fcntl

    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _snakemake(tree: Path, work: Path, overrides: Sequence[str], targets: Sequence[Path], cores: int,
               env: dict[str, str], log, lock: Path | None = None, before=lambda: None) -> tuple[float, int]:
    """Run ``before()`` and then Snakemake in the copied tree on ``targets``, holding ``lock`` meanwhile; return
    their wall time and Snakemake's exit status. A failed job fails its model's chain only (``--keep-going``); a
    job killed midway is run again (``--rerun-incomplete``)."""
    cmd = [sys.executable, "-m", "snakemake", *map(str, targets), "-s", str(tree / "Snakefile"), "--directory",
           str(work), "--cores", str(cores), "--config", f"overrides={json.dumps(list(overrides))}", "--rerun-triggers",
           "mtime", "--keep-going", "--rerun-incomplete", "--quiet", "rules"]
    with _held(lock):
        start = time.perf_counter()
        before()
        run = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    return time.perf_counter() - start, run.returncode


def _chain(entry: Entry, results: Path, data: Path) -> dict[str, Path]:
    """A model's jobs in the order they run, each with the output that says it finished."""
    return {"download_model": data / "models" / entry.key / "manifest.json",
            "check_model": results / "detect" / entry.key / "summary.json",
            "study_model": results / "detect" / "study" / f"{entry.key}.json"}


def failure(entry: Entry, results: Path, data: Path) -> dict[str, str] | None:
    """The first job of the model's chain whose output is missing (``rule``) and why (``reason``: the one line
    its log names, ``argmaxable: ...``, else the log's last line), or None when the chain finished."""
    for rule, output in _chain(entry, results, data).items():
        if output.is_file():
            continue
        log = results / "detect" / "logs" / rule / f"{entry.key}.log"
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()] \
            if log.is_file() else []
        named = [line for line in lines if line.startswith("argmaxable:")]
        reason = (named or lines or [f"no log ({log.name} missing: the job never started; see snakemake.log)"])[-1]
        return {"model": entry.key, "rule": rule, "reason": reason}
    return None


def _benchmark(path: Path) -> dict[str, float]:
    if not path.is_file():
        return {}
    row = pd.read_csv(path, sep="\t").iloc[-1]
    return {"s": float(row["s"]), "max_rss_mb": float(row["max_rss"]) if row["max_rss"] != "-" else float("nan")}


def verify(entry: Entry, results: Path) -> tuple[dict, list[str]]:
    """One replica's checks (see the module docstring; ``results`` beside the run's ``data``): its record and the
    failures."""
    detect = results / "detect"
    table = pd.read_parquet(detect / entry.key / "categories.parquet")
    summary = json.loads((detect / entry.key / "summary.json").read_text())
    paper = table[table["box"] == "paper"] if "box" in table else table
    found = sorted(paper.loc[paper["status"] == "unargmaxable", "category"].astype(int).tolist())
    problems = []
    if found != entry.planted:
        problems.append(f"{entry.key}: unargmaxable {found[:10]}, planted {entry.planted}")
    if (paper["status"] == "undecided").any():
        problems.append(f"{entry.key}: {int((paper['status'] == 'undecided').sum())} undecided")
    if (summary["n"], summary["d"]) != (entry.n, entry.d):
        problems.append(f"{entry.key}: checked {summary['n']} x {summary['d']}, the replica is {entry.n} x {entry.d}")
    if summary["counted"] != entry.counted:
        problems.append(f"{entry.key}: {summary['counted']} tokens counted, the vocabulary has {entry.counted}")
    names = []
    if entry.tokens_named and entry.planted:
        tokens, _ = vocabulary(entry)
        column = "raw_token" if "raw_token" in paper else "token"
        names = paper.set_index("category").loc[entry.planted, column].tolist()
        if names != [tokens[i] for i in entry.planted]:
            problems.append(f"{entry.key}: planted tokens named {names}, the vocabulary says "
                            f"{[tokens[i] for i in entry.planted]}")
    downloaded = json.loads((results.parent / "data" / "models" / entry.key / "manifest.json").read_text())
    if entry.repo and downloaded["revision"] != entry.commit:  # the pinned commit is what ran
        problems.append(f"{entry.key}: downloaded {downloaded['revision']}, pinned {entry.commit}")
    study = detect / "study" / f"{entry.key}.json"
    if study.is_file():
        box = json.loads(study.read_text())["boxes"][0]
        ties = sum(len(g) for g in entry.ties)
        if (box["ties"], box["strictly_inside"]) != (ties, len(entry.inside)):
            problems.append(f"{entry.key}: the study finds {box['ties']} ties and {box['strictly_inside']} strictly "
                            f"inside, planted {ties} and {len(entry.inside)}")
    return {"unargmaxable": found, "planted_tokens": names, "check_s": summary["seconds"]}, problems


def rehearse(work: Path, models: Sequence[str] = (), scale: str = "true", cores: int = 2, batch: int = 20,
             fault: bool = False, keep: bool = False, lock: Path | None = None, broken: Sequence[str] = ()) -> int:
    from argmaxable.config import load_config, to_plain
    from argmaxable.report import make_report

    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    overrides = [*DETECTION, f"results_dir={work / 'results'}", f"data_dir={work / 'data'}"]
    detection = list(overrides)
    if models:
        overrides.append(f"model=[{','.join(models)}]")
    cfg = load_config(overrides)
    entries = manifest(cfg.model, scale)
    (work / "manifest.json").write_text(to_json(entries))
    results, data = work / "results", work / "data"
    hub = local_hub(entries, scale, hash_cache=work / "hashes.json")
    if unknown := set(broken) - {e.key for e in entries}:
        raise RuntimeError(f"--break names {', '.join(sorted(unknown))}, not among the rehearsed models")
    if fault:  # the CI slice: a hub checkpoint answers 500 twice, a mirrored download drops its connection once
        first_hub = next((e for e in entries if e.repo), None)
        first_url = next((e for e in entries if e.url), None)
        if first_hub is not None:
            hub.faults.append(Fault(f"/{first_hub.repo}/", "status:500", 2, "GET", after=1))
        if first_url is not None:
            hub.faults.append(Fault(first_url.url.removeprefix(STATMT), "drop:2000", 1, "GET", after=1))
    env = {**os.environ, "HF_HUB_CACHE": str(work / "hf"), "HF_TOKEN": TOKEN, "ARGMAXABLE_CACHE": str(work / "cache"),
           "HF_HUB_DISABLE_TELEMETRY": "1"}
    env.pop("HF_HUB_OFFLINE", None)
    timings: dict[str, float] = {}
    failures: dict[str, dict[str, str]] = {}
    disk_peak = 0
    with hub, (work / "snakemake.log").open("a") as log:
        env["HF_ENDPOINT"] = hub.endpoint
        with _environ(HF_ENDPOINT=hub.endpoint, HF_TOKEN=TOKEN):
            tree = _tree(work, hub, entries)
        for e in entries:  # --break: every request for the model's files answers 404 (after the pinning)
            if e.key in broken:
                hub.faults.append(Fault(f"/{e.repo}/" if e.repo else e.url.removeprefix(STATMT), "status:404", -1))
        for i in range(0, len(entries), batch):
            chunk = entries[i:i + batch]
            targets = [results / "detect" / p for e in chunk for p in
                       (f"{e.key}/summary.json", f"{e.key}/categories.parquet", f"study/{e.key}.json")]

            def warm(chunk=chunk) -> None:  # the hashes and CRCs the hub would compute on first request
                for e in chunk:
                    prewarm(e, hub)
                hub.save_hashes()

            timings[f"batch {i // batch + 1}"], status = _snakemake(tree, work, overrides, targets, cores, env, log,
                                                                    lock, warm)
            disk_peak = max(disk_peak, _du(data) + _du(work / "hf"))
            failed = {e.key: f for e in chunk if (f := failure(e, results, data)) is not None}
            if status != 0 and not failed:
                raise RuntimeError(f"snakemake failed (exit {status}) with every model's jobs done; see {log.name}")
            failures |= failed
            if not keep:  # the heads that are checked and studied: only their manifests stay (a failed one's
                for e in chunk:  # stay too, for the rerun that finishes it)
                    if e.key in failed:
                        continue
                    for path in (data / "models" / e.key).glob("*"):
                        if path.name != "manifest.json":
                            shutil.rmtree(path) if path.is_dir() else path.unlink()
        tables = [results / "detect" / "tables" / n for n in ("detect.md", "table1_sources.md", "paper_tables.md",
                                                                "lm_study.md")]
        figures = [results / "detect" / "figures" / n for n in ("fig6_unargmaxable_per_model.png",
                                                                 "fig11_steps_per_token.png",
                                                                 "fig12_steps_per_token.png")]
        finished = [e.key for e in entries if e.key not in failures]
        if finished:  # the tables and figures of the models that finished
            wall_tables, status = _snakemake(tree, work, [*detection, f"model=[{','.join(finished)}]"],
                                             [*tables, *figures], cores, env, log, lock)
            if status != 0:
                raise RuntimeError(f"snakemake failed on the tables and figures (exit {status}); see {log.name}")
            timings["tables and figures"] = wall_tables
        wall = sum(timings.values())  # the runs' own time, without the waits for the lock
        sizes = {e.key: repo_size(e, hub) for e in entries}
        hub.settle()
        http = {"statuses": dict(sorted(Counter(r.status for r in hub.log).items())),
                "faults_left": [f.times for f in hub.faults]}
    if finished:
        make_report(tree / "workflow" / "report", results, results / "report.md", results / "report.html",
                    experiment="paper", families=["detect"], config=to_plain(cfg),
                    out_summary=results / "report_summary.json")
    return _summarise(work, entries, sizes, timings, wall, disk_peak, scale, cores, http, failures)


COLUMNS = ["model", "family", "layout", "n", "d", "n source", "dtype", "repo MB", "fetched MB", "head MB", "download s",
           "check s", "check job s", "check peak MB", "planted", "unargmaxable", "failed"]


def _summarise(work: Path, entries: Sequence[Entry], sizes: dict[str, int], timings: dict[str, float], wall: float,
               disk_peak: int, scale: str, cores: int, http: dict, failures: dict[str, dict[str, str]]) -> int:
    results, rows, problems = work / "results", [], []
    for e in entries:
        if e.key in failures:  # its key, the job that failed and why; the others' checks go on
            f = failures[e.key]
            problems.append(f"{e.key}: {f['rule']} failed: {f['reason']}")
            rows.append({"model": e.key, "family": e.family, "layout": "+".join(e.layout), "n": e.n, "d": e.d,
                         "n source": e.n_source, "dtype": e.dtype, "repo MB": sizes[e.key] / 1e6,
                         "planted": len(e.planted), "failed": f"{f['rule']}: {f['reason']}"})
            continue
        record, failed = verify(e, results)
        problems += failed
        manifest = json.loads((work / "data" / "models" / e.key / "manifest.json").read_text())
        bench = results / "detect" / "benchmarks"
        download, check = _benchmark(bench / "download_model" / f"{e.key}.tsv"), _benchmark(
            bench / "check_model" / f"{e.key}.tsv")
        rows.append({"model": e.key, "family": e.family, "layout": "+".join(e.layout), "n": e.n, "d": e.d,
                     "n source": e.n_source, "dtype": e.dtype, "repo MB": sizes[e.key] / 1e6,
                     "fetched MB": manifest.get("bytes_fetched", 0) / 1e6,
                     "head MB": sum(f["size"] for f in manifest["files"].values()) / 1e6,
                     "download s": download.get("s"), "check s": record["check_s"], "check job s": check.get("s"),
                     "check peak MB": check.get("max_rss_mb"), "planted": len(e.planted),
                     "unargmaxable": len(record["unargmaxable"]), "failed": ""})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    totals = {"models": len(entries), "scale": scale, "cores": cores, "wall_s": wall, "timings_s": timings,
              "check_s": float(frame["check s"].sum()), "repo_bytes": int(sum(sizes.values())),
              "fetched_bytes": int(frame["fetched MB"].sum() * 1e6), "disk_peak_bytes": disk_peak,
              "results_bytes": _du(results),
              "planted_found": int(frame["unargmaxable"].sum()), "planted": int(frame["planted"].sum()), "http": http,
              "failed": list(failures.values()), "problems": problems}
    (work / "rehearsal.json").write_text(json.dumps({"totals": totals, "models": rows}, indent=1, default=float))
    largest = frame.sort_values("check peak MB", ascending=False).head(5)
    lines = ["# Paper mode rehearsal", "",
             f"{len(entries)} replicas ({scale} scale), {cores} cores: {wall / 60:.1f} min wall "
             f"(checks {totals['check_s'] / 60:.1f} min summed); fetched {totals['fetched_bytes'] / 1e9:.2f} GB of "
             f"{totals['repo_bytes'] / 1e9:.1f} GB in the replicas' repos; disk peak {disk_peak / 1e9:.2f} GB "
             f"(heads and hub cache), results {totals['results_bytes'] / 1e6:.0f} MB; planted "
             f"{totals['planted']} unargmaxable rows, {totals['planted_found']} unargmaxable found; "
             f"{len(failures)} models failed; {len(problems)} problems.", "",
             "Largest check jobs by peak memory:", "", largest.to_markdown(index=False, floatfmt=".1f"), "",
             "Every model:", "", frame.to_markdown(index=False, floatfmt=".1f"), ""]
    if failures:  # by key, the job that failed and its log's line
        lines += ["## Failed models", "", *(f"- `{k}`: {f['rule']}: {f['reason']}" for k, f in failures.items()), ""]
    if problems:
        lines += ["## Problems", "", *(f"- {p}" for p in problems), ""]
    (work / "rehearsal.md").write_text("\n".join(lines))
    print("\n".join(lines[:3]))
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    return 1 if problems else 0


def readme_block(record: dict) -> str:
    """The README's ``rehearsal`` block: what ran, how long, how much was fetched of how much, the largest jobs."""
    totals, models = record["totals"], pd.DataFrame(record["models"])
    largest = models.sort_values("check peak MB", ascending=False).head(3)
    big = "; ".join(f"`{r['model']}` ({r['n']} x {r['d']}): check {r['check s']:.0f} s, peak "
                    f"{r['check peak MB'] / 1024:.2f} GiB" for _, r in largest.iterrows())
    families = ", ".join(f"{family} {count}" for family, count in sorted(Counter(models["family"]).items()))
    problems = (f"{len(totals['problems'])} problems (see rehearsal.md)" if totals["problems"] else
                "every unargmaxable row a planted one, every planted one found")
    return (f"{totals['models']} replicas ({families}) at {totals['scale']} scale on {totals['cores']} cores: "
            f"{totals['wall_s'] / 60:.0f} min of Snakemake runs (checks {totals['check_s'] / 60:.0f} min summed); "
            f"{totals['fetched_bytes'] / 1e9:.2f} GB fetched of the replicas' {totals['repo_bytes'] / 1e9:.1f} GB; "
            f"disk at most {totals['disk_peak_bytes'] / 1e9:.2f} GB (one batch of heads and the hub cache); "
            f"{totals['planted']} planted rows, {totals['planted_found']} unargmaxable found; {problems}. "
            f"Largest check jobs by peak memory: {big}.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="rehearsal", help="working directory (default: rehearsal/)")
    parser.add_argument("--models", nargs="*", default=[], metavar="KEY", help="model keys (default: all of "
                        "experiment=paper)")
    parser.add_argument("--scale", choices=("true", "tiny"), default="true", help="true shapes, or n = 300, d = 32")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--batch", type=int, default=20, help="models per batch (their heads on disk at once)")
    parser.add_argument("--fault", action="store_true", help="inject a 500 twice and a dropped connection")
    parser.add_argument("--break", dest="broken", nargs="*", default=[], metavar="KEY", help="these models' files "
                        "answer 404: their downloads fail, the others finish, the summary names them")
    parser.add_argument("--keep", action="store_true", help="keep the downloaded heads")
    parser.add_argument("--lock", type=Path, help="a file to flock around each batch (a shared machine's lock for "
                        "heavy jobs), released between batches")
    parser.add_argument("--readme", type=Path, help="run nothing: fill the generated rehearsal block of this "
                        "page (docs/pipeline.md holds it) from WORK/rehearsal.json")
    args = parser.parse_args(argv)
    if args.readme is not None:
        from argmaxable.report import update_readme

        record = json.loads((Path(args.work) / "rehearsal.json").read_text())
        args.readme.write_text(update_readme(args.readme.read_text(), {"rehearsal": readme_block(record)}))
        return 0
    try:
        return rehearse(Path(args.work), args.models, args.scale, args.cores, args.batch, args.fault, args.keep,
                        args.lock, args.broken)
    except RuntimeError as error:  # a failed Snakemake run or pinning: one line, its log named
        print(f"rehearse_paper: {error}", file=sys.stderr)
        return 1
