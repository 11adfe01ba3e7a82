"""`reproduce --seed-batch K` (relreason.studies.training): the cells of one column and task that differ in
seed alone train as one seed group, and each cell's run directory is what training it alone writes (bit
for bit with the loop strategy, to float rounding with vmap); a group stopped mid-way resumes per cell;
`--jobs` trains groups in workers; `--shard` takes whole groups; bad values are one-line errors; `--list`
prints each table's cost one after another and in seed groups."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from cli_run import TINY, invoke, ok, one_line_error
from relreason.studies.cells import cell_state, plan_cells
from relreason.studies.sweep import SweepOptions, run_table
from relreason.studies.tables import TABLES

from stop_requests import stop_after

WIDE = {"COLUMNS": "400"}
TIMING = {"seconds", "train_seconds", "hardware"}  # of results.json: what the clock and machine decide


def sets(data: Path) -> list[str]:
    # one torch thread everywhere: a --jobs worker's thread count would otherwise round otherwise
    return [*TINY, f"data.data_dir={data}", "train.threads=1"]


def reproduce(out: Path, data: Path, *args) -> dict:
    """`reproduce ibarz2022` on bfs at 2 seeds (one column: one group of 2 with --seed-batch 2), as JSON."""
    flags = [x for s in sets(data) for x in ("--set", s)]
    return json.loads(ok(invoke("reproduce", "ibarz2022", "--tasks", "bfs", "--seeds", "2", "--out", out, *flags,
                                "--json", *args, env=WIDE)))


def cell_runs(out: Path) -> list[Path]:
    return sorted((out / "cells").glob("triplet_gmpnn/*/bfs/seed*/run"))


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """The reference: each cell trained alone (--seed-batch 1)."""
    root = tmp_path_factory.mktemp("alone")
    reproduce(root / "rep", root / "data", "--seed-batch", "1")
    return root


def same_files(a: Path, b: Path, exact: bool) -> None:
    """Two cell run directories hold the same files and records; weights equal (exact) or within what Adam
    makes of float rounding (tests/train/test_seed_batch.py: up to 2 x lr per step)."""
    assert sorted(p.relative_to(a) for p in a.rglob("*")) == sorted(p.relative_to(b) for p in b.rglob("*"))
    ca, cb = (json.loads((d / "config.json").read_text()) for d in (a, b))
    if not exact:  # the vmapped step records the shape-static step it ran (an incidental key)
        assert cb["config"]["train"]["static_step"] and cb["sources"].pop("train.static_step") == "seed group (vmap)"
        cb["config"]["train"]["static_step"] = ca["config"]["train"]["static_step"]
    assert ca == cb
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (a, b))
    if not exact:
        assert rb["config"]["train"]["static_step"]
        rb["config"]["train"]["static_step"] = ra["config"]["train"]["static_step"]
    scores = {"test", "best_val", "per_task"}
    assert {k: v for k, v in ra.items() if k not in TIMING | scores} == \
        {k: v for k, v in rb.items() if k not in TIMING | scores}
    ma, mb = ([json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()] for d in (a, b))
    assert [(r["event"], r.get("examples")) for r in ma] == [(r["event"], r.get("examples")) for r in mb]
    t = ca["config"]["train"]
    lr, steps = t["lr"], t["train_examples"] // t["batch_size"]
    for which in ("last", "best"):
        wa, wb = (load_file(str(d / which / "model.safetensors")) for d in (a, b))
        assert wa.keys() == wb.keys()
        for k in wa:
            if exact:
                assert np.array_equal(wa[k], wb[k]), (which, k)
            else:
                assert np.abs(wa[k] - wb[k]).max() <= 2 * lr * steps, (which, k)
    if exact:
        assert [{k: v for k, v in r.items() if k != "time"} for r in ma] == \
            [{k: v for k, v in r.items() if k != "time"} for r in mb]
        assert (ra["test"], ra["best_val"]) == (rb["test"], rb["best_val"])


def spy_sizes(monkeypatch, module, name: str) -> list[int]:
    """Records the number of runs of every call of `module.name` (its first argument: the members) in this
    process."""
    sizes: list[int] = []
    real = getattr(module, name)

    def spy(members, *args, **kwargs):
        sizes.append(len(members))
        return real(members, *args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return sizes


def spy_groups(monkeypatch) -> list[int]:
    """Records the size of every seed group trained in this process."""
    import relreason.train.seed_group as seed_group

    return spy_sizes(monkeypatch, seed_group, "train_members")


@pytest.mark.parametrize("strategy", ["loop", "vmap"])
def test_a_seed_group_writes_the_cells_each_alone_writes(alone, tmp_path, monkeypatch, strategy):
    sizes = spy_groups(monkeypatch)
    grouped = reproduce(tmp_path / "rep", alone / "data", "--seed-batch", "2", "--seed-strategy", strategy)
    assert sizes == [2]  # one group of both seeds
    assert not grouped["missing"] and [c["seed"] for c in grouped["cells"]] == [0, 1]
    mine, theirs = cell_runs(tmp_path / "rep"), cell_runs(alone / "rep")
    assert [p.relative_to(tmp_path / "rep") for p in mine] == [p.relative_to(alone / "rep") for p in theirs]
    for a, b in zip(theirs, mine):
        same_files(a, b, exact=strategy == "loop")
    for c in plan_cells(TABLES.get("ibarz2022"), ["bfs"], (0, 1), None, tmp_path / "rep", sets(alone / "data")):
        assert cell_state(c) == "done"  # read back as any finished cell
    again = reproduce(tmp_path / "rep", alone / "data", "--seed-batch", "2", "--seed-strategy", strategy)
    assert sizes == [2] and again["cells"] == grouped["cells"]  # nothing trained again


def test_a_group_stopped_mid_way_resumes_each_cell(alone, tmp_path, monkeypatch):
    """Stopped after its first update (last/ saved), one member then lost (as if killed before its first
    checkpoint): the next call trains the group again, resuming the one and starting the other, and both end
    as the cells trained alone, bit for bit (the loop strategy, as on CPU by default)."""
    out = tmp_path / "rep"
    options = SweepOptions(tasks="bfs", seeds=(0, 1), out=out, sets=tuple(sets(alone / "data")), seed_batch=2)
    with monkeypatch.context() as m:
        stop_after(m, 1)
        with pytest.raises(KeyboardInterrupt):
            run_table("ibarz2022", options, log=lambda msg: None)
    cells = plan_cells(TABLES.get("ibarz2022"), ["bfs"], (0, 1), None, out, sets(alone / "data"))
    assert [cell_state(c) for c in cells] == ["partial", "partial"]
    shutil.rmtree(cells[1].run_dir)
    assert [cell_state(c) for c in cells] == ["partial", "new"]
    sizes = spy_groups(monkeypatch)
    sweep = run_table("ibarz2022", options, log=lambda msg: None)
    assert sizes == [2] and not sweep.result["missing"]
    for a, b in zip(cell_runs(alone / "rep"), cell_runs(out)):
        wa, wb = load_file(str(a / "last" / "model.safetensors")), load_file(str(b / "last" / "model.safetensors"))
        assert all(np.array_equal(wa[k], wb[k]) for k in wa)
    events = [[json.loads(line)["event"] for line in (c.run_dir / "metrics.jsonl").read_text().splitlines()]
              for c in cells]
    assert "resume" in events[0] and "resume" not in events[1]


def test_a_cell_another_process_holds_is_left_out_of_its_group(alone, tmp_path):
    from relreason.runtime import RunLock

    out = tmp_path / "rep"
    cells = plan_cells(TABLES.get("ibarz2022"), ["bfs"], (0, 1), None, out, sets(alone / "data"))
    logged: list[str] = []
    with RunLock(cells[0].run_dir):  # as if another worker or machine were training it
        options = SweepOptions(tasks="bfs", seeds=(0, 1), out=out, sets=tuple(sets(alone / "data")), seed_batch=2)
        sweep = run_table("ibarz2022", options, log=logged.append)
    assert sweep.result["missing"] == ["triplet-gmpnn / bfs / seed 0"] and cell_state(cells[1]) == "done"
    assert "ibarz2022: triplet-gmpnn / bfs / seed 0: another process trains it; skipped" in logged
    assert not (cells[0].run_dir / "config.json").exists()  # left alone


@pytest.mark.slow
def test_jobs_train_seed_groups_in_workers(alone, tmp_path):
    res = invoke("reproduce", "ibarz2022", "--tasks", "bfs", "--seeds", "2", "--out", tmp_path / "rep",
                 *[x for s in sets(alone / "data") for x in ("--set", s)], "--seed-batch", "2", "--jobs", "2",
                 "--seed-strategy", "vmap", env=WIDE)
    assert res.exit_code == 0, res.output
    assert "started triplet-gmpnn / bfs / seeds 0, 1 (1 running)" in res.output  # one group, in a worker
    for a, b in zip(cell_runs(alone / "rep"), cell_runs(tmp_path / "rep")):
        same_files(a, b, exact=False)  # vmapped: the group's own mark (same_files checks it), so it trained as one


def test_shards_take_whole_groups(alone, tmp_path):
    none = reproduce(tmp_path / "rep", alone / "data", "--seed-batch", "2", "--shard", "2/2")
    assert not none["cells"] and len(none["missing"]) == 2 and not cell_runs(tmp_path / "rep")


@pytest.mark.parametrize("args, message", [
    (["--seed-batch", "0"], "--seed-batch 0 must be auto or a number of seeds of at least 1"),
    (["--seed-batch", "x"], "--seed-batch x must be auto"),
    (["--seed-strategy", "fast"], "--seed-strategy 'fast' is not one of auto, vmap, loop"),
])
def test_bad_seed_batches_are_one_line_errors(tmp_path, args, message):
    one_line_error(invoke("reproduce", "ibarz2022", "--tasks", "bfs", "--out", tmp_path, *args), message)
    one_line_error(invoke("ablate", "single-layer", "--tasks", "bfs", "--out", tmp_path, *args), message)
    assert not any(tmp_path.iterdir())


def test_list_shows_each_total_alone_and_in_seed_groups(tmp_path):
    """clrs30 at its paper's 3 seeds: one group of 3 per column and task; a group's training time is its
    cells' over the measured ratio, its validations, test and start-up as alone."""
    costs = tmp_path / "costs.json"
    cell = {"seconds": 1800.0, "train_s": 1600.0, "val_s": 150.0, "test_s": 1.0}
    costs.write_text(json.dumps({
        "clrs30": {"hardware": "Test CPU", "cells": {"mpnn on bellman_ford": cell, "pgn on bellman_ford": cell}},
        "seed_groups": {"hardware": "Test CPU", "date": "today", "commands": ["python scripts/bench_seeds.py x"],
                        "ratios": {"mpnn clrs30 K=3": {"group_loop": 1.0, "group_vmap": 0.5, "jobs2": 1.5},
                                   "pgn clrs30 K=3": {"group_loop": 1.0, "group_vmap": 0.5, "jobs2": 1.5},
                                   "rt paper K=3": {"group_loop": 0.8, "group_vmap": 2.0, "jobs2": 1.5}}},
        "rt-table13": {"cells": {"rt on bellman_ford": cell, "transformer on bellman_ford": cell}}}))
    data = json.loads(ok(invoke("reproduce", "--list", "--costs", costs, "--json")))
    rows = {t["table"]: t for t in data["tables"]}
    alone = 1800.0 * 2 * 30 * 3
    assert rows["clrs30"]["total_seconds"] == alone
    assert rows["clrs30"]["grouped_seconds"] == {"loop": alone, "vmap": (200.0 + 1600.0 / 0.5) * 2 * 30 * 3}
    assert rows["rt-table13"]["grouped_seconds"] is None  # 20 seeds: groups of 4, not measured here
    assert "group of 4 not measured" in rows["rt-table13"]["in seed groups (predicted)"]
    text = ok(invoke("reproduce", "--list", "--costs", costs, env=WIDE))
    assert "in seed groups" in text and "loop 90.0 h (1.00x), vmap 170 h (0.53x)" in text
    one = json.loads(ok(invoke("reproduce", "rt-table13", "--tasks", "core8", "--seeds", "3", "--list", "--costs",
                               costs, "--json")))["tables"]
    assert [r["table"] for r in one] == ["rt-table13"] and one[0]["seeds"] == 3 and one[0]["tasks"] == 8
    assert one[0]["total_seconds"] == 1800.0 * 2 * 8 * 3
    assert "transformer: group of 3 not measured" in one[0]["in seed groups (predicted)"]
    one_line_error(invoke("reproduce", "--list", "--seeds", "3"), "--list takes --tasks and --seeds with a table name")


def test_the_shipped_ratios_price_the_rt_core8_table_at_3_seeds():
    """relreason/studies/costs.json ships measured group ratios (with the machine and the commands) for
    every column of rt-table19 in groups of 3: `reproduce rt-table19 --tasks core8 --seeds 3 --list`."""
    from relreason.studies.sweep import costs_file

    groups = json.loads(costs_file().read_text())["seed_groups"]
    assert groups["hardware"] and all(c.startswith("python scripts/bench_seeds.py") for c in groups["commands"])
    row = json.loads(ok(invoke("reproduce", "rt-table19", "--tasks", "core8", "--seeds", "3", "--list",
                               "--json")))["tables"][0]
    assert row["total_seconds"] and set(row["grouped_seconds"]) == {"loop", "vmap"}


def test_seed_batch_auto_groups_on_an_accelerator_only_without_cuda_graphs(tmp_path, monkeypatch):
    """`--seed-batch auto`: 1 on CPU; the seed count up to 4 on an accelerator; 1 again for cells captured as
    CUDA graphs (seed groups refuse them, and a captured single run outran every group: results/gpu)."""
    import torch

    import relreason.models.build as build
    from relreason.studies.cells import plan_cells
    from relreason.studies.sweep import default_seed_batch
    from relreason.studies.tables import TABLES

    study = TABLES.get("ibarz2022")
    cells = plan_cells(study, ["bellman_ford"], (0, 1, 2), None, tmp_path, [])
    assert default_seed_batch(cells, 3) == 1
    monkeypatch.setattr(build, "resolve_device", lambda device: torch.device("cuda"))
    assert default_seed_batch(cells, 3) == 3 and default_seed_batch(cells * 3, 9) == 4
    graphed = plan_cells(study, ["bellman_ford"], (0, 1, 2), None, tmp_path,
                         ["train.static_step=true", "train.cuda_graph=true"])
    assert default_seed_batch(graphed, 3) == 1


def spy_packs(monkeypatch) -> list[int]:
    """The sizes of the packs trained (relreason.train.pack.train_pack), in order."""
    from relreason.train import pack

    return spy_sizes(monkeypatch, pack, "train_pack")


def test_pack_on_trains_the_cells_in_one_pack_each_as_alone(alone, tmp_path, monkeypatch):
    """`--pack on` (on the CPU): the two cells train as one pack, each cell's run directory bit for bit what
    training it alone writes; `--pack auto` on the CPU packs nothing (nothing changes there)."""
    sizes = spy_packs(monkeypatch)
    packed = reproduce(tmp_path / "rep", alone / "data", "--pack", "on")
    assert sizes == [2] and not packed["missing"]
    for a, b in zip(cell_runs(alone / "rep"), cell_runs(tmp_path / "rep")):
        same_files(a, b, exact=True)
        wa, wb = (load_file(str(d / "last" / "model.safetensors")) for d in (a, b))
        for k in wa:
            assert np.array_equal(wa[k], wb[k]), k
    reproduce(tmp_path / "auto", alone / "data", "--pack", "auto")
    assert sizes == [2]


def test_bad_packs_are_one_line_errors(tmp_path):
    one_line_error(invoke("reproduce", "ibarz2022", "--tasks", "bfs", "--out", tmp_path, "--pack", "fast"),
                   "--pack 'fast' is not one of auto, on, off")
    one_line_error(invoke("ablate", "single-layer", "--tasks", "bfs", "--out", tmp_path, "--pack", "on",
                          "--launcher", "local-submitit"), "--pack trains its cells in this process")
