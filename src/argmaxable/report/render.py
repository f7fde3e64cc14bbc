"""The report as Markdown and as one self-contained HTML page (figures embedded as base64 PNG, long tables paged,
every name escaped, glyphs beyond Latin shipped as a font subset).
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import pandas as pd

from argmaxable import glyphs
from argmaxable.report.assess import Assessment, coverage, coverage_line
from argmaxable.report.declarations import BEYOND
from argmaxable.report.query import _json_cell, _read_table
from argmaxable.text import markdown_cell, markdown_table

TABLE_ROWS = 25  # rows of a table shown inline; the file holds the rest

def _detail(a: Assessment) -> str:
    """The relation line without its leading status, for a section headed by the status."""
    return a.line[len(a.status):].lstrip(" :") if a.line.startswith(a.status) else a.line

def _anchor(paper: str, item: str) -> str:
    return re.sub(r"[^a-z0-9-]", "", f"{paper}-{item}".lower().replace(" ", "-"))

def _sections(catalogue: dict, items: list[Assessment]) -> list[tuple[str, str, list[Assessment]]]:
    """(title, how its citations read, items) per paper, then the items beyond the papers."""
    out = [(spec["title"], f"Cited as \"{spec.get('short', paper)}\" with the section, table or figure; the "
            f"line key after the dash points into the text file `{spec['seed']}`, for those who hold it.",
            [a for a in items if a.paper == paper])
           for paper, spec in catalogue.items()]
    beyond = [a for a in items if a.paper == BEYOND]
    if beyond:
        out.append(("Beyond the papers", "Results the papers do not have (declared with `beyond: true`).", beyond))
    return out

def _claim_parts(c: dict) -> tuple[str, list[str]]:
    """A claim's sentence after the verdict (the checks, why it cannot decide, the cause, the evidence, the items
    that share the check) and the list of what it read."""
    def sentence(text: str) -> str:  # declared prose, ended with a full stop where it has none
        return text if text.endswith((".", "!", "?")) else f"{text}."
    why = f" It cannot decide: {sentence(c['why'])}" if c["why"] else ""
    cause = f" Cause: {sentence(c['cause'])}" if c["cause"] else ""
    evidence = f" Evidence: {sentence(c['evidence'])}" if c["evidence"] else ""
    shared = (f" The same check as {', '.join(c['shared'])} (counted once)." if c["shared"] else "")
    return f"({c['detail']}).{why}{cause}{evidence}{shared}", c["read"]

def _claim_text(a: Assessment) -> list[str]:
    c = a.claim
    after, read = _claim_parts(c)
    return [f"Paper's claim ({c['cite']}): \"{c['text']}\". Ours **{c['verdict']}** {after}", "",
            *(f"- read {r}" for r in read)]

def _methods_md(methods: list[dict]) -> list[str]:
    lines = ["## Method differences", "", "Where this project's method is not the papers'; each item whose numbers "
             "it changes repeats it.", "", "| what | ours (this run) | the paper | where the paper says so |",
             "|---|---|---|---|"]
    lines += [f"| {markdown_cell(m['what'])} | {markdown_cell(m['ours'])} | {markdown_cell(m['paper'])} | "
              f"{markdown_cell(m['cite'])} |" for m in methods]
    return [*lines, ""]

def _md_table(df: pd.DataFrame) -> str:
    """A table as Markdown, its text cells escaped (:func:`argmaxable.text.markdown_table`); an empty one says so."""
    return "none" if df.empty else markdown_table(df)

class _Shown:
    """The figures and tables already drawn in the report: a second item that declares one links to the first."""

    def __init__(self):
        self.first: dict[Path, Assessment] = {}

    def before(self, path: Path, a: Assessment) -> Assessment | None:
        """The item that showed ``path`` first, or None (and ``a`` shows it now)."""
        if path in self.first:
            return self.first[path]
        self.first[path] = a
        return None

def _md_item(a: Assessment, results_dir: Path, shown: _Shown) -> list[str]:
    """One item's section of the Markdown report."""
    rel = lambda path: path.relative_to(results_dir).as_posix()  # noqa: E731
    lines = ["", f'<a id="{_anchor(a.paper, a.item)}"></a>', f"### {a.item}: {a.title}", "",
             f"**{a.status}** {_detail(a)}", ""]
    if a.claim:
        lines += [*_claim_text(a), ""]
    if a.paper_values is not None:
        lines += [f"The paper's values ({a.paper_cite}):", "", _md_table(a.paper_values), ""]
    lines += [f"- known difference: {d}" for d in a.differences]
    for fig in a.figures:
        first = shown.before(fig, a)
        lines += ["", f"`{rel(fig)}`: shown above under [{first.name}](#{_anchor(first.paper, first.item)})" if first
                  else f"![{a.item}]({rel(fig)})"]
    if a.comparison is not None:
        cited = f" (the paper's values: {'; '.join(a.cited)})" if a.cited else ""
        lines += ["", f"Ours beside the paper's values{cited}:", "", _md_table(a.comparison)]
    for title, rows, path in a.views:
        lines += ["", f"{title} (all {len(rows)} rows of `{rel(path)}`):", "", _md_table(rows)]
    for tab in a.tables:
        if first := shown.before(tab, a):
            lines += ["", f"`{rel(tab)}`: shown above under [{first.name}](#{_anchor(first.paper, first.item)})"]
            continue
        df = _read_table(tab)
        cut = f" (first {TABLE_ROWS} of {len(df)} rows; report.html pages, sorts and searches them all)" \
            if len(df) > TABLE_ROWS else ""
        lines += ["", f"`{rel(tab)}`{cut}:", "", _md_table(df.head(TABLE_ROWS))]
    for txt in a.texts:
        lines += ["", f"`{rel(txt)}`:", "", txt.read_text().strip() or "none"]
    for title, files in a.links:
        lines += ["", f"{title}: " + (", ".join(f"[{f.name}]({f.as_posix()})" for f in files) or "none")]
    for rec in a.provenance:
        lines += [f"- provenance `{rec['file']}`: experiment {rec['experiment']}, {rec['code_version']}, "
                  f"{rec['created']}, config "
                  f"{rec['config_sha256']}, inputs {json.dumps(rec['inputs']) if rec['inputs'] else 'none'}"]
    return lines

def render_markdown(catalogue: dict, items: list[Assessment], header: dict, results_dir: Path,
                    methods: list[dict] = ()) -> str:
    """The report as Markdown; figures are linked relative to the results directory. A table longer than
    :data:`TABLE_ROWS` shows its first rows (the HTML report holds every row); declared views show every row."""
    lines = ["# Replication report", "", *(f"- {k}: {v}" for k, v in header.items()), "",
             *_methods_md(list(methods)),
             "## Coverage", "", coverage_line(items), "", markdown_table(coverage(items)), "",
             "| paper | item | title | status | relation |", "|---|---|---|---|---|"]
    lines += [f"| {a.paper} | [{a.item}](#{_anchor(a.paper, a.item)}) | {markdown_cell(a.title)} | {a.status} | "
              f"{markdown_cell(a.line)} |" for a in items]
    shown = _Shown()
    for title, seed, group in _sections(catalogue, items):
        lines += ["", f"## {title}", "", seed]
        for a in group:
            lines += _md_item(a, results_dir, shown)
    return "\n".join(lines) + "\n"

_CSS = f"body{{font-family:'{glyphs.FAMILY}',sans-serif," + """'Noto Sans CJK SC','Source Han Sans SC',
'PingFang SC','Hiragino Sans','Microsoft YaHei','Yu Gothic',sans-serif;max-width:1100px;margin:auto;padding:1em;
line-height:1.4}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px}
.wide{overflow-x:auto}th{vertical-align:bottom;max-width:9em;font-weight:600}
img{max-width:100%;border:1px solid #eee}.s{font-weight:bold}.exact-match,.within-tolerance{color:#17692b}
.self-check{color:#3d7a7a}.same-inputs{color:#1a4f8b}.differs{color:#b35c00}.substitute-data{color:#6b4ca8}
.beyond-the-papers{color:#8b1a6b}.not-run{color:#777}.missing{color:#b00020}.agrees{color:#17692b}
.inconclusive{color:#8a6d00}ul.read{font-size:12px;color:#444;margin-top:0}.none{color:#777;font-style:italic}
.pager{font-size:12px;margin:.3em 0}.pager input{width:16em}th.sortable{cursor:pointer}
details{font-size:12px;color:#444}section{border-top:1px solid #ddd;margin-top:1em}pre{font-size:11px;overflow:auto}
"""

# Pages, sorts (click a column's head) and searches every long table (div.paged): its rows are the JSON beside it.
_PAGER_JS = """document.querySelectorAll('div.paged').forEach(box => {
  const data = JSON.parse(box.querySelector('script').textContent), size = +box.dataset.rows;
  const body = box.querySelector('tbody'), bar = box.querySelector('.pager');
  bar.innerHTML = "<input type='search' placeholder='search every column'> <button>&lsaquo;</button> " +
    "<span></span> <button>&rsaquo;</button>";
  const [find, prev, info, next] = [bar.children[0], bar.children[1], bar.children[2], bar.children[3]];
  const esc = v => String(v ?? '').replace(/[&<>]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;'}[c]));
  let shown = data.rows, page = 0, col = -1, dir = 1;
  const cmp = (a, b) => (typeof a === 'number' && typeof b === 'number') ? a - b :
    String(a ?? '').localeCompare(String(b ?? ''));
  function draw() {
    const last = Math.max(0, Math.ceil(shown.length / size) - 1); page = Math.min(Math.max(page, 0), last);
    body.innerHTML = shown.slice(page * size, (page + 1) * size)
      .map(r => '<tr>' + r.map(v => '<td>' + esc(v) + '</td>').join('') + '</tr>').join('');
    info.textContent = `rows ${shown.length ? page * size + 1 : 0}-${Math.min((page + 1) * size, shown.length)} of ` +
      `${shown.length}` + (shown.length < data.rows.length ? ` matching (of ${data.rows.length})` : '');
  }
  find.oninput = () => { const q = find.value.toLowerCase();
    shown = data.rows.filter(r => !q || r.some(v => String(v ?? '').toLowerCase().includes(q)));
    if (col >= 0) shown.sort((a, b) => dir * cmp(a[col], b[col])); page = 0; draw(); };
  prev.onclick = () => { page--; draw(); }; next.onclick = () => { page++; draw(); };
  box.querySelectorAll('th').forEach((th, i) => { th.classList.add('sortable'); th.onclick = () => {
    dir = col === i ? -dir : 1; col = i; shown = [...shown].sort((a, b) => dir * cmp(a[col], b[col])); page = 0;
    draw(); }; });
  draw();
});"""

def _html_table(df: pd.DataFrame) -> str:
    """A table as HTML: "none" when empty; a long one (more than :data:`TABLE_ROWS` rows) whole, paged, sortable
    and searchable by the page's script (its first page drawn without it); a ``card`` column (a path relative to the
    results, beside report.html) becomes a link to it."""
    if df.empty:
        return "<p class='none'>none</p>"
    page = df.head(TABLE_ROWS)
    if "card" in df:
        page = page.copy()
        for col in [c for c in page.columns if not pd.api.types.is_numeric_dtype(page[c])]:
            page[col] = page[col].map(lambda v: html.escape(str(v)))
        page["card"] = [f'<a href="{html.escape(str(p), quote=True)}">{html.escape(str(p))}</a>'
                        for p in df["card"].head(TABLE_ROWS)]
    head = page.to_html(index=False, border=0, na_rep="", float_format=lambda v: f"{v:.6g}", escape="card" not in df)
    if len(df) <= TABLE_ROWS:
        return f"<div class='wide'>{head}</div>"
    data = json.dumps({"rows": [[_json_cell(v) for v in row] for row in df.itertuples(index=False)]},
                      ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")  # no tag in a script
    return (f"<div class='paged wide' data-rows='{TABLE_ROWS}'><div class='pager'>rows 1-{TABLE_ROWS} of {len(df)} "
            f"(scripts page, sort and search them all)</div>{head}"
            f"<script type='application/json'>{data}</script></div>")

_GLYPHS = "<!-- glyphs -->"  # where the page ends by stating the glyphs shipped in it

def _status_span(status: str) -> str:
    return f'<span class="s {status.replace(" ", "-")}">{html.escape(status)}</span>'

def _html_item(a: Assessment, shown: _Shown) -> list[str]:
    """One item's section of the HTML report."""
    esc = html.escape
    link = lambda first: f"<a href='#{_anchor(first.paper, first.item)}'>{esc(first.name)}</a>"  # noqa: E731
    parts = [f"<section id='{_anchor(a.paper, a.item)}'><h3>{esc(a.item)}: {esc(a.title)}</h3>"
             f"<p>{_status_span(a.status)} {esc(_detail(a))}</p>"]
    if a.claim:
        c = a.claim
        after, read = _claim_parts(c)
        parts.append(f"<p><b>Paper's claim</b> ({esc(c['cite'])}): &ldquo;{esc(c['text'])}"
                     f"&rdquo; Ours {_status_span(c['verdict'])} {esc(after)}</p><ul class='read'>"
                     + "".join(f"<li>read {esc(r)}</li>" for r in read) + "</ul>")
    if a.paper_values is not None:
        parts += [f"<p>The paper's values ({esc(a.paper_cite)}):</p>", _html_table(a.paper_values)]
    parts += [f"<p><b>Known difference:</b> {esc(d)}</p>" for d in a.differences]
    for fig in a.figures:
        if first := shown.before(fig, a):
            parts.append(f"<p><code>{esc(fig.name)}</code>: shown above under {link(first)}</p>")
            continue
        data = base64.b64encode(fig.read_bytes()).decode("ascii")
        parts.append(f"<figure><img class='report-figure' alt='{esc(a.item)}' "
                     f"src='data:image/png;base64,{data}'><figcaption>{esc(fig.name)}</figcaption></figure>")
    if a.comparison is not None:
        cited = f" (the paper's values: {esc('; '.join(a.cited))})" if a.cited else ""
        parts += [f"<p>Ours beside the paper's values{cited}:</p>", _html_table(a.comparison)]
    for title, rows, path in a.views:
        parts += [f"<p>{esc(title)} (all {len(rows)} rows of <code>{esc(path.name)}</code>):</p>", _html_table(rows)]
    for tab in a.tables:
        if first := shown.before(tab, a):
            parts.append(f"<p><code>{esc(tab.name)}</code>: shown above under {link(first)}</p>")
            continue
        parts += [f"<p><code>{esc(tab.name)}</code></p>", _html_table(_read_table(tab))]
    for txt in a.texts:
        parts += [f"<p><code>{esc(txt.name)}</code></p>", f"<pre>{esc(txt.read_text().strip() or 'none')}</pre>"]
    for title, files in a.links:  # relative to the report, which sits in the results directory
        parts.append(f"<p>{esc(title)}: " + (", ".join(
            f"<a href='{esc(f.as_posix())}'>{esc(f.name)}</a>" for f in files) or "none")
            + "</p>")
    if a.provenance:
        parts.append("<details><summary>provenance</summary><ul>")
        parts += [f"<li><code>{esc(r['file'])}</code>: experiment {esc(str(r['experiment']))}, "
                  f"{esc(str(r['code_version']))}, "
                  f"{esc(str(r['created']))}, config {r['config_sha256']}, inputs "
                  f"{esc(json.dumps(r['inputs']) if r['inputs'] else 'none')}</li>" for r in a.provenance]
        parts.append("</ul></details>")
    parts.append("</section>")
    return parts

def render_html(catalogue: dict, items: list[Assessment], header: dict, methods: list[dict] = (), *,
                fonts: list | None = None) -> str:
    """The report as one self-contained HTML file: figures embedded as base64 PNG, long tables whole (paged by an
    inline script), the glyphs its text needs beyond Latin embedded as font subsets (:mod:`argmaxable.glyphs`;
    ``fonts``: the font files to take them from, default the machine's); no external resource."""
    esc = html.escape
    parts = ["</style></head><body><h1>Replication report</h1><ul>"]
    parts += [f"<li>{esc(k)}: {esc(str(v))}</li>" for k, v in header.items()]
    parts.append("</ul><h2>Method differences</h2><p>Where this project's method is not the papers'; each "
                 "item whose numbers it changes repeats it.</p><table><tr><th>what</th><th>ours (this run)</th>"
                 "<th>the paper</th><th>where the paper says so</th></tr>")
    parts += [f"<tr><td>{esc(m['what'])}</td><td>{esc(m['ours'])}</td><td>{esc(m['paper'])}</td>"
              f"<td>{esc(m['cite'])}</td></tr>" for m in methods]
    parts += [f"</table><h2>Coverage</h2><p>{esc(coverage_line(items))}</p>", _html_table(coverage(items)),
              "<table><tr><th>paper</th><th>item</th><th>title</th><th>status</th><th>relation</th></tr>"]
    parts += [f"<tr><td>{esc(a.paper)}</td><td><a href='#{_anchor(a.paper, a.item)}'>{esc(a.item)}</a></td>"
              f"<td>{esc(a.title)}</td><td>{_status_span(a.status)}</td><td>{esc(a.line)}</td></tr>" for a in items]
    parts.append("</table>")
    shown = _Shown()
    for title, seed, group in _sections(catalogue, items):
        parts.append(f"<h2>{esc(title)}</h2><p>{esc(seed.replace('`', ''))}</p>")
        for a in group:
            parts += _html_item(a, shown)
    parts.append(f"{_GLYPHS}<script>{_PAGER_JS}</script></body></html>")
    body = "\n".join(parts)
    faces, note = glyphs.font_faces(html.unescape(body), fonts)
    body = body.replace(_GLYPHS, f"<h2>About this page</h2><p>Glyphs: {esc(note)}</p>" if note else "", 1)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Replication report</title>"
            f"<style>{_CSS}{faces}\n{body}")
