"""Exported bundles (relreason/train/export.py) hold the run's best model: evaluated again, a bundle
scores what the run stored in results.json, output by output (the text bundle: tests/train/test_text_workload.py)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.config import build_config
from relreason.train import run
from relreason.train.evaluation import evaluate_checkpoint
from relreason.train.export import export_bundle

runner = CliRunner()

TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=16", "train.eval_every_examples=4",
        "data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=6", "data.val_num=4",
        "data.test_num=8"]  # a run of a few seconds (tests/cli/cli_run.py), with 8 test graphs


def assert_same_scores(got: dict, stored: dict) -> None:
    """The bundle's test scores equal the run's stored ones: the mean and every output."""
    assert got["score"] == pytest.approx(stored["score"], abs=1e-6), (got["score"], stored["score"])
    assert set(got["outputs"]) == set(stored["outputs"])
    for name, score in stored["outputs"].items():
        assert got["outputs"][name] == pytest.approx(score, abs=1e-6), name


def test_a_nar_bundle_scores_what_its_run_stored(tmp_path):
    cfg = build_config("mpnn", "bellman_ford", overrides=[*TINY, f"data.data_dir={tmp_path / 'data'}"])
    res = run(cfg, out=tmp_path / "runs", name="r", show_progress=False)
    stored = json.loads((res.run_dir / "results.json").read_text())["test"]
    bundle = export_bundle(res.run_dir, tmp_path / "bundle")
    best, exported = (load_file(str(d / "model.safetensors")) for d in (res.run_dir / "best", bundle))
    assert best.keys() == exported.keys() and all(torch.equal(best[k], exported[k]) for k in best)
    assert stored["score"] > 0  # else equal scores would say little
    assert_same_scores(evaluate_checkpoint(bundle), stored)
    cli = runner.invoke(app, ["eval", str(bundle), "--json"])
    assert cli.exit_code == 0, cli.output
    assert_same_scores(json.loads(cli.stdout), stored)


def test_a_hub_folder_scores_what_its_run_stored_and_fine_tunes(tmp_path, capsys):
    """`export --hub`: the Hub's layout and metadata; `eval DIR`, README's loading guide (plain safetensors +
    torch + the registry) and `train --init DIR` all read it back."""
    import re
    from pathlib import Path

    import yaml

    from relreason.rundir import ValidationRow, read_metrics

    data = f"data.data_dir={tmp_path / 'data'}"
    cfg = build_config("mpnn", "bellman_ford", overrides=[*TINY, "train.train_examples=32", data])
    res = run(cfg, out=tmp_path / "runs", name="r", show_progress=False)
    stored = json.loads((res.run_dir / "results.json").read_text())
    hub = tmp_path / "hub"
    cli = runner.invoke(app, ["export", str(res.run_dir), "--hub", str(hub)])
    assert cli.exit_code == 0, cli.output
    assert sorted(p.name for p in hub.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    card = (hub / "README.md").read_text()
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["library_name"] == "relreason" and meta["datasets"] == ["clrs30", "bellman_ford"]
    assert set(meta["tags"]) == {"neural-algorithmic-reasoning", "clrs", "mpnn", "bellman_ford"}
    (result,) = meta["model-index"][0]["results"]
    assert result["metrics"][0]["type"] == "clrs" == meta["metrics"][0]
    assert result["metrics"][0]["value"] == round(100 * stored["test"]["score"], 4)
    assert "**Protocol:** recipe `default`" in card and stored["deviation"] in card
    assert "It needs no plugin" in card
    # the folder evaluates to the run's score: through the CLI, and through README's guide
    cli = runner.invoke(app, ["eval", str(hub), "--json"])
    assert cli.exit_code == 0, cli.output
    assert stored["test"]["score"] > 0
    assert_same_scores(json.loads(cli.stdout), stored["test"])
    readme = (Path(__file__).resolve().parents[2] / "docs" / "export.md").read_text()
    guide = re.search(r"<!-- loading-guide[^>]*-->\n```python\n(.*?)```", readme, re.S).group(1)
    guide, n = re.subn(r'^folder = "[^"]*"', f"folder = {str(hub)!r}", guide, flags=re.M)
    assert n == 1
    scope: dict = {}
    exec(compile(guide, "docs/export.md loading guide", "exec"), scope)
    assert_same_scores(scope["scores"], stored["test"])
    assert "mpnn on bellman_ford: " in capsys.readouterr().out
    # fine-tuning: the new run's first validation (before any step) scores the exported weights
    args = ["train", "mpnn", "bellman_ford", "--out", str(tmp_path / "runs"), "--init", str(hub)]
    sets = [x for s in [*TINY, "train.train_examples=4", data] for x in ("--set", s)]
    cli = runner.invoke(app, [*args, "--name", "ft", *sets])
    assert cli.exit_code == 0, cli.output
    first = [r for r in read_metrics(tmp_path / "runs" / "ft" / "metrics.jsonl") if isinstance(r, ValidationRow)]
    fresh = [r for r in read_metrics(res.run_dir / "metrics.jsonl") if isinstance(r, ValidationRow)]
    assert first[0].examples == 0 and first[0].score == stored["best_val"] != fresh[0].score
    ft = json.loads((tmp_path / "runs" / "ft" / "results.json").read_text())
    assert ft["config"]["train"]["init"] == str(hub.resolve()) and f"train.init={hub.resolve()}" in ft["deviation"]
    # what does not fit is one line, before anything trains
    for extra, message in ((["--set", "model.hidden=16"], "shape mismatch in ['processor."),
                           (["--init", str(tmp_path / "none")], "no such directory")):
        cli = runner.invoke(app, [*args, "--name", "bad", *sets, *extra])
        assert cli.exit_code == 1 and message in cli.output and "Traceback" not in cli.output, cli.output
        assert cli.output.startswith(f"Error: --init {hub if 'hidden' in extra[1] else tmp_path / 'none'}")
    cli = runner.invoke(app, ["train", "rt", "bellman_ford", "--init", str(hub), "--out", str(tmp_path / "runs")])
    assert cli.exit_code == 1 and "it holds a mpnn model, this run trains rt" in cli.output
    cli = runner.invoke(app, ["export", str(res.run_dir), "--hub", str(tmp_path / "h2"), "--out", str(tmp_path / "o")])
    assert cli.exit_code == 1 and "--hub does not go with --out" in cli.output
