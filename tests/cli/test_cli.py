"""Every command through the real entry point (`python -m relreason`), on tiny settings: generate,
show, train, eval (a run, the newest run, --hints, --json), export (a bundle, and the results in every
format, parsed), ablate (twice: the second reads the cells back), runs, compare, plot, list --json,
--version, and help that tells the truth (defaults shown, flags without a type, -h everywhere).

One tiny training run (the `trained` fixture of conftest.py) serves the commands that read runs.
Files are checked to follow the user's umask (0o002: group-writable, which a fixed 0o755 breaks)."""

from __future__ import annotations

import csv
import io
import json
import stat
from pathlib import Path

import pytest
from cli_run import UMASK, relreason, succeeds, tiny_sets

from relreason.runtime import cpu_kernels


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_generate_and_show(tmp_path):
    res = relreason("generate", "bfs", "--size", "6", "--num", "3", "--seed", "1", "--out", tmp_path, umask=UMASK)
    path = Path(succeeds(res).strip())
    assert path == tmp_path / "bfs" / "custom_n6_s1_k3.safetensors" and path.is_file()
    assert mode(path) == 0o666 & ~UMASK and mode(path.parent) == 0o777 & ~UMASK
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temporaries left
    summary = json.loads(succeeds(relreason("show", path, "--json")))
    assert (summary["algorithm"], summary["size"], summary["num"], summary["seed"]) == ("bfs", 6, 3, 1)
    text = succeeds(relreason("show", path, "--index", "2"))
    assert "reach_h" in text and "pi_h" in text and "example 2" in text


def test_train_writes_a_run_with_the_users_umask(trained):
    root, result, res = trained
    run = Path(result["run"])
    assert run == root / "runs" / "tiny" and result["examples"] == 8
    assert 0.0 <= result["test"]["score"] <= 1.0 and "test, n=6, 4 samples" == result["test_label"]
    assert "note: recipe quick" not in res.stderr  # --json: only the JSON on stdout, notes on stderr
    for d in (run / "best", run / "last"):
        assert mode(d) == 0o777 & ~UMASK, d
        for f in d.iterdir():
            assert mode(f) == 0o666 & ~UMASK, f
    assert mode(run / "results.json") == 0o666 & ~UMASK
    assert not [p for p in run.rglob(".*") if p.name != ".lock"]  # no temporaries left


def test_eval_a_run_the_newest_run_and_hints(trained, trained_eval):
    root, result, _ = trained
    stored = json.loads((Path(result["run"]) / "results.json").read_text())
    named = trained_eval  # `eval RUN --json`
    assert named["score"] == pytest.approx(stored["test"]["score"])  # the same best checkpoint, the same split
    assert named["hints"] == {}
    newest = json.loads(succeeds(relreason("eval", "--runs", root / "runs", "--json", "--hints")))
    assert newest["checkpoint"] == str(Path(result["run"]) / "best")
    assert newest["score"] == pytest.approx(stored["test"]["score"]) and set(newest["hints"]) == {"reach_h", "pi_h"}
    table = succeeds(relreason("eval", result["run"], "--ood", "7", "--num", "3"))
    assert "n=7, 3 samples" in table and "output.pi" in table


def test_export_results_in_every_format(trained):
    _, result, _ = trained
    run = result["run"]
    test = json.loads((Path(run) / "results.json").read_text())["test"]
    score, pi = test["score"], test["outputs"]["pi"]
    rows = list(csv.reader(io.StringIO(succeeds(relreason("export", run, "--results", "csv")))))
    assert rows[0] == ["feature", "score", "measure"]
    got = {r[0]: float(r[1]) for r in rows[1:]}
    measures = {r[0]: r[2] for r in rows[1:]}  # bfs: pi a pointer, reach_h a mask, pi_h a pointer hint
    assert measures["output.pi"] == "accuracy ↑" and measures["score (mean of outputs)"] == "acc/F1 ↑"  # a fraction
    assert got["output.pi"] == pytest.approx(pi, abs=5e-5) and got["score (mean of outputs)"] == pytest.approx(score, abs=5e-5)
    parsed = json.loads(succeeds(relreason("export", run, "--results", "json")))
    assert {r["feature"]: r["score"] for r in parsed}["output.pi"] == pytest.approx(pi)
    text = {fmt: succeeds(relreason("export", run, "--results", fmt)) for fmt in ("md", "latex")}
    for fmt in ("md", "latex"):
        assert f"{score:.4f}" in text[fmt] and "output.pi" in text[fmt].replace("\\_", "_")
    assert "\\begin{tabular}" in text["latex"]


def test_export_bundle_then_eval_it(trained, tmp_path):
    _, result, _ = trained
    bundle = tmp_path / "bundle"
    assert Path(succeeds(relreason("export", result["run"], "--out", bundle, umask=UMASK)).strip()) == bundle
    assert sorted(p.name for p in bundle.iterdir()) == ["MODEL_CARD.md", "config.json", "model.safetensors"]
    assert all(mode(p) == 0o666 & ~UMASK for p in bundle.iterdir()) and mode(bundle) == 0o777 & ~UMASK
    assert "relreason eval THIS_DIRECTORY" in (bundle / "MODEL_CARD.md").read_text()
    again = json.loads(succeeds(relreason("eval", bundle, "--json")))
    assert again["score"] == pytest.approx(result["test"]["score"])


def test_runs_compare_plot(trained, tmp_path):
    root, result, _ = trained
    listed = json.loads(succeeds(relreason("runs", root / "runs", "--json")))
    assert [r["name"] for r in listed["runs"]] == ["tiny"]
    table = succeeds(relreason("compare", result["run"], "--format", "csv"))
    header, *rows = list(csv.reader(io.StringIO(table)))
    assert rows and rows[0][header.index("model")] == "mpnn" and rows[0][header.index("task")] == "bfs"
    figure = tmp_path / "curves.svg"
    assert Path(succeeds(relreason("plot", result["run"], "--out", figure)).strip()) == figure
    assert figure.read_text().lstrip().startswith("<?xml")


def test_ablate_twice_reads_the_cells_back(tmp_path):
    args = ["ablate", "single-layer", "--tasks", "bfs", "--seeds", "1", "--recipe", "quick",
            *tiny_sets(tmp_path / "data"), "--out", tmp_path / "abl", "--json"]
    first = relreason(*args)
    cells = json.loads(succeeds(first))["cells"]
    assert [c["variant"] for c in cells] == ["rt", "rt 1 layer"]
    assert first.stderr.count("single-layer: ") == 3  # its cost before it trains, then one line per cell trained
    assert f"single-layer: 2 cell(s) to train on cpu ({cpu_kernels()} kernels); " in first.stderr
    second = relreason(*args)
    assert json.loads(succeeds(second))["cells"] == cells
    assert "single-layer: " not in second.stderr  # nothing trained again
    assert (tmp_path / "abl" / "single-layer" / "results.csv").is_file()
    run = json.loads((tmp_path / "abl" / "single-layer" / "rt" / "bfs" / "seed0" / "run" / "results.json").read_text())
    assert run["command"].startswith("relreason ablate single-layer --tasks bfs")  # what trained the cell


@pytest.mark.parametrize("what", ["algorithms", "models", "tasks", "recipes", "ablations"])
def test_every_list_as_json(what):
    rows = json.loads(succeeds(relreason("list", what, "--json")))[what]
    names = {r["name"] for r in rows}
    assert len(names) == len(rows) > 0
    expected = {"algorithms": "bellman_ford", "models": "rt", "tasks": "core8", "recipes": "quick",
                "ablations": "no-edges"}[what]
    assert expected in names


def test_list_recipes_says_what_each_recipe_changes():
    text = succeeds(relreason("list", "recipes"))
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip("│┃ ").startswith("rt "))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("│ " + " " * 16))
    row = " ".join(lines[start:end])  # the rt row: its name line and the lines its prose wraps onto
    assert "relreason train rt bellman_ford --recipe rt" in lines[start]  # names and commands never wrap
    assert "train.lr=0.00025" in row and "train.batch_size=4" in row  # keys and values, untruncated
    assert max(len(line) for line in lines) < 400  # prose wraps, also when piped
    recipes = {r["name"]: r for r in json.loads(succeeds(relreason("list", "recipes", "--json")))["recipes"]}
    quick = recipes["quick"]
    assert quick["inherit"] == "paper" and quick["sets"]["train.train_examples"] > 0
    assert quick["deviation"] and set(quick.get("models", {})) <= {m["name"] for m in
                                                                 json.loads(succeeds(relreason("list", "models", "--json")))["models"]}


def test_version_and_bare_command():
    from relreason import __version__

    assert succeeds(relreason("--version")).strip() == f"relreason {__version__}"
    assert "Commands" in succeeds(relreason())


def test_help_tells_the_truth():
    """-h is --help everywhere; flags show no type (typer 0.29 printed `--help <bool>`); every option
    that takes a value shows its default (typer's `[default: ...]` or the help's own words)."""
    import typer.main

    from relreason.cli.main import app

    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        for param in command.params:
            if param.param_type_name != "option" or getattr(param, "is_flag", False):
                continue
            shown = isinstance(param.show_default, str) or (param.show_default and param.default is not None)
            assert shown or "default" in (param.help or "").lower(), f"{name} {param.opts[0]} shows no default"
    for args in (["-h"], ["train", "-h"], ["eval", "--help"]):
        text = succeeds(relreason(*args))
        assert "Usage: relreason" in text and "<bool>" not in text and "-h" in text
    assert "[default: runs]" in succeeds(relreason("eval", "-h"))


def test_the_command_list_reads_as_prose():
    """`relreason --help` gave each command its docstring's first paragraph with the docstring's own line breaks,
    so at 80 columns the summaries of ablate, reproduce and results broke mid-sentence (issue 31)."""
    import inspect

    import typer.main

    from relreason.cli.main import app

    for name, command in typer.main.get_command(app).commands.items():
        first = inspect.cleandoc(command.callback.__doc__).split("\n\n")[0]
        assert command.short_help == " ".join(first.split()), name
