"""`relreason report`: the results as one self-contained HTML page (inline CSS and SVG; no script, no
network when it is viewed).

    write_page([], Path("report.html"))                         # every table with results, as RESULTS.md
    write_page(["clrs30", "runs/mpnn-bfs-s42-..."], Path("r.html"))   # one table and one run directory

A published table's section is built from the very sections RESULTS.md is rendered from
(relreason.studies.results_report.report_sections: ours beside the paper with the verdicts, each cell's command,
hardware and wall time, the model-selection table), then its figures: per task, the validation curve of
each cell (results/curves/) and, where a cell's run had a size sweep saved, its score against graph size
(results/sweeps/). A run directory's section shows its test scores, command, hardware and wall time, its
validation curve and training loss from metrics.jsonl, and its size sweep (RUN/ood_sweep.json) when it
has one. The page is written atomically.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

from relreason.data.store import atomic_path
from relreason.errors import RelreasonError, write_error
from relreason.eval.grid import SWEEP_FILE, read_sweep
from relreason.eval.metric_kinds import resolve_metric
from relreason.eval.report import cell_text
from relreason.files import escape as escape_text
from relreason.rundir import RunDir, read_metrics, read_object, validations
from relreason.runs.svg import Series, line_chart
from relreason.studies.results import CURVES, SWEEPS
from relreason.studies.results_report import INTRODUCTION, Section, code_label, duration, report_sections
from relreason.studies.tables import TABLES

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; background: #fff; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: .8em 0; font-size: 12.5px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
tr:nth-child(even) td { background: #fafafa; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f4f4f4; padding: 0 2px; }
td.verdict-agrees { background: #e3f4e3 !important; }
td.verdict-lower, td.verdict-higher { background: #fbe3e3 !important; }
td.verdict-inconclusive { background: #fdf3d8 !important; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; border: 1px solid #e4e4e4; padding: 4px; }
svg.chart text { font: 11px system-ui, sans-serif; fill: #333; }
svg.chart text.chart-title { font-size: 12px; font-weight: 600; }
nav ul { columns: 2; }
.note { color: #555; }
"""


def inline(text: str) -> str:
    """The inline Markdown the report's text uses (`code`, **bold**, *italic*) as HTML, the rest escaped."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) >= 2:
            out.append(f"<code>{escape(part[1:-1])}</code>")
            continue
        html = escape(part)
        html = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html)
        html = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", html)
        out.append(html)
    return "".join(out)


def table_html(rows: list[dict], columns: list[str], kind: str) -> str:
    """A <table> of `rows` under `columns` (cells as inline Markdown); a verdict cell is coloured by its word."""
    head = "".join(f"<th>{inline(c)}</th>" for c in columns)
    body = []
    for r in rows:
        cells = []
        for c in columns:
            value = cell_text(r.get(c))
            word = value.split(":")[0].split()[0] if c == "verdict" and value.strip() else ""
            css = f' class="verdict-{word}"' if word in ("agrees", "lower", "higher", "inconclusive") else ""
            cells.append(f"<td{css}>{inline(value)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (f'<table class="report-table" data-kind="{escape(kind)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def _figure(svg: str, what: str) -> str:
    return f'<figure class="report-figure" data-kind="{escape(what)}">{svg}</figure>'


def _read_json(path: Path) -> dict | None:
    return read_object(path) if path.is_file() else None


def _sweep_series(label: str, sweep: dict) -> list[Series]:
    """A sweep's rows as one series per graph family (size -> score)."""
    graphs: dict[str, list[tuple[float, float]]] = {}
    for r in sweep["rows"]:
        graphs.setdefault(r["graph"], []).append((r["size"], r["score"]))
    many = len(graphs) > 1
    return [Series(f"{label} · {g}" if many else label, sorted(points)) for g, points in graphs.items()]


def table_figures(results: Path, section: Section) -> list[str]:
    """Per task of a table section: the validation curves of its cells, then their size sweeps where any
    was saved (a task without committed curves or sweeps gets no figure)."""
    figures = []
    tasks = list(dict.fromkeys(c["task"] for c in section.cells))
    for task in tasks:
        cells = [c for c in section.cells if c["task"] == task]
        curves, sweeps = [], []
        for c in cells:
            rel = Path(c["model"]) / c["setting"] / c["task"] / f"seed{c['seed']}.json"
            label = f"{c['variant']} seed {c['seed']}"
            curve = _read_json(Path(results) / CURVES / rel)
            if curve is not None:
                curves.append(Series(label, [(v["examples"], v["score"]) for v in curve["validations"]]))
            if (Path(results) / SWEEPS / rel).is_file():
                sweeps += _sweep_series(label, read_sweep(Path(results) / SWEEPS / rel))
        if curves:
            figures.append(_figure(line_chart(curves, title=f"{section.name}: {task}, validation score by training "
                                              "examples", xlabel="training examples", ylabel="validation score (%)",
                                              scale=100), "curve"))
        if sweeps:
            figures.append(_figure(line_chart(sweeps, title=f"{section.name}: {task}, test score by graph size",
                                              xlabel="size (nodes)", ylabel="test score (%)", scale=100, log2x=True),
                                   "ood"))
    return figures


def section_html(results: Path, section: Section) -> str:
    """A report section (relreason.studies.results_report.Section) as HTML: heading, blocks, then its figures."""
    parts = [f'<section class="report-section" id="{_anchor(section.name)}" data-kind="{section.kind}">']
    if section.title is not None:
        parts.append(f"<h2>{inline(section.title)}</h2>")
    for b in section.blocks:
        parts.append(f"<p>{inline(b.text)}</p>" if b.text is not None else table_html(b.rows, b.columns, section.kind))
    if section.kind == "table":
        figures = table_figures(results, section)
        if figures:
            parts.append(f'<div class="figures">{"".join(figures)}</div>')
        else:
            parts.append('<p class="note">No validation curves or size sweeps committed for these cells '
                         "(<code>relreason results</code> copies them from finished cells).</p>")
    parts.append("</section>")
    return "\n".join(parts)


def _anchor(name: str) -> str:
    return "s-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name)


def run_section(run: Path) -> tuple[str, str]:
    """(title, HTML) of a finished run directory's section: its scores, command, hardware and wall time, and
    its figures (validation curve and training loss from metrics.jsonl; the size sweep when saved)."""
    from relreason.train.export import read_results, result_table, run_scores  # CLI start-up: torch loads on use

    res = read_results(run)
    metric = resolve_metric(res.metric, res.lower_is_better, res.task)
    scale = 100.0 if metric.percent else 1.0
    unit = f"{metric.label}, {metric.direction}"
    title = f"run {run.name}: {res.model} on {res.task}"
    rows, columns = result_table(run_scores(res))
    facts = [{"what": k, "value": v} for k, v in [
        ("model", res.model),
        ("task", res.task), ("seed", str(res.seed)), ("recipe", res.recipe or "(python API)"),
        ("deviation from the paper's protocol", res.deviation or "none"),
        ("command", f"`{res.command}`" if res.command else "(python API)"),
        ("hardware", "; ".join(res.hardware or []) or "not recorded"),
        ("wall time", f"{duration(res.seconds)} (training, validations and the final test)"),
        ("training examples", f"{res.examples:,}"),
        ("best validation", "-" if res.best_val is None else f"{res.best_val * scale:.2f} at {res.best_examples:,} "
                                                             "examples"),
        ("code", ", ".join(code_label(c) for c in res.code) if res.code else "not recorded")]]
    parts = [f'<section class="report-section" id="{_anchor("run-" + run.name)}" data-kind="run">',
             f"<h2>{inline(title)}</h2>",
             f"<p>Out-of-distribution test ({inline(res.test_label or f'test, n={res.test_size}')}): "
             f"{escape(unit)}.</p>",
             table_html([{k: cell_text(v) for k, v in r.items()} for r in rows], columns, "run-scores"),
             table_html(facts, ["what", "value"], "run-facts")]
    vals = validations(read_metrics(RunDir(run).metrics)) if RunDir(run).metrics.is_file() else []
    figures = []
    if vals:
        figures.append(_figure(line_chart([Series(run.name, [(v.examples, v.score) for v in vals])],
                                          title=f"{run.name}: validation score", xlabel="training examples",
                                          ylabel=f"validation ({metric.label})", scale=scale), "curve"))
        losses = [(v.examples, v.loss) for v in vals if v.loss is not None]
        if losses:
            figures.append(_figure(line_chart([Series(run.name, losses)], title=f"{run.name}: training loss "
                                              "(last batch)", xlabel="training examples", ylabel="loss"), "loss"))
    if (run / SWEEP_FILE).is_file():
        figures.append(_figure(line_chart(_sweep_series(run.name, read_sweep(run)), title=f"{run.name}: test score "
                                          "by graph size", xlabel="size", ylabel=f"test ({metric.label})",
                                          scale=scale, log2x=True), "ood"))
    if figures:
        parts.append(f'<div class="figures">{"".join(figures)}</div>')
    else:
        parts.append('<p class="note">No validation recorded in metrics.jsonl.</p>')
    parts.append("</section>")
    return title, "\n".join(parts)


def run_sections(runs: list[Path]) -> list[tuple[str, str]]:
    """run_section of each run directory; a damaged one (a file that does not read back) becomes a
    section naming the file and what is wrong, and never stops the others. Raises RelreasonError when a
    folder is no run at all, or when every run named is damaged (there is nothing to show)."""
    parts, errors = [], []
    for run in runs:
        try:
            parts.append(run_section(run))
        except RelreasonError as e:
            if not RunDir(run).is_run():
                raise
            errors.append(e)
            title = f"run {escape_text(run.name)}: damaged"
            parts.append((title, f'<section class="report-section" id="{_anchor("run-" + run.name)}" data-kind="run">'
                                 f"<h2>{inline(title)}</h2><p>{escape(escape_text(e.message))}</p></section>"))
    if runs and len(errors) == len(runs):
        raise errors[0]
    return parts


def split_items(items: list[str]) -> tuple[list[str], list[Path]]:
    """`report`'s arguments as (table names, run directories): an existing path is a run directory, any
    other word must be a published table (relreason.studies.tables). Raises RelreasonError for neither."""
    tables, runs = [], []
    for item in items:
        if Path(item).exists():
            if not Path(item).is_dir():
                raise RelreasonError(f"{item} is not a directory", "give a run directory (runs/NAME) or a table name")
            runs.append(Path(item))
        elif item in TABLES:
            tables.append(item)
        else:
            raise RelreasonError(f"{item!r} is neither a published table nor an existing run directory",
                                 f"tables: {', '.join(TABLES.names())}; or give a run directory (runs/NAME)")
    return tables, runs


def page(items: list[str], results: Path = Path("results"), margin: float | None = None) -> tuple[str, dict]:
    """The page's HTML and what it holds ({"sections", "tables", "figures"}) for `items` (split_items; none:
    every table with results and the cells in progress, as RESULTS.md)."""
    tables, runs = split_items(items)
    run_parts = run_sections(runs)  # a folder that is no run fails before the tables are read
    sections: list[Section] = []
    if tables or not runs:
        sections = report_sections(results, margin, tables or None)
        if tables:
            shown = {s.name for s in sections if s.kind == "table"}
            missing = [t for t in tables if t not in shown]
            if missing:
                raise RelreasonError(f"table {missing[0]} has no results under {results}",
                                     f"run `relreason reproduce {missing[0]}`, then `relreason results`")
    body = [section_html(results, s) for s in sections] + [html for _, html in run_parts]
    toc = [(s.name, s.title) for s in sections if s.title] + [("run-" + r.name, t) for r, (t, _) in zip(runs, run_parts)]
    nav = "".join(f'<li><a href="#{_anchor(name)}">{inline(title)}</a></li>' for name, title in toc)
    intro = f"<p>{inline(INTRODUCTION)}</p>" if sections else ""
    text = "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">', "<title>relreason report</title>",
        f"<style>{STYLE}</style>", "</head>", "<body>", "<h1>relreason report</h1>",
        '<p class="note">Generated by <code>relreason report</code> from the same result files as RESULTS.md '
        "(and the run directories named); self-contained: no script, nothing fetched.</p>",
        intro, f"<nav><ul>{nav}</ul></nav>" if nav else "", *body, "</body>", "</html>", ""])
    counts = {"sections": len(sections) + len(runs), "tables": text.count("<table "), "figures": text.count("<figure ")}
    return text, counts


def write_page(items: list[str], out: Path, results: Path = Path("results"), margin: float | None = None) -> dict:
    """Writes the page (`page`) to `out` atomically; returns what it holds. Raises RelreasonError for a bad
    argument or an unwritable `out`."""
    out = Path(out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise RelreasonError(f"--out {out}: the page is HTML", "end --out with .html, e.g. --out report.html")
    if out.is_dir():
        raise RelreasonError(f"--out {out} is a directory", "give a file, e.g. --out report.html")
    text, counts = page(items, results, margin)
    try:
        with atomic_path(out) as tmp:
            tmp.write_text(text, encoding="utf-8")
    except OSError as e:
        raise write_error(out, e) from None
    return counts


__all__ = ["page", "write_page", "split_items", "inline", "table_html", "run_section", "section_html"]
