"""`relreason report` (relreason/studies/html_report.py): one self-contained HTML page whose tables are
RESULTS.md's own rows, with the figures of the committed curves and sweeps, checked in a real headless
Chromium (Debian's `chromium`; scripts/setup.sh installs it in CI): no console error, every table and
figure in the rendered DOM, a screenshot that is not blank."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fake_runs import make_run, results_json
from relreason.cli.main import app
from relreason.studies.cells import plan_cells
from relreason.studies.html_report import write_page
from relreason.studies.results import CURVES, SWEEPS, collect_results
from relreason.studies.results_report import report_sections, write_report
from relreason.studies.tables import TABLES

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def _results(tmp_path: Path) -> Path:
    """Committed result files of ibarz2022: 2 seeds on bellman_ford with curves, one with a size sweep and its
    model selection."""
    rep, results = tmp_path / "rep", tmp_path / "results"
    for cell, score in zip(plan_cells(TABLES.get("ibarz2022"), ["bellman_ford"], (0, 1), None, rep, []), (0.9, 0.95)):
        cell.run_dir.mkdir(parents=True)
        cell.run_dir.joinpath("results.json").write_text(results_json(
            cell.config.to_dict(), score, seconds=3600.0, best_val=0.99, hardware=["Test CPU"], command="c"))
    # the second seed's run was swept over sizes (`eval RUN --ood 16,32,64 --save RUN`): collected beside it
    cell.run_dir.joinpath("ood_sweep.json").write_text(json.dumps({
        "kind": "ood_sweep", "schema_version": 1, "model": "triplet_gmpnn", "task": "bellman_ford", "metric": "clrs",
        "rows": [{"graph": "clrs", "size": n, "score": s} for n, s in ((16, 0.99), (32, 0.97), (64, 0.95))]}))
    collect_results(rep, results)
    assert len(list((results / SWEEPS).rglob("seed*.json"))) == 1
    for i, path in enumerate(sorted((results / "cells").rglob("seed*.json"))):
        rel = path.relative_to(results / "cells")
        (results / CURVES / rel).parent.mkdir(parents=True, exist_ok=True)
        (results / CURVES / rel).write_text(json.dumps({"code": None, "validations": [
            {"examples": 1600 * k, "score": min(1.0, 0.2 * k + 0.05 * i), "loss": 1.0 / (k + 1)} for k in range(6)]}))
    (results / "selection" / rel).parent.mkdir(parents=True, exist_ok=True)  # how its checkpoint was chosen
    (results / "selection" / rel).write_text(json.dumps({
        "validations": 6, "best_val": 0.99, "at_best": 1, "first_best_examples": 6400, "last_best_examples": 6400,
        "selected_test": 0.95, "last_test": 0.94}))
    return results


class _Tables(HTMLParser):
    """The text of every <td>/<th> cell, table by table."""

    def __init__(self):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _markdown_tables(md: str) -> list[list[list[str]]]:
    """The cells of every Markdown table of RESULTS.md, inline marks removed (the separator rows dropped)."""
    tables, current = [], None
    for line in md.splitlines():
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            if not re.fullmatch(r"\|(---\|)+", line):
                current.append([re.sub(r"\*\*|`", "", c.strip()) for c in line.strip("|").split(" | ")])
        else:
            current = None
    return tables


def test_the_page_shows_results_mds_own_rows_and_the_committed_figures(tmp_path):
    results = _results(tmp_path)
    write_report(results, tmp_path / "RESULTS.md")
    counts = write_page([], tmp_path / "report.html", results)
    html = (tmp_path / "report.html").read_text()
    parser = _Tables()
    parser.feed(html)
    # one source of truth: every table of RESULTS.md, cell for cell, and no other table
    assert [[[c.strip() for c in row] for row in t] for t in parser.tables] == \
        _markdown_tables((tmp_path / "RESULTS.md").read_text())
    assert counts == {"sections": 2, "tables": 4, "figures": 2}  # the summary, then the table
    assert html.count('data-kind="curve"') == 1 and html.count('data-kind="ood"') == 1
    assert 'data-series="2"' in html  # the curve chart has a line per seed
    # self-contained: nothing to fetch, no script
    assert not re.search(r"<script|<link|<img|\bsrc=|url\(|@import|https?://(?!www\.w3\.org/2000/svg)", html)
    # only the tables asked for
    sections = report_sections(results, None, ["ibarz2022"])
    assert [s.name for s in sections] == ["ibarz2022"]


def test_a_run_directory_gets_its_scores_record_and_figures(tmp_path):
    """A run directory given beside a table: its test table, command, hardware and wall time, the validation
    curve and training loss of its metrics.jsonl, and its saved size sweep; one without a sweep skips it."""
    results = _results(tmp_path)
    swept, plain = make_run(tmp_path / "runs", "swept"), make_run(tmp_path / "runs", "plain", seed=1)
    (swept / "ood_sweep.json").write_text(json.dumps({
        "kind": "ood_sweep", "schema_version": 1, "model": "mpnn", "task": "bfs", "metric": "clrs",
        "rows": [{"graph": g, "size": n, "score": 0.5} for g in ("clrs", "er") for n in (16, 32)]}))
    counts = write_page(["ibarz2022", str(swept), str(plain)], tmp_path / "r.html", results)
    html = (tmp_path / "r.html").read_text()
    assert counts == {"sections": 3, "tables": 3 + 2 * 2, "figures": 2 + 3 + 2}
    assert html.count('data-kind="ood"') == 2 and 'data-series="2"' in html.split('id="s-run-swept"')[1]
    run_part = html.split('id="s-run-plain"')[1]
    assert "<code>relreason train mpnn bfs</code>" in run_part and 'data-kind="ood"' not in run_part


def test_report_errors_are_one_line(tmp_path):
    results = _results(tmp_path)
    cases = [(["nosuchtable"], "report.html", "is neither a published table nor an existing run directory"),
             (["clrs30"], "report.html", "table clrs30 has no results under"),
             ([], "report.txt", "the page is HTML"),
             ([str(results / "cells")], "report.html", "has no results.json")]
    for items, out, message in cases:
        res = CliRunner().invoke(app, ["report", *items, "--results", str(results), "--out", str(tmp_path / out)])
        assert res.exit_code == 1 and message in res.output and "Traceback" not in res.output, res.output
        assert res.output.startswith("Error:")
    assert not (tmp_path / "report.html").exists()


def _png_colours(data: bytes) -> int:
    """How many distinct RGB(A) colours a PNG holds (8-bit RGB or RGBA, non-interlaced: Chromium's screenshots),
    decoded with zlib and the five PNG row filters."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and colour in (2, 6) and not interlace
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * bpp
    prev, seen = bytearray(stride), set()
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        seen.update(bytes(line[i:i + bpp]) for i in range(0, stride, bpp))
        prev = line
    return len(seen)


def _chromium(page: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr",
                           "--v=0", *args, page.as_uri()], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium; CI installs it)")
def test_the_page_renders_in_a_headless_browser(tmp_path):
    results = _results(tmp_path)
    counts = write_page([], tmp_path / "report.html", results)
    dom = _chromium(tmp_path / "report.html", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "CONSOLE" not in dom.stderr, [x for x in dom.stderr.splitlines() if "CONSOLE" in x]
    assert dom.stdout.count("<table ") == counts["tables"] == 4
    assert dom.stdout.count("<figure ") == counts["figures"] == 2 and dom.stdout.count("<svg ") == 2
    assert "ibarz2022: Triplet-GMPNN" in dom.stdout
    shot = _chromium(tmp_path / "report.html", f"--screenshot={tmp_path / 'page.png'}", "--window-size=800,900",
                     "--hide-scrollbars")
    assert shot.returncode == 0 and "CONSOLE" not in shot.stderr, shot.stderr[-2000:]
    assert _png_colours((tmp_path / "page.png").read_bytes()) > 50  # text, tables and coloured lines; blank: 1
