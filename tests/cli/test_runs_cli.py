"""`relreason runs | compare | plot` through the installed console script, in a subprocess, on
synthetic run folders: outputs, exit codes and every failure path."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_runs import dead_pid, live_lock, make_ablation, make_run

# the console script pip installs beside the interpreter (`python -m relreason` does not exist)
SCRIPT = Path(sys.executable).with_name("relreason")
ENTRY = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "relreason.cli.main"]
LONG = "rt-bellman_ford-s0-20261121-101500-a-deliberately-long-run-name-that-a-terminal-would-cut"


def relreason(*args, cwd=None, env=None):
    env = {**os.environ, "COLUMNS": "80", **(env or {})}
    return subprocess.run([*ENTRY, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def fails(res, message):
    assert res.returncode == 1, res.stdout + res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert len([x for x in res.stderr.splitlines() if x.startswith("Error:")]) == 1


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli") / "runs"
    make_run(root, "mpnn-bfs-s0", seed=0, test=0.5, mtime=1_000)
    make_run(root, "mpnn-bfs-s1", seed=1, test=0.7, mtime=2_000)
    make_run(root, LONG, model="rt", task="bfs", test=0.9, mtime=3_000)
    make_run(root, "rt-bfs-s1-running", model="rt", task="bfs", seed=1, finished=False, lock=live_lock())
    make_run(root, "rt-bfs-s2-killed", model="rt", task="bfs", seed=2, finished=False,
             lock={**live_lock(), "pid": dead_pid()}, mtime=500)
    return root


def test_runs_lists_every_run_newest_first_with_full_names(runs_dir):
    res = relreason("runs", runs_dir)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert any(LONG in line for line in lines)  # piped: never cut to the 80 columns
    order = [next(i for i, line in enumerate(lines) if name in line)
             for name in ("rt-bfs-s1-running", LONG, "mpnn-bfs-s1", "mpnn-bfs-s0", "rt-bfs-s2-killed")]
    assert order == sorted(order)
    row = next(line for line in lines if "rt-bfs-s1-running" in line)
    assert "running" in row
    assert "interrupted" in next(line for line in lines if "killed" in line)
    assert "90.00" in next(line for line in lines if LONG in line)


def test_runs_json(runs_dir):
    res = relreason("runs", runs_dir, "--json")
    assert res.returncode == 0, res.stderr
    runs = {r["name"]: r for r in json.loads(res.stdout)["runs"]}
    assert runs["mpnn-bfs-s1"]["test"] == 0.7 and runs["mpnn-bfs-s1"]["status"] == "finished"
    assert runs["rt-bfs-s1-running"]["status"] == "running"
    assert runs["rt-bfs-s1-running"]["examples"] == 480 and runs["rt-bfs-s1-running"]["metric"] == "clrs"


def test_compare_aggregates_seeds_with_labelled_metric(runs_dir):
    res = relreason("compare", "--runs", runs_dir)
    assert res.returncode == 0, res.stderr
    assert "accuracy/F1 %, higher is better" in res.stdout and "sample std" in res.stdout
    mpnn = next(line for line in res.stdout.splitlines() if "mpnn" in line)
    assert "60.00 ± 14.14" in mpnn  # sample std (ddof 1) of 0.5 and 0.7
    assert "unfinished" in res.stderr  # the running and killed runs have no test yet


def test_compare_formats(runs_dir):
    md = relreason("compare", "--runs", runs_dir, "--group-by", "task", "--format", "md")
    assert md.returncode == 0 and "| bfs |" in md.stdout and "±" in md.stdout
    rows = list(csv.DictReader(io.StringIO(relreason("compare", "--runs", runs_dir, "--format", "csv").stdout)))
    mpnn = next(r for r in rows if r["model"] == "mpnn")
    assert float(mpnn["OOD test (accuracy/F1 %, higher is better) mean"]) == pytest.approx(60.0)
    data = json.loads(relreason("compare", runs_dir / "mpnn-bfs-s0", runs_dir / "mpnn-bfs-s1", "--json").stdout)
    (group,) = data["groups"]
    assert group["test"]["mean"] == pytest.approx(0.6) and group["test"]["std"] == pytest.approx(0.1414214)  # ddof 1
    latex = relreason("compare", "--runs", runs_dir, "--format", "latex")
    assert latex.returncode == 0 and r"\begin{tabular}" in latex.stdout
    against = relreason("compare", "--runs", runs_dir, "--group-by", "task", "--against", "mpnn", "--format", "md")
    assert against.returncode == 0, against.stderr
    assert "− mpnn |" in against.stdout and "Welch's 95% interval" in against.stdout


@pytest.mark.parametrize("args, message", [
    (["compare", "--runs", "{runs}", "--group-by", "colour"], "unknown --group-by 'colour'"),
    (["compare", "--runs", "{runs}", "--format", "xlsx"], "unknown format 'xlsx'"),
    (["compare", "--runs", "{runs}", "--format", "md", "--json"], "two formats"),
    (["compare", "--runs", "{runs}", "--group-by", "task", "--against", "mpnn", "--margin", "-1"],
     "--margin -1.0 must be a positive number"),
    (["compare", "--runs", "{runs}", "--against", "mpnn"], "--against compares the columns of one task"),
    (["compare", "--runs", "{runs}", "--group-by", "task", "--against", "gcn"], "--against 'gcn' is not a column"),
    (["compare"], "nothing to compare"),
    (["compare", "{runs}"], "is not a run directory"),
    (["compare", "{runs}/mpnn-bfs-s0/best"], "is not a run directory"),
    (["runs", "{empty}"], "no runs found"),
    (["runs", "{runs}/nowhere"], "is not a directory"),
    (["plot", "{runs}/nowhere"], "is not a run directory"),
    (["plot"], "nothing to plot"),
    (["plot", "{runs}/mpnn-bfs-s0", "--out", "{empty}/x.jpeg"], "unknown figure format"),
])
def test_one_line_errors(runs_dir, tmp_path, args, message):
    res = relreason(*[a.format(runs=runs_dir, empty=tmp_path) for a in args])
    fails(res, message)
    assert not list(tmp_path.iterdir())


def test_compare_refuses_to_average_different_metrics(tmp_path):
    make_run(tmp_path, "a", seed=0, metric="clrs")
    make_run(tmp_path, "b", seed=1, metric="text_clrs")
    fails(relreason("compare", "--runs", tmp_path), "different metrics")


def test_results_without_a_metric_key_take_the_task_registry_metric(tmp_path):
    make_run(tmp_path, "lob", task="lobster", metric=None, test=0.25, vals=(0.9, 0.3))
    res = relreason("compare", "--runs", tmp_path)
    assert res.returncode == 0, res.stderr
    assert "relative loss, lower is better" in res.stdout and "0.2500" in res.stdout


def test_plot_curves_default_and_explicit_out(runs_dir, tmp_path, matplotlib_installed):
    res = relreason("plot", runs_dir / "mpnn-bfs-s0", runs_dir / "rt-bfs-s1-running")
    assert res.returncode == 0, res.stderr
    default = runs_dir / "mpnn-bfs-s0" / "curves.png"
    assert res.stdout.strip() == str(default) and default.read_bytes().startswith(b"\x89PNG")
    res = relreason("plot", runs_dir / "mpnn-bfs-s0", "--out", tmp_path / "c.svg")
    assert res.returncode == 0 and b"<svg" in (tmp_path / "c.svg").read_bytes()[:2000]


def test_plot_every_run_of_a_folder(tmp_path, matplotlib_installed):
    make_run(tmp_path, "a")
    make_run(tmp_path, "b", seed=1)
    res = relreason("plot", "--runs", tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")


def test_plot_ablation_bars(tmp_path, matplotlib_installed):
    abl = make_ablation(tmp_path, "no-edge-updates", {("rt", "bfs"): [0.8, 0.9], ("rt no edges", "bfs"): [0.5, 0.6]})
    res = relreason("plot", abl)
    assert res.returncode == 0, res.stderr
    assert (abl / "bars.png").read_bytes().startswith(b"\x89PNG")
    fails(relreason("plot", abl, abl / "rt" / "bfs" / "seed0" / "run"), "plot it on its own")


def test_plot_without_matplotlib(tmp_path, runs_dir):
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    res = relreason("plot", runs_dir / "mpnn-bfs-s0", "--out", tmp_path / "x.png",
                    env={"PYTHONPATH": str(shadow.parent)})
    fails(res, "plotting needs matplotlib: pip install 'relreason[plot]'")
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("command", ["runs", "compare", "plot"])
def test_help_ends_with_examples(command):
    res = relreason(command, "--help", env={"COLUMNS": "200"})
    assert res.returncode == 0
    assert "Examples:" in res.stdout and f"relreason {command} " in res.stdout.split("Examples:")[1]
