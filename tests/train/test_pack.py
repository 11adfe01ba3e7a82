"""Packed cells (relreason.train.pack): cells of different tasks and models trained in one process, each
exactly its single run: the same files and, on the CPU, the same weights bit for bit (the same code on the same
numbers), with each cell's captured step (the recorded step re-run in place of the CUDA replay) too; a pack
stopped mid-way resumes every cell to the weights of one never stopped."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from relreason.config import build_config
from relreason.errors import RelreasonError
from relreason.train import run, session
from relreason.train.pack import stream_workers, train_pack

from stop_requests import stop_after

TINY = ["model.hidden=16", "train.batch_size=4", "train.eval_every_examples=16", "data.train_num=24",
        "data.train_size=5", "data.val_size=5", "data.test_size=7", "model.teacher_forcing=0.5",
        "train.static_step=true"]
# two cells of different tasks, models and budgets (the pack steps each to its own)
CELLS = [("mpnn", "bellman_ford", 32), ("rt", "insertion_sort", 24)]


def configs(tmp_path, extra=()):
    return [build_config(m, t, "default", TINY + [f"train.train_examples={n}", f"data.data_dir={tmp_path / 'data'}",
                                                  *extra]) for m, t, n in CELLS]


def weights(d: Path) -> dict:
    return load_file(str(d / "last" / "model.safetensors"))


def files(d: Path) -> list:
    return sorted(p.relative_to(d) for p in d.rglob("*"))


def same_weights(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), (a.name, k)


@pytest.mark.parametrize("captured", [False, True])
def test_packed_cells_train_their_single_runs_exactly(tmp_path, monkeypatch, captured):
    """Each packed cell equals its single run on the CPU bit for bit: files, weights, results; captured: each
    cell's recorded step re-run in place of its graph's replay (its own CapturedStep)."""
    from relreason.train import seed_group

    extra = ["train.cuda_graph=true"] if captured else []
    if captured:
        monkeypatch.setattr(seed_group.SeedGroup, "REPLAY", "eager")
        monkeypatch.setattr(session.Session, "captured_step",
                            lambda self, replay="cuda", _c=session.Session.captured_step: _c(self, "eager"))
    names = [f"{m}-{t}" for m, t, _ in CELLS]
    packed = train_pack(configs(tmp_path, extra), [tmp_path / "pack" / n for n in names], [False, False],
                        show_progress=False)
    assert [r.examples for r in packed.results] == [n for *_, n in CELLS]
    assert packed.step_seconds > 0 and 0 <= packed.data_wait < 1
    for cfg, n in zip(configs(tmp_path, extra), names):
        run(cfg, out=tmp_path / "single", name=n, show_progress=False)
        same_run(tmp_path / "pack" / n, tmp_path / "single" / n)


def same_run(p: Path, a: Path) -> None:
    """Two run directories with the same files, weights, results and curve (their timings aside)."""
    assert files(p) == files(a)
    same_weights(p, a)
    rp, ra = json.loads((p / "results.json").read_text()), json.loads((a / "results.json").read_text())
    timing = {"seconds", "train_seconds", "hardware"}
    assert {k: v for k, v in rp.items() if k not in timing} == {k: v for k, v in ra.items() if k not in timing}
    rows = lambda d: [{k: v for k, v in json.loads(x).items() if k != "time"}  # noqa: E731
                      for x in (d / "metrics.jsonl").read_text().splitlines()]
    assert rows(p) == rows(a)


def test_packed_cells_validate_and_test_side_by_side_each_as_alone(tmp_path, monkeypatch):
    """eval_threads=2: the two cells' first validations, and their final tests, are under way at the same
    time (each must reach a barrier the other also reaches: one after another, the first waits alone and
    fails); every file equals the pack's that validates one cell after the other."""
    names = [f"{m}-{t}" for m, t, _ in CELLS]
    train_pack(configs(tmp_path), [tmp_path / "serial" / n for n in names], [False, False], show_progress=False,
               eval_threads=1)
    meet = {"val": threading.Barrier(2, timeout=30), "test": threading.Barrier(2, timeout=30)}
    met, evaluate = [], session.Session.evaluate

    def meeting(self, split, desc, draw=None):
        if split == "test" or draw == 0:
            meet[split].wait()
            met.append((split, threading.current_thread() is not threading.main_thread()))
        return evaluate(self, split, desc, draw)

    monkeypatch.setattr(session.Session, "evaluate", meeting)
    train_pack(configs(tmp_path), [tmp_path / "side" / n for n in names], [False, False], show_progress=False,
               eval_threads=2)
    assert sorted(met) == [("test", True), ("test", True), ("val", True), ("val", True)]
    for n in names:
        same_run(tmp_path / "side" / n, tmp_path / "serial" / n)


def test_a_pack_stopped_mid_way_resumes_each_cell_to_the_uninterrupted_weights(tmp_path, monkeypatch):
    names = [f"{m}-{t}" for m, t, _ in CELLS]
    train_pack(configs(tmp_path), [tmp_path / "whole" / n for n in names], [False, False], show_progress=False)
    with monkeypatch.context() as m:
        stop_after(m, 7)  # the RT cell finished at its 6th step, the MPNN's stops at its 7th (saving last/ there)
        cut = train_pack(configs(tmp_path), [tmp_path / "cut" / n for n in names], [False, False],
                         show_progress=False)
    assert [r.interrupted for r in cut.results] == [True, False]  # a cell that reached its budget is finished
    assert not (tmp_path / "cut" / names[0] / "results.json").exists()
    assert (tmp_path / "cut" / names[1] / "results.json").read_text() != ""
    resumed = train_pack(configs(tmp_path)[:1], [tmp_path / "cut" / names[0]], [True], show_progress=False)
    assert resumed.results[0].examples == CELLS[0][2]
    for n in names:
        same_weights(tmp_path / "whole" / n, tmp_path / "cut" / n)
        a, b = (json.loads((d / n / "results.json").read_text()) for d in (tmp_path / "whole", tmp_path / "cut"))
        assert (a["test"], a["best_val"], a["steps"]) == (b["test"], b["best_val"], b["steps"])


@pytest.mark.parametrize("cells, cores, expect", [(1, 1, 1), (1, 16, 15), (3, 16, 5), (8, 16, 1), (32, 16, 1)])
def test_stream_workers_share_the_cores_between_the_cells(cells, cores, expect):
    assert stream_workers(cells, cores) == expect


def test_a_pack_refuses_cells_on_different_devices_and_shared_directories(tmp_path):
    cfgs = configs(tmp_path)
    with pytest.raises(RelreasonError, match="distinct run directories"):
        train_pack(cfgs, [tmp_path / "a", tmp_path / "a"], [False, False], show_progress=False)
    other = build_config("mpnn", "bfs", "default", TINY + ["train.device=cuda"])
    with pytest.raises(RelreasonError, match="a pack trains on one device"):
        train_pack([cfgs[0], other], [tmp_path / "a", tmp_path / "b"], [False, False], show_progress=False)
