"""CUDA-graph capture of the training step (`train.cuda_graph`, relreason.train.cuda_graphs): the noise tape
serves every draw the uncaptured step makes, a run whose step goes through the capture's staging trains
the uncaptured run's weights exactly (on the CPU, with the recorded step re-run in place of a graph
replay), and what cannot be captured is refused in one line. The replay itself runs on CUDA only:
scripts/gpu_check.sh trains captured against uncaptured there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.config import build_config
from relreason.data import generate
from relreason.models import Batch, ModelConfig, build_model, prepare_spec
from relreason.models.noise import Noise, Tape
from relreason.train import run, session

TINY = ["model.hidden=16", "train.batch_size=4", "train.train_examples=48", "train.eval_every_examples=24",
        "data.train_num=24", "data.train_size=5", "data.val_size=5", "data.test_size=5", "train.static_step=true"]
runner = CliRunner()


@pytest.mark.parametrize("task", ["bellman_ford", "insertion_sort"])  # sorting: Gumbel draws of permutations
def test_a_tape_serves_the_draws_the_step_would_make(task):
    """Recorded from one step's noise, refilled from another's: the forward sees that other step's numbers."""
    cfg = ModelConfig(hidden=8, teacher_forcing=0.5, dropout=0.1)  # every noise site is drawn
    ds = generate(task, num=4, size=5, seed=3)
    spec = prepare_spec(ds.spec, cfg, task)
    torch.manual_seed(0)
    net = build_model(spec, cfg, "mpnn")
    batch = Batch.from_dataset(ds, cfg, spec, generator=Noise.whole(5, 4))
    plain = net(batch, train=True, generator=Noise.whole(11, 4), static=True)

    tape = Tape()
    recorded = net(batch, train=True, generator=Noise.whole(7, 4).taped(tape), static=True)
    unrecorded = net(batch, train=True, generator=Noise.whole(7, 4), static=True)
    assert tape.entries and len({k for k, *_ in tape.entries}) > 1
    for k in unrecorded.outputs:  # recording draws exactly what the step draws
        assert torch.equal(recorded.outputs[k], unrecorded.outputs[k]), k
    tape.refill(Noise.whole(11, 4))
    tape.serve()
    served = net(batch, train=True, generator=Noise.whole(7, 4).taped(tape), static=True)
    assert tape._next == len(tape.buffers)  # every buffer served once
    for k in plain.outputs:
        assert torch.equal(served.outputs[k], plain.outputs[k]), k
    for k in plain.hints:
        assert torch.equal(served.hints[k], plain.hints[k]), k
    assert any(not torch.equal(served.outputs[k], recorded.outputs[k]) for k in plain.outputs)


def test_a_tape_refuses_a_step_that_draws_differently():
    tape = Tape()
    noise = Noise.whole(3, 2).taped(tape)
    noise.at(1, 0).uniform((2, 3), torch.device("cpu"))
    tape.serve()
    with pytest.raises(RuntimeError, match=r"drew \(2, 4\) as its draw 0"):
        noise.at(1, 0).uniform((2, 4), torch.device("cpu"))


def _weights(d: Path) -> dict:
    return load_file(str(d / "last" / "model.safetensors"))


def test_a_captured_run_trains_the_uncaptured_weights(tmp_path, monkeypatch):
    """The capture's staging (input copies, the tape, .grad from the graph's outputs, several graphs for
    several hint lengths), with the recorded step re-run where CUDA would replay it: the same weights, bit
    for bit, as the static step run directly (teacher forcing and dropout on: the tape serves each draw)."""
    made = []
    capture = session.Session.captured_step

    def eager(self, replay="cuda"):
        made.append(capture(self, "eager"))
        return made[-1]
    monkeypatch.setattr(session.Session, "captured_step", eager)
    over = TINY + [f"data.data_dir={tmp_path / 'data'}", "model.teacher_forcing=0.5", "model.dropout=0.1"]
    run(build_config("mpnn", "bellman_ford", None, over), out=tmp_path, name="plain", show_progress=False)
    assert not made
    run(build_config("mpnn", "bellman_ford", None, over + ["train.cuda_graph=true"]), out=tmp_path, name="graph",
        show_progress=False)
    assert len(made) == 1 and len(made[0].graphs) > 1  # batches of several hint lengths: one graph each
    a, b = _weights(tmp_path / "plain"), _weights(tmp_path / "graph")
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


@pytest.mark.parametrize("sets, expect", [
    (["train.cuda_graph=true"], "train.cuda_graph needs train.static_step: true"),
    (["train.cuda_graph=true", "train.static_step=true", "train.device=cpu"],
     "train.cuda_graph captures the training step on a CUDA device, but this run trains on cpu"),
])
def test_what_cannot_be_captured_is_refused_in_one_line(tmp_path, sets, expect):
    args = ["train", "mpnn", "bellman_ford", "--out", str(tmp_path)]
    for s in TINY[:-1] + [f"data.data_dir={tmp_path / 'data'}"] + sets:
        args += ["--set", s]
    r = runner.invoke(app, args)
    assert r.exit_code != 0 and expect in r.output and "Traceback" not in r.output, r.output


def test_a_processor_dropout_is_refused_before_the_device_is_looked_at():
    """ET's processor.dropout draws from torch's global generator: captured, it would not be the same run."""
    from relreason.errors import RelreasonError
    from relreason.train.cuda_graphs import check_capturable

    cfg = build_config("et", "bellman_ford", None, ["processor.dropout=0.1", "train.static_step=true",
                                                    "train.cuda_graph=true"])
    with pytest.raises(RelreasonError, match="processor.dropout draws from torch's global generator"):
        check_capturable(cfg, torch.device("cuda"), 1, None)


SEEDS = [0, 3]
LR = 1e-3


def _eager_groups(monkeypatch) -> list:
    """Seed groups replay their recorded steps (the CPU stand-in); returns the CapturedSteps they make."""
    from relreason.train import cuda_graphs, seed_group

    made = []
    real = cuda_graphs.CapturedStep

    class Recorded(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)
    monkeypatch.setattr(seed_group.SeedGroup, "REPLAY", "eager")
    monkeypatch.setattr(cuda_graphs, "CapturedStep", Recorded)
    return made


def test_a_captured_seed_group_trains_the_uncaptured_groups_weights_and_its_single_runs(tmp_path, monkeypatch):
    """The vmapped group step captured (one grouped graph per padded batch shape, one tape per member), the
    recorded step re-run in place of the replay: bit for bit the uncaptured group, and each member within
    Adam's ~2 x lr per step of its single captured run, with the files a single run writes."""
    import json

    from relreason.train.seed_group import run_group

    made = _eager_groups(monkeypatch)
    monkeypatch.setattr(session.Session, "captured_step",
                        lambda self, replay="cuda", _c=session.Session.captured_step: _c(self, "eager"))
    over = TINY + [f"data.data_dir={tmp_path / 'data'}", "model.teacher_forcing=0.5", "model.dropout=0.1",
                   f"train.lr={LR}"]
    names = [f"g-s{s}" for s in SEEDS]
    run_group(build_config("mpnn", "bellman_ford", None, over), SEEDS, out=tmp_path / "plain", names=names,
              show_progress=False, strategy="vmap")
    assert not made
    run_group(build_config("mpnn", "bellman_ford", None, over + ["train.cuda_graph=true"]), SEEDS,
              out=tmp_path / "graph", names=names, show_progress=False, strategy="vmap")
    assert len(made) == 1 and made[0].grouped and len(made[0].graphs) > 1  # several padded hint lengths
    for n in names:
        a, b = _weights(tmp_path / "plain" / n), _weights(tmp_path / "graph" / n)
        for k in a:
            assert np.array_equal(a[k], b[k]), (n, k)
    steps = 48 // 4
    for s, n in zip(SEEDS, names):
        run(build_config("mpnn", "bellman_ford", None, over + ["train.cuda_graph=true", f"train.seed={s}"]),
            out=tmp_path / "single", name=n, show_progress=False)
        g, a = tmp_path / "graph" / n, tmp_path / "single" / n
        assert sorted(p.relative_to(g) for p in g.rglob("*")) == sorted(p.relative_to(a) for p in a.rglob("*"))
        wg, wa = _weights(g), _weights(a)
        for k in wa:
            assert np.abs(wg[k] - wa[k]).max() <= 2 * LR * steps, k
        cg, ca = json.loads((g / "config.json").read_text()), json.loads((a / "config.json").read_text())
        assert cg["config"] == ca["config"]


def test_a_seed_group_on_the_cpu_refuses_cuda_graphs_in_one_line(tmp_path):
    args = ["train", "mpnn", "bellman_ford", "--seeds", "0,1", "--out", str(tmp_path)]
    for s in TINY + [f"data.data_dir={tmp_path / 'data'}", "train.cuda_graph=true", "train.device=cpu"]:
        args += ["--set", s]
    r = runner.invoke(app, args)
    assert r.exit_code != 0 and "train.cuda_graph captures the training step on a CUDA device" in r.output, r.output
    assert "Traceback" not in r.output


def test_each_captured_step_warms_up_and_captures_on_its_own_stream(monkeypatch):
    """torch keys the cuBLAS workspaces by stream: graphs captured on its one default capture stream bake in one
    workspace, which a pack's cells, replaying at once on their side streams, would share (the leading suspect
    for the H200 pack stall, docs/gpu.md). Each CapturedStep warms up and captures on its own stream, the same
    one for each of its graphs; SHARED_CAPTURE_STREAM restores torch's default (the probe's control). The CUDA
    calls are stand-ins here: what is checked is which stream each capture is given."""
    import contextlib

    from relreason.train.cuda_graphs import CapturedStep

    made, captured_on, warmed_on = [], [], []

    class Stream:
        def __init__(self, device=None, priority=0):
            made.append(self)

        def wait_stream(self, other):
            pass

    class Graph:
        def replay(self):
            pass

    @contextlib.contextmanager
    def graph(g, stream=None, **kwargs):
        captured_on.append(stream)
        yield

    @contextlib.contextmanager
    def on(stream):
        warmed_on.append(stream)
        yield
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: type("Main", (), {
        "wait_stream": lambda self, other: None})())
    monkeypatch.setattr(torch.cuda, "stream", on)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", graph)

    cfg = ModelConfig(hidden=8)
    batches = []
    for size in (5, 6):  # two batch shapes: two graphs per step
        ds = generate("bfs", num=4, size=size, seed=3)
        spec = prepare_spec(ds.spec, cfg, "bfs")
        batches.append(Batch.from_dataset(ds, cfg, spec, generator=Noise.whole(5, 4)))
    torch.manual_seed(0)
    net = build_model(spec, cfg, "mpnn")

    def loss_fn(batch, noise):
        out = net(batch, train=True, generator=noise, static=True)
        return sum(v.float().mean() for v in out.outputs.values())
    steps = [CapturedStep(loss_fn, list(net.parameters()), torch.device("cpu")) for _ in range(2)]
    for step in steps:
        for b in batches:
            step(b, Noise.whole(7, 4))
    own = [s.capture_stream() for s in steps]
    assert own[0] is not own[1] and made == own  # one stream each, made once
    assert captured_on == [own[0], own[0], own[1], own[1]] and warmed_on == captured_on
    monkeypatch.setenv(CapturedStep.SHARED_CAPTURE_ENV, "1")  # a GPU command's escape hatch
    shared = CapturedStep(loss_fn, list(net.parameters()), torch.device("cpu"))
    shared(batches[0], Noise.whole(7, 4))
    assert captured_on[-1] is None and shared.capture_stream() is None
    monkeypatch.delenv(CapturedStep.SHARED_CAPTURE_ENV)
    monkeypatch.setattr(CapturedStep, "SHARED_CAPTURE_STREAM", True)  # the probe's control
    assert CapturedStep(loss_fn, list(net.parameters()), torch.device("cpu")).capture_stream() is None
