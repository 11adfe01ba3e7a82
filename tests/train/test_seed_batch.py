"""Seed groups (relreason.train.seed_group): each seed of a group trains exactly as its single run, for
every processor: the same initial weights (bit for bit), first loss and gradients (float rounding),
final weights of a short run (within what Adam makes of rounding), the same run-directory files, and a
group stopped in the middle resumes to the weights of one never stopped; `train --seeds` end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.config import build_config
from relreason.models.processors import PROCESSORS
from relreason.runtime import count_host_syncs
from relreason.train import run
from relreason.train.optimizer import adam, clip_grad_norm
from relreason.train.seed_group import run_group, seed_configs, vmap_problems, vmapped_losses
from relreason.train.workloads import build_workload

from stop_requests import stop_after

LR = 1e-3
# teacher forcing and node dropout on, so every per-seed noise stream is exercised; batch 4 as the RT protocol
TINY = ["model.hidden=16", "train.batch_size=4", "train.train_examples=32", "train.eval_every_examples=16",
        "data.train_num=24", "data.train_size=5", "data.val_size=5", "data.test_size=7", "model.teacher_forcing=0.5",
        "model.dropout=0.1", f"train.lr={LR}"]
SEEDS = [0, 3]
runner = CliRunner()


def tiny(tmp_path, model="mpnn", extra=()):
    return build_config(model, "bellman_ford", "default", TINY + [f"data.data_dir={tmp_path / 'data'}", *extra])


def weights(run_dir: Path, which="last") -> dict:
    return load_file(str(run_dir / which / "model.safetensors"))


@pytest.mark.parametrize("model", PROCESSORS.names())
def test_each_seeds_initial_weights_first_loss_and_gradients_equal_its_single_run(tmp_path, model):
    members = seed_configs(tiny(tmp_path, model, ["train.static_step=true"]), SEEDS)
    group = [build_workload(c, torch.device("cpu")) for c in members]
    assert not any(vmap_problems(c, wl) for c, wl in zip(members, group))  # every processor runs vmapped
    parts = [wl.step_batches(0)[0] for wl in group]
    losses = vmapped_losses([wl.model for wl in group], parts)
    losses.sum().backward()
    for k, c in enumerate(members):
        alone = build_workload(c, torch.device("cpu"))  # the single run, built on its own
        mine = dict(group[k].model.named_parameters())
        for name, p in alone.model.named_parameters():
            assert torch.equal(p, mine[name]), name  # the same initialisation, bit for bit
        loss, _ = alone.loss(alone.model, alone.step_batches(0)[0], 0)
        loss.backward()
        torch.testing.assert_close(losses[k].detach(), loss.detach(), rtol=1e-5, atol=1e-6)
        for name, p in alone.model.named_parameters():  # float rounding: batched and plain kernels round otherwise
            torch.testing.assert_close(mine[name].grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)
    assert not torch.allclose(losses[0], losses[1])  # the seeds differ: they are not one seed repeated


def test_the_vmapped_step_reads_nothing_back_to_the_host(tmp_path):
    members = seed_configs(tiny(tmp_path, "rt", ["train.static_step=true"]), SEEDS)
    wls = [build_workload(c, torch.device("cpu")) for c in members]
    opts = [adam(wl.model.parameters(), LR) for wl in wls]

    def step(parts):
        for o in opts:
            o.zero_grad(set_to_none=True)
        vmapped_losses([wl.model for wl in wls], parts).sum().backward()
        for wl, o in zip(wls, opts):
            clip_grad_norm(wl.model, 1.0)
            o.step()

    step([wl.step_batches(0)[0] for wl in wls])  # Adam's lazy state made
    parts = [wl.step_batches(1)[0] for wl in wls]  # data preparation is not part of the step
    with count_host_syncs() as seen:
        step(parts)
    assert not seen, dict(seen)


def single_runs(tmp_path, model, extra=()) -> Path:
    out = tmp_path / "single"
    for s in SEEDS:
        run(tiny(tmp_path, model, [f"train.seed={s}", "train.static_step=true", *extra]), out=out, name=f"g-s{s}",
            show_progress=False)
    return out


# Adam's step is lr * m / (sqrt(v) + eps): where a gradient is near zero, a rounding difference can turn
# its sign and move the weight by up to lr in either direction, so two runs differing in rounding alone may
# part by 2 x lr per step at most (8 steps here); in practice they stay far closer.
@pytest.mark.parametrize("model", ["mpnn", "rt"])
def test_a_group_writes_what_its_single_runs_write(tmp_path, model):
    steps = 32 // 4
    run_group(tiny(tmp_path, model), SEEDS, out=tmp_path / "group", names=[f"g-s{s}" for s in SEEDS],
              show_progress=False, strategy="vmap")
    single = single_runs(tmp_path, model)
    for s in SEEDS:
        g, a = tmp_path / "group" / f"g-s{s}", single / f"g-s{s}"
        assert sorted(p.relative_to(g) for p in g.rglob("*")) == sorted(p.relative_to(a) for p in a.rglob("*"))
        for which in ("last", "best"):
            wg, wa = weights(g, which), weights(a, which)
            assert wg.keys() == wa.keys()
            for k in wa:
                assert np.abs(wg[k] - wa[k]).max() <= 2 * LR * steps, k
        cg, ca = json.loads((g / "config.json").read_text()), json.loads((a / "config.json").read_text())
        assert cg["config"] == ca["config"] and cg["config"]["train"]["seed"] == s
        rg, ra = json.loads((g / "results.json").read_text()), json.loads((a / "results.json").read_text())
        timing = {"seconds", "train_seconds", "hardware", "test", "best_val", "per_task"}  # scores: rounding
        assert {k: v for k, v in rg.items() if k not in timing} == {k: v for k, v in ra.items() if k not in timing}
        rows = lambda d: [(r["event"], r.get("examples")) for r in map(json.loads, (d / "metrics.jsonl").read_text().splitlines())]  # noqa: E731
        assert rows(g) == rows(a)


def test_the_loop_strategy_is_each_single_runs_own_step(tmp_path):
    run_group(tiny(tmp_path, "mpnn"), SEEDS, out=tmp_path / "group", names=[f"g-s{s}" for s in SEEDS],
              show_progress=False, strategy="loop")
    out = tmp_path / "single"
    for s in SEEDS:
        run(tiny(tmp_path, "mpnn", [f"train.seed={s}"]), out=out, name=f"g-s{s}", show_progress=False)
        wg, wa = weights(tmp_path / "group" / f"g-s{s}"), weights(out / f"g-s{s}")
        for k in wa:
            assert np.array_equal(wg[k], wa[k]), k  # the same code on the same numbers: bit for bit


def test_a_group_stopped_mid_way_resumes_to_the_uninterrupted_weights(tmp_path, monkeypatch):
    cfg = tiny(tmp_path, "rt", ["train.train_examples=48"])
    names = [f"g-s{s}" for s in SEEDS]
    run_group(cfg, SEEDS, out=tmp_path / "whole", names=names, show_progress=False, strategy="vmap")
    with monkeypatch.context() as m:
        stop_after(m, 5)  # between validations (every 4 steps): last/ saved at step 5 by the stop
        assert all(r.interrupted for r in run_group(cfg, SEEDS, out=tmp_path / "cut", names=names,
                                                    show_progress=False, strategy="vmap"))
    # a kill between two members' checkpoints: seed 3 is left a step behind (from a group stopped at 4)
    with monkeypatch.context() as m:
        stop_after(m, 4)
        run_group(cfg, SEEDS, out=tmp_path / "behind", names=names, show_progress=False, strategy="vmap")
    shutil.rmtree(tmp_path / "cut" / names[1])
    shutil.copytree(tmp_path / "behind" / names[1], tmp_path / "cut" / names[1])
    results = run_group(cfg, SEEDS, out=tmp_path / "cut", names=names, resume=True, show_progress=False,
                        strategy="vmap")
    assert [r.examples for r in results] == [48, 48]
    wa, wb = weights(tmp_path / "whole" / names[0]), weights(tmp_path / "cut" / names[0])
    for k in wa:  # resumed in the same group composition: exact
        assert np.array_equal(wa[k], wb[k]), k
    wa, wb = weights(tmp_path / "whole" / names[1]), weights(tmp_path / "cut" / names[1])
    for k in wa:  # one step alone (K = 1) rounds otherwise: Adam's bound (see above), 12 steps
        assert np.abs(wa[k] - wb[k]).max() <= 2 * LR * 12, k


def test_cli_train_seeds_writes_a_run_directory_per_seed(tmp_path):
    args = ["train", "mpnn", "bellman_ford", "--recipe", "default", "--seeds", "0,1", "--name", "g",
            "--out", str(tmp_path / "runs"), "--json"]
    for item in TINY + [f"data.data_dir={tmp_path / 'data'}", "train.train_examples=8", "train.eval_every_examples=8"]:
        args += ["--set", item]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["runs"]
    assert [Path(r["run"]).name for r in rows] == ["g-s0", "g-s1"]
    for r in rows:
        assert (Path(r["run"]) / "results.json").is_file() and (Path(r["run"]) / "best" / "model.safetensors").is_file()
    bad = runner.invoke(app, ["train", "mpnn", "bellman_ford", "--seeds", "0,x"])
    assert bad.exit_code == 1 and "--seeds '0,x' is not a count or a list of seeds" in bad.output
    dup = runner.invoke(app, ["train", "mpnn", "bellman_ford", "--seeds", "1,1", "--recipe", "default"])
    assert dup.exit_code == 1 and "lists seed 1 more than once" in dup.output


def test_each_seed_clips_its_own_gradients(tmp_path, monkeypatch):
    """The gradients each Adam steps with, after clipping, are the single run's: the global norm is per seed
    (weights alone cannot show it: Adam's normalisation undoes a common scale almost entirely)."""
    # (optimizer, the gradients of its first step), in the order the optimizers first step; the optimizer itself is
    # kept: keyed by id(), a freed optimizer's id could be reused by a later one, which then went unrecorded
    stepped: list[tuple[torch.optim.Optimizer, list[torch.Tensor]]] = []
    adam_step = torch.optim.Adam.step

    def spy(self, *args, **kwargs):
        if all(o is not self for o, _ in stepped):
            stepped.append((self, [p.grad.clone() for g in self.param_groups for p in g["params"]]))
        return adam_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    one_step = ["train.train_examples=4", "train.eval_every_examples=4", "train.grad_clip=0.01"]
    run_group(tiny(tmp_path, "mpnn", one_step), SEEDS, out=tmp_path / "group", names=[f"g-s{s}" for s in SEEDS],
              show_progress=False, strategy="vmap")
    single_runs(tmp_path, "mpnn", one_step)
    group, single = [grads for _, grads in stepped[:2]], [grads for _, grads in stepped[2:]]
    for g, a in zip(group, single):
        assert len(g) == len(a)
        for x, y in zip(g, a):
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)
