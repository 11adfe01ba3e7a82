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
