"""The guards of `relreason.train.run` that protect a user's finished run or hours of training: a new run
never overwrites an old one, a resume never continues something other than what was trained (nothing
to resume, a smaller budget, another configuration), a run killed before its first checkpoint starts
afresh, a non-finite loss stops the run at once, and a second Ctrl-C stops without saving."""

from __future__ import annotations

import json
import math
import os
import signal
from pathlib import Path

import pytest
from safetensors.numpy import load_file

from relreason.config import build_config
from relreason.errors import RelreasonError
from relreason.train import run
from relreason.train.workloads import NarWorkload

TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=32", "train.eval_every_examples=16",
        "data.train_num=16", "data.train_size=5", "data.val_size=5", "data.test_size=6", "data.val_num=4",
        "data.test_num=4"]


def tiny_config(tmp_path: Path, *extra: str):
    return build_config("mpnn", "bfs", None, TINY + [f"data.data_dir={tmp_path / 'data'}", *extra])


def snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run directory, by path (the lock file aside): what a refused call must not touch."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """(tmp, run directory) of a finished tiny run, trained once for the module (tests copy it)."""
    tmp = tmp_path_factory.mktemp("guards")
    run(tiny_config(tmp), out=tmp / "runs", name="r", show_progress=False, log=lambda m: None)
    return tmp, tmp / "runs" / "r"


def copy_of(finished, tmp_path) -> Path:
    """A copy of the finished run under tmp_path/runs/r (its config keeps the module's data directory)."""
    import shutil

    dst = tmp_path / "runs" / "r"
    shutil.copytree(finished[1], dst)
    return dst


def test_training_into_an_existing_run_without_resume_is_refused(finished, tmp_path):
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    with pytest.raises(RelreasonError, match="already exists.*") as e:
        run(tiny_config(finished[0]), out=tmp_path / "runs", name="r", show_progress=False)
    assert "--resume" in e.value.hint
    assert snapshot(run_dir) == before  # the finished run is untouched


def test_resume_with_nothing_to_resume_is_refused(tmp_path):
    from relreason.train.resume import resume_config

    with pytest.raises(RelreasonError, match="nothing to resume"):
        run(tiny_config(tmp_path), out=tmp_path / "runs", name="never", resume=True, show_progress=False)
    with pytest.raises(RelreasonError, match="nothing to resume"):  # the CLI's path (train --resume)
        resume_config(tmp_path / "runs" / "never", [])
    assert not (tmp_path / "runs" / "never" / "last").exists()


def test_resuming_with_a_budget_below_what_was_trained_is_refused(finished, tmp_path):
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    smaller = tiny_config(finished[0], "train.train_examples=16")  # the run trained 32
    with pytest.raises(RelreasonError, match="trained 32 examples, more than train.train_examples=16"):
        run(smaller, out=tmp_path / "runs", name="r", resume=True, show_progress=False)
    assert snapshot(run_dir) == before


def test_run_resume_with_a_changed_configuration_is_refused(finished, tmp_path):
    """`run(resume=True)` checks the config it is given against the stored one itself (callers other than
    the CLI do not go through resume_config); only RESUMABLE_KEYS may differ."""
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    with pytest.raises(RelreasonError, match=r"different configuration \(model.hidden, train.lr differ\)"):
        run(tiny_config(finished[0], "train.lr=0.5", "model.hidden=16"), out=tmp_path / "runs", name="r", resume=True,
            show_progress=False)
    assert snapshot(run_dir) == before
    longer = run(tiny_config(finished[0], "train.train_examples=48"), out=tmp_path / "runs", name="r", resume=True,
                 show_progress=False, log=lambda m: None)
    assert longer.examples == 48  # the budget may grow


def test_a_run_killed_before_its_first_checkpoint_starts_afresh(tmp_path):
    """A kill during the very first validation leaves config.json and perhaps a metrics line but no
    checkpoint: nothing to resume, so the same command starts the run again (instead of refusing an
    existing directory) and drops the dead run's lines."""
    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"config": {}}))
    stale = {"event": "val", "step": 0, "examples": 0, "loss": None, "score": -1.0, "outputs": {}, "hints": {}}
    (run_dir / "metrics.jsonl").write_text(json.dumps(stale) + "\n" + '{"event": "val", "exam')
    res = run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False, log=lambda m: None)
    assert res.examples == 32
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["event"] for r in records] == ["val", "val", "val", "test"]  # at 0, 16, 32: no leftover
    assert all(r.get("score") != -1.0 for r in records)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_non_finite_loss_stops_the_run_before_the_update(tmp_path, monkeypatch, value):
    original = NarWorkload.loss

    def loss(self, module, part, step):
        out, terms = original(self, module, part, step)
        return (out * value if step == 5 else out), terms

    monkeypatch.setattr(NarWorkload, "loss", loss)
    with pytest.raises(RelreasonError, match=f"the loss became {value} at step 5") as e:
        run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False, log=lambda m: None)
    assert "train.lr" in e.value.hint
    last = tmp_path / "runs" / "r" / "last"
    assert json.loads((last / "trainer_state.json").read_text())["examples"] == 16  # nothing saved past it
    for k, w in load_file(str(last / "model.safetensors")).items():
        assert w.dtype.kind != "f" or (w == w).all(), k  # no NaN weight was ever written


def test_a_second_ctrl_c_stops_at_once_without_saving(tmp_path, monkeypatch):
    """One Ctrl-C: the step finishes and `last/` is saved there (tests/train/test_distributed.py). A
    second one stops mid-step: that step is half done, so `last/` stays at the previous checkpoint."""
    from relreason.train.stop_requests import StopRequests

    monkeypatch.setattr(StopRequests, "PATIENCE", 0.0)  # "a second Ctrl-C" without waiting 2 s
    original = NarWorkload.loss

    def loss(self, module, part, step):
        if step == 5:  # at 20 examples; the last checkpoint is at 16
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, module, part, step)

    monkeypatch.setattr(NarWorkload, "loss", loss)
    logged: list[str] = []
    res = run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False, log=logged.append)
    assert res.interrupted and not res.test
    assert any("stopped without saving" in m for m in logged), logged
    run_dir = tmp_path / "runs" / "r"
    assert json.loads((run_dir / "last" / "trainer_state.json").read_text())["examples"] == 16
    assert not (run_dir / "results.json").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are put back


# -- nothing read back is trusted unchecked (issue 32) ---------------------------------------------


def resume_copy(finished, tmp_path, **options):
    """Resumes the copy of the finished run under tmp_path (its own configuration)."""
    return run(tiny_config(finished[0], *options.pop("extra", ())), out=tmp_path / "runs", name="r", resume=True,
               show_progress=False, log=lambda m: None, **options)


@pytest.mark.parametrize("field, value, problem", [("examples", -5, "must be at least 0"),
                                                    ("best_val", "x", "must be a number or null"),
                                                    ("best_examples", 999, "is 999, past the 32 examples")])
def test_a_damaged_trainer_state_is_refused_and_loses_nothing(finished, tmp_path, field, value, problem):
    run_dir = copy_of(finished, tmp_path)
    state = run_dir / "last" / "trainer_state.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), field: value}))
    before = snapshot(run_dir)
    with pytest.raises(RelreasonError, match=f"trainer_state.json: field '{field}' {problem}"):
        resume_copy(finished, tmp_path)
    assert snapshot(run_dir) == before  # metrics.jsonl keeps every row


def test_an_optimizer_state_without_its_parameter_groups_is_refused(finished, tmp_path):
    run_dir = copy_of(finished, tmp_path)
    meta = run_dir / "last" / "optimizer.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "param_groups": []}))
    before = snapshot(run_dir)
    with pytest.raises(RelreasonError, match="optimizer.json: field 'param_groups' must be a list of 1"):
        resume_copy(finished, tmp_path)
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("line", ['{"event": "val", "step": 4, "examples": 16, "score": "high"}',
                                  '{"event": "val", "step": 4, "exa'])
def test_a_damaged_metrics_line_stops_a_resume_and_is_listed(finished, tmp_path, line):
    """An edited or cut row inside metrics.jsonl is a problem `runs` lists, and a resume (which rewrites
    the file) refuses rather than dropping it."""
    from relreason.runs.records import read_run

    run_dir = copy_of(finished, tmp_path)
    rows = (run_dir / "metrics.jsonl").read_text().splitlines()
    (run_dir / "metrics.jsonl").write_text("\n".join([rows[0], line, *rows[2:]]) + "\n")
    assert read_run(run_dir).problems and "metrics.jsonl:2" in read_run(run_dir).problems[0]
    before = snapshot(run_dir)
    with pytest.raises(RelreasonError, match="cannot resume: metrics.jsonl:2"):
        resume_copy(finished, tmp_path, extra=["train.train_examples=48"])
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("planted", [".lock", "best", "metrics.jsonl"])
def test_links_planted_in_a_run_directory_are_refused(finished, tmp_path, planted):
    """A link where the run keeps its own file is never followed: the file or folder it points to,
    outside the run, stays as it was."""
    import shutil

    run_dir = copy_of(finished, tmp_path)
    victims = tmp_path / "victims"
    victims.mkdir()
    target = victims / planted
    if planted == "best":
        shutil.copytree(run_dir / "best", target)
        shutil.rmtree(run_dir / "best")
    else:
        target.write_text("precious\n")
        (run_dir / planted).unlink(missing_ok=True)
    (run_dir / planted).symlink_to(target)
    outside = snapshot(victims)
    with pytest.raises(RelreasonError, match=f"{planted} is a symbolic link"):
        resume_copy(finished, tmp_path, extra=["train.train_examples=48"])
    assert snapshot(victims) == outside
    assert not (run_dir / ".best.old").exists()


def test_a_run_whose_first_checkpoint_never_landed_starts_again(tmp_path, monkeypatch):
    """A full disk while writing the first last/ (safetensors wraps the OS error): one line naming the
    checkpoint and the cause, no temporary left, and the same command starts the run again."""
    from safetensors import SafetensorError

    from relreason.train import checkpoint

    original = checkpoint.save_file

    def save_file(tensors, file):
        if "last" in str(file):
            raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: '
                                  '"No space left on device" })')
        return original(tensors, file)

    monkeypatch.setattr(checkpoint, "save_file", save_file)
    run_dir = tmp_path / "runs" / "r"
    with pytest.raises(RelreasonError) as e:
        run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False, log=lambda m: None)
    assert e.value.message == f"cannot write {run_dir / 'last'}: no space left on device"
    assert "disk is full" in e.value.hint
    assert sorted(p.name for p in run_dir.iterdir()) == [".lock", "best", "config.json", "metrics.jsonl"]
    with pytest.raises(RelreasonError, match="nothing to resume"):
        run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", resume=True, show_progress=False)
    monkeypatch.setattr(checkpoint, "save_file", original)  # space freed
    res = run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False, log=lambda m: None)
    assert res.examples == 32 and (run_dir / "results.json").is_file()


@pytest.mark.parametrize("at_step", [0, 5])
def test_a_diverged_run_says_so_and_resumes_with_a_lower_rate(tmp_path, monkeypatch, at_step):
    """A non-finite loss: the error says "diverged" and the step (no grad_clip advice: clipping is on),
    `runs` says "diverged", and a resume may lower train.lr, recorded as a deviation; the validation
    of the checkpoint resumed from (the step-0 one too) is written once."""
    from relreason.runs.records import Status, read_run

    original = NarWorkload.loss
    monkeypatch.setattr(NarWorkload, "loss", lambda self, module, part, step: (
        lambda out: (out[0] * math.nan if step == at_step else out[0], out[1]))(original(self, module, part, step)))
    with pytest.raises(RelreasonError, match=f"diverged: the loss became nan at step {at_step}") as e:
        run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False, log=lambda m: None)
    assert "train.lr" in e.value.hint and "grad_clip" not in e.value.hint
    run_dir = tmp_path / "runs" / "r"
    info = read_run(run_dir)
    assert (info.status, info.diverged_step) == (Status.DIVERGED, at_step)
    monkeypatch.setattr(NarWorkload, "loss", original)
    with pytest.raises(RelreasonError, match="train.lr"):  # raising it is still refused
        run(tiny_config(tmp_path, "train.lr=0.01"), out=tmp_path / "runs", name="r", resume=True,
            show_progress=False)
    res = run(tiny_config(tmp_path, "train.lr=0.0005"), out=tmp_path / "runs", name="r", resume=True,
              show_progress=False, log=lambda m: None)
    checkpoint_at = 16 if at_step else 0
    assert f"train.lr lowered from 0.001 to 0.0005 at {checkpoint_at} examples" in res.deviation
    assert f"train.lr lowered from 0.001" in json.loads((run_dir / "results.json").read_text())["deviation"]
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    val = [r["examples"] for r in rows if r["event"] == "val"]
    assert val == [0, 16, 32]  # each validation once
    assert [r["event"] for r in rows].count("diverged") == 1 and read_run(run_dir).status is Status.FINISHED


def test_non_finite_or_damaged_weights_are_refused_by_eval_and_export(finished, tmp_path):
    from safetensors.torch import load_file as load_torch, save_file

    from relreason.train.evaluation import evaluate_checkpoint
    from relreason.train.export import export_bundle

    run_dir = copy_of(finished, tmp_path)
    weights = run_dir / "best" / "model.safetensors"
    state = load_torch(str(weights))
    name = sorted(state)[0]
    state[name] = state[name] * math.nan
    save_file(state, str(weights))
    with pytest.raises(RelreasonError, match=f"model.safetensors is damaged: tensor {name} holds NaN"):
        evaluate_checkpoint(run_dir / "best")
    with pytest.raises(RelreasonError, match="holds NaN"):
        export_bundle(run_dir, tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()
    (run_dir / "best" / "config.json").write_text('{"format": 1, "config": {"model_name": "mpnn"')
    with pytest.raises(RelreasonError, match="config.json is corrupt"):
        export_bundle(run_dir, tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()


@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MiB tmpfs (a real full disk); skipped where this process may not mount one (not root, a
    container without the capability)."""
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
                                 capture_output=True).returncode == 0
    except OSError:
        mounted = False
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_real_full_disk_ends_in_one_line_and_the_run_starts_again(tmp_path, tiny_disk):
    (tiny_disk / "filler").write_bytes(b"\0" * (1008 << 10))  # leaves 16 KiB: config.json fits, checkpoints do not
    with pytest.raises(RelreasonError, match=f"cannot write {tiny_disk / 'runs' / 'r'}.*: no space left on device"):
        run(tiny_config(tmp_path), out=tiny_disk / "runs", name="r", show_progress=False, log=lambda m: None)
    run_dir = tiny_disk / "runs" / "r"
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]  # nothing half-written is left
    (tiny_disk / "filler").unlink()
    res = run(tiny_config(tmp_path), out=tiny_disk / "runs", name="r", show_progress=False, log=lambda m: None)
    assert res.examples == 32
