"""Distributed data parallel training: N processes train as one process with the same global batch.

The fast tests check the pieces in one process: a rank's share of a step sees exactly its rows of the
global batch's noise, and with the loss normalized by the global counts the ranks' mean loss and
gradient are the global batch's, also with uneven shares or a rank without a row; a sharded evaluation
merges to exactly the one-process scores. The slow test runs 2 or 3 gloo processes under torchrun
(batches of 4, 3 and 2: even, uneven and with an idle rank) and compares them with one process, also
across a resume with another number of processes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from distributed_runs import TASK, noisy_config
from relreason.config import build_config
from relreason.data.specs import Feature, Location, Stage, Type
from relreason.eval.evaluate import score_dataset
from relreason.eval.metrics import Scorer
from relreason.eval.relative import RelativeLossScorer
from relreason.models.noise import Noise, Site
from relreason.train import run
from relreason.train.workloads import NarWorkload, shard_rows, validation_generator

CPU = torch.device("cpu")
TORCHRUN = Path(sys.executable).parent / "torchrun"
RUNS_SCRIPT = Path(__file__).parent / "distributed_runs.py"


def test_noise_of_some_rows_is_those_rows_of_the_global_draw():
    whole = Noise.whole(7, 6).at(Site.DROPOUT, 3)
    part = Noise(7, torch.arange(2, 5), 6).at(Site.DROPOUT, 3)
    full = whole.uniform((6, 4, 2), CPU)
    assert torch.equal(part.uniform((3, 4, 2), CPU), full[2:5])
    # a view of some rows continues its stream, as the whole batch's second draw does
    assert torch.equal(part.select(torch.tensor([0, 2])).uniform((2, 4, 2), CPU), whole.uniform((6, 4, 2), CPU)[[2, 4]])
    assert not torch.equal(Noise.whole(7, 6).at(Site.DROPOUT, 4).uniform((6, 4, 2), CPU), full)  # another step
    assert not torch.equal(Noise.whole(7, 6).at(Site.OUTPUT_DECODERS, 3).uniform((6, 4, 2), CPU), full)  # another site


def _grads(model: torch.nn.Module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _rank_losses(wl: NarWorkload, parts: list, step: int) -> list[torch.Tensor]:
    """Each rank's loss of one update as `NarWorkload.loss` computes it under torchrun, in one process:
    the all-reduce of the counts is played by recording what every rank adds, then answering their sum."""
    added: list[torch.Tensor] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.distributed, "all_reduce", lambda t: added.append(t.clone()))
        for p in parts:
            wl.loss(wl.model, p, step)
        total = sum(added)
        mp.setattr(torch.distributed, "all_reduce", lambda t: t.copy_(total))
        return [wl.loss(wl.model, p, step)[0] for p in parts]


@pytest.mark.parametrize("n", range(1, 8))
@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_the_ranks_shares_cover_the_global_batch_once_and_differ_by_at_most_a_row(n, world):
    shares = [shard_rows(n, r, world) for r in range(world)]
    np.testing.assert_array_equal(np.concatenate(shares), np.arange(n))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


@pytest.mark.parametrize(("batch", "world"), [(6, 2), (6, 3), (3, 2), (4, 3), (2, 3)])
@pytest.mark.parametrize("task", ["insertion_sort", "insertion_sort,bfs"])
def test_a_ranks_share_of_a_step_is_its_rows_of_the_global_step(tmp_path, task, batch, world):
    """Random positions, teacher forcing, Gumbel noise and dropout of each rank are its rows of the
    global batch's; the ranks' mean loss and mean gradient (what DDP applies) are the global batch's,
    also when the shares are uneven (3 over 2, 4 over 3) or a rank has no row (2 over 3)."""
    cfg = build_config("mpnn", task, None, noisy_config(tmp_path / "data", 2) + [f"train.batch_size={batch}"])
    wl = NarWorkload(cfg, CPU)
    model = wl.model
    for step in (0, 1):
        shards = [wl.step_batches(step, r, world) for r in range(world)]
        for u, whole in enumerate(wl.step_batches(step)):
            parts = [s[u] for s in shards]
            mine = [p for p in parts if not p.idle]
            assert len(mine) == min(batch, world)
            net = wl.built.net(wl.tasks[whole.task_index].name)
            assert torch.equal(torch.cat([p.batch.inputs["pos"] for p in mine]), whole.batch.inputs["pos"])

            out = net(whole.batch, train=True, generator=whole.noise)
            loss, _ = net.loss(whole.batch, out)
            expected = _grads(model, loss)
            start = 0
            for p in mine:  # every prediction of a rank is its rows of the global forward
                o = net(p.batch, train=True, generator=p.noise)
                rows = slice(start, start + p.batch.size)
                start += p.batch.size
                for k, v in o.outputs.items():
                    torch.testing.assert_close(v, out.outputs[k][rows], rtol=1e-5, atol=1e-5)
                for k, v in o.hints.items():
                    torch.testing.assert_close(v, out.hints[k][rows, : v.shape[1]], rtol=1e-5, atol=1e-5)
            losses = _rank_losses(wl, parts, step)
            grads = [_grads(model, x) for x in losses]
            torch.testing.assert_close(sum(x.detach() for x in losses) / world, loss.detach(), rtol=1e-6, atol=0)
            for p, x, g in zip(parts, losses, grads):
                if p.idle:  # a stand-in row: it adds nothing
                    assert float(x.detach()) == 0 and all(not v.any() for v in g.values())
            for n, g in expected.items():
                mean = sum(x[n] for x in grads if n in x) / world
                torch.testing.assert_close(mean, g, rtol=1e-4, atol=1e-6 * max(1.0, g.abs().max().item()), msg=n)
            assert {n for g in grads for n in g} == set(expected)


@pytest.mark.parametrize("task", ["insertion_sort", "bellman_ford"])
def test_sharded_evaluation_merges_to_exactly_the_one_process_scores(tmp_path, task):
    cfg = build_config("mpnn", task, None, noisy_config(tmp_path / "data", 2) + ["data.val_num=11"])
    wl = NarWorkload(cfg, CPU)
    ds, spec = wl.dataset(0, "val"), wl.built.specs[task]

    def score(shard=(0, 1)):
        return score_dataset(wl.model, ds, spec, cfg.model, CPU, 3, scorer=Scorer(spec),
                             generator=validation_generator(cfg.train.seed), shard=shard)

    one = score().result().to_dict()
    assert one["hints"]  # hint statistics are merged too
    for world in (2, 3, 5):
        merged = Scorer(spec)
        for part in reversed([score((r, world)) for r in range(world)]):  # in any order
            merged.merge(part.state())
        assert merged.result().to_dict() == one


def test_relative_loss_scorer_merges_exactly():
    spec = {"y": Feature("y", Stage.OUTPUT, Location.GRAPH, Type.SCALAR)}
    gen = torch.Generator().manual_seed(0)
    batches = [(torch.rand(n, generator=gen) + 0.1, torch.rand(n, generator=gen)) for n in (3, 5, 2, 7)]
    one, parts = RelativeLossScorer(spec), [RelativeLossScorer(spec), RelativeLossScorer(spec)]
    for i, (y, y_hat) in enumerate(batches):
        batch = SimpleNamespace(outputs={"y": y})
        one.update({"y": y_hat}, batch)
        parts[i % 2].update({"y": y_hat}, batch)
    merged = RelativeLossScorer(spec)
    for p in reversed(parts):
        merged.merge(p.state())
    assert merged.result() == one.result()


def test_a_stop_request_ends_the_run_after_the_step_and_it_resumes_exactly(tmp_path, monkeypatch):
    """SIGTERM (or Ctrl-C) mid-step: the step finishes (both of a multi-task step's updates), `last/` is
    saved there, and the resumed run ends with the weights of an uninterrupted one."""
    cfg = build_config("mpnn", TASK, None, noisy_config(tmp_path / "data", 4))
    run(cfg, out=tmp_path / "a", name="r", show_progress=False)
    original = NarWorkload.loss

    def loss(self, module, part, step):
        if step == 2 and part.task_index == 0:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, module, part, step)

    monkeypatch.setattr(NarWorkload, "loss", loss)
    res = run(cfg, out=tmp_path / "b", name="r", show_progress=False, log=lambda m: None)
    assert res.interrupted and res.steps == 3
    monkeypatch.undo()
    run(cfg, out=tmp_path / "b", name="r", resume=True, show_progress=False)
    a, b = _weights(cfg, tmp_path / "a" / "r"), _weights(cfg, tmp_path / "b" / "r")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _sharded_training(cfg, steps: int, world_at) -> tuple[dict[str, np.ndarray], list[float]]:
    """What `world_at(step)` processes compute, in one process: each update's gradient is the mean of
    the ranks' gradients (DDP's all-reduce) of their losses as `NarWorkload.loss` gives them (normalized
    by the global counts; see `_rank_losses`); clipping and Adam as the loop. Returns the final weights
    and each step's loss (the mean over ranks)."""
    from relreason.train.optimizer import adam, clip_grad_norm

    wl = NarWorkload(cfg, CPU)
    model = wl.model
    opt = adam(model.parameters(), cfg.train.lr)
    model.train()
    step_losses = []
    for step in range(steps):
        world = world_at(step)
        shards = [wl.step_batches(step, r, world) for r in range(world)]
        losses = []
        for u in range(len(shards[0])):
            parts = [s[u] for s in shards]
            if world == 1:
                rank_losses = [wl.loss(model, parts[0], step)[0]]
            else:
                rank_losses = _rank_losses(wl, parts, step)
            grads = [_grads(model, x) for x in rank_losses]
            for n, param in model.named_parameters():
                mine_grads = [g[n] for g in grads if n in g]
                param.grad = sum(mine_grads) / world if mine_grads else None
            clip_grad_norm(model, cfg.train.grad_clip)
            opt.step()
            losses.append(sum(float(x.detach()) for x in rank_losses) / world)
        step_losses.append(sum(losses) / len(losses))
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}, step_losses


def _weights(cfg, run_dir: Path) -> dict[str, np.ndarray]:
    from relreason.train import checkpoint as ckpt

    wl = NarWorkload(cfg, CPU)
    ckpt.load_weights(run_dir / "last", wl.model)
    return {k: v.detach().numpy().copy() for k, v in wl.model.state_dict().items()}


def _records(run_dir: Path, event: str) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == event]


def test_ranks_without_a_row_add_exactly_nothing(tmp_path):
    """A batch of 2 over 4 ranks (two of them idle, on stand-in rows) trains bit for bit as over 2."""
    cfg = build_config("mpnn", TASK, None, noisy_config(tmp_path / "data", 3, batch=2))
    four, four_losses = _sharded_training(cfg, 3, lambda step: 4)
    two, two_losses = _sharded_training(cfg, 3, lambda step: 2)
    assert four_losses == two_losses
    for k in two:
        np.testing.assert_array_equal(four[k], two[k], err_msg=k)


# A batch of 2 is badly conditioned: over 6 steps the processor's max aggregation and the hard hint
# predictions turn rounding into other choices, so 2 ranks of 1 row already leave 11% of the weights
# more than 1e-5 from one process's, and 3 ranks (/ 3 rounds) 39%; past 3e-4, 1.4% (a stand-in row
# counted as a row: 54%, and the loss 10% off).
STEPS = 6
CASES = [(2, 4, 1e-5), (3, 4, 1e-5), (2, 3, 1e-5), (3, 2, 3e-4)]  # (world, batch, tol)


TEARDOWN_ABORT = "terminate called without an active exception"
RANK_ERROR = re.compile(r"\[rank\d+\]: Traceback")  # a rank's Python error, as torch prefixes it


@pytest.fixture(scope="module")
def torchrun_runs(tmp_path_factory):
    """`launched(world)`: the directory of every batch's runs (`bB/fresh`, `bB/resumed`) of one torchrun
    launch of `world` processes, made once per world size (starting `world` processes and torchrun costs
    more than the tiny runs), and the one-process run each `resumed` continued, at half the budget."""
    made: dict[int, tuple[Path, dict]] = {}

    def launch(world: int) -> tuple[Path, dict, subprocess.CompletedProcess]:
        root = tmp_path_factory.mktemp(f"torchrun{world}")
        data, batches = root / "data", [b for w, b, _ in CASES if w == world]
        firsts = {b: run(build_config("mpnn", TASK, None, noisy_config(data, STEPS // 2, b)), out=root / f"b{b}",
                         name="resumed", show_progress=False) for b in batches}  # one process, half the budget
        env = {**os.environ, "RELREASON_PROGRESS": "0", "OMP_NUM_THREADS": "1"}
        proc = subprocess.run([str(TORCHRUN), "--standalone", "--nproc-per-node", str(world), str(RUNS_SCRIPT),
                               str(root), str(data), str(STEPS), ",".join(map(str, batches))], env=env,
                              capture_output=True, text=True, timeout=300)
        return root, firsts, proc

    def launched(world: int) -> tuple[Path, dict]:
        if world not in made:
            root, firsts, proc = launch(world)
            if proc.returncode != 0 and TEARDOWN_ABORT in proc.stderr and not RANK_ERROR.search(proc.stderr):
                # a rank aborted in C++ (gloo's or the interpreter's teardown) without a Python error: seen once in
                # CI in many launches, never reproduced here; a fresh launch must then pass (a real failure repeats)
                warnings.warn(f"torchrun launch of {world} processes aborted in C++, launched again: "
                              f"{proc.stderr[-500:]}")
                root, firsts, proc = launch(world)
            assert proc.returncode == 0, proc.stderr[-3000:]
            made[world] = root, firsts
        return made[world]

    return launched


@pytest.mark.slow
@pytest.mark.parametrize(("world", "batch", "tol"), CASES)
def test_processes_under_torchrun_train_as_one_and_resume_with_another_world_size(torchrun_runs, world, batch, tol):
    """`world` gloo processes under torchrun compute exactly the sharded updates (checked against the
    shards computed in one process, to 1e-6), which are the one-process updates to float rounding
    (`tol`: see above); a run one process started continues on `world`; rank 0 alone writes. The batch
    need not divide: 4 over 3 ranks is 2 + 1 + 1 rows, 3 over 2 is 2 + 1, and 2 over 3 leaves rank 2
    without a row. (One torchrun launch per world size trains its cases' batches one after another.)"""
    steps = STEPS
    root, firsts = torchrun_runs(world)
    cfg = build_config("mpnn", TASK, None, noisy_config(root / "data", steps, batch))
    first = firsts[batch]
    fresh, resumed = root / f"b{batch}" / "fresh", root / f"b{batch}" / "resumed"

    for run_dir, world_at in ((fresh, lambda step: world), (resumed, lambda step: 1 if step < steps // 2 else world)):
        expected, losses = _sharded_training(cfg, steps, world_at)
        got = _weights(cfg, run_dir)
        if world == 2:  # DDP adds two ranks' gradients as `_sharded_training` does (one addition; / 2 is exact)
            for k in expected:
                np.testing.assert_allclose(got[k], expected[k], rtol=0, atol=1e-6, err_msg=k)
        else:  # gloo's ring adds three in another order, and / 3 rounds: the last bit differs
            _assert_same_but_where_adam_grows_rounding(got, expected, cfg.train.lr, steps, tol=1e-6)
        for rec in _records(run_dir, "val")[1:]:  # the loss logged is the global batch's (mean over ranks)
            assert rec["loss"] == pytest.approx(losses[rec["step"] - 1], rel=1e-6 if world == 2 else 1e-5)
        assert json.loads((run_dir / "results.json").read_text())["processes"] == world
        assert len(_records(run_dir, "test")) == 1  # rank 0 alone writes
    assert [r["processes"] for r in _records(resumed, "resume")] == [world]
    # validation sharded over the processes scores exactly as one process (the same initial weights)
    assert _records(fresh, "val")[0] == _records(first.run_dir, "val")[0]

    # one process with the same global batch: the same weights to float rounding (but where Adam grows it)
    one, one_losses = _sharded_training(cfg, steps, lambda step: 1)
    many, many_losses = _sharded_training(cfg, steps, lambda step: world)
    _assert_same_but_where_adam_grows_rounding(many, one, cfg.train.lr, steps, tol=tol)
    np.testing.assert_allclose(many_losses, one_losses, rtol=2e-4)


def _assert_same_but_where_adam_grows_rounding(got: dict, expected: dict, lr: float, steps: int, tol: float) -> None:
    """The same weights to `tol`, except the few where Adam turns rounding noise into steps: where the
    gradient is zero in exact arithmetic (a bias before a softmax) or tiny, m / sqrt(v) is a ratio of
    rounding errors and the step is up to lr either way. A wrong noise draw or normalization moves most
    weights by about lr per step."""
    diff = np.concatenate([np.abs(got[k] - expected[k]).ravel() for k in expected])
    assert diff.max() <= 2 * lr * steps
    assert np.mean(diff > tol) < 0.05, f"{np.mean(diff > tol):.2%} of the weights differ by more than {tol}"


@pytest.mark.slow
@pytest.mark.parametrize("model", ["et", "dat"])
def test_models_whose_graph_readout_a_task_leaves_unused_train_under_torchrun(tmp_path, model):
    """bellman_ford has no graph output, so nothing reads the ET's or the DAT's graph state and their
    readouts get no gradient: DDP must not wait for it (it did, and the run failed at its second step)."""
    sets = ["model.hidden=16", "train.batch_size=4", "train.train_examples=16", "train.eval_every_examples=8",
            "data.train_num=16", "data.train_size=5", "data.val_size=5", "data.test_size=6", "data.val_num=4",
            "data.test_num=4", "train.threads=1", f"data.data_dir={tmp_path / 'data'}"]
    if model == "et":  # eager triangular products: each rank would compile the fused kernels, ~20 s on 2 cores
        sets.append("processor.compiled_kernels=false")
    env = {**os.environ, "RELREASON_PROGRESS": "0", "OMP_NUM_THREADS": "1"}
    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", "-m", "relreason", "train", model, "bellman_ford",
           "--recipe", "default", "--out", str(tmp_path / "runs"), "--name", "r"]
    proc = subprocess.run(cmd + [x for item in sets for x in ("--set", item)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "runs" / "r" / "results.json").read_text())["processes"] == 2
