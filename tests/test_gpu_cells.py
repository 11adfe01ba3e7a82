"""scripts/gpu_cells.sh, minutes of GPU turned into finished cells, run on the CPU (`--device cpu --quick`): the
next unfinished cells of a (temporary, tiny) plan trained in one pack, the measurement of --measure, at most 8
files of at most 16 MB under OUT; a pack stopped mid-way (as at the deadline) parks every cell in
scripts/park_cells.sh's format, and the next run restores and finishes them."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=32", "train.eval_every_examples=16",
        "data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=5"]
PLAN = "1: clrs30 --models mpnn --tasks bfs,dfs --seeds 1\n"
CELLS = ["mpnn/clrs30/bfs/seed0", "mpnn/clrs30/dfs/seed0"]


def script():
    spec = importlib.util.spec_from_file_location("gpu_cells", ROOT / "scripts" / "gpu_cells.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def args(out: Path, results: Path, *more, watched: bool = False) -> list[str]:
    """The script's arguments for the tiny plan under `results`: trained in this process (so that a test can
    patch it), or `watched` by the script's own watching process, as on a GPU machine."""
    sets = [x for s in TINY + [f"data.data_dir={results.parent / 'data'}"] for x in ("--set", s)]
    return ["--out", str(out), "--device", "cpu", "--quick", "--minutes", "5", "--pack-size", "2", "--plan",
            str(results / "plan.txt"),
            "--results", str(results), *sets, *more, *([] if watched else ["--in-process"])]


def within_limits(out: Path) -> dict:
    files = sorted(p for p in out.iterdir())
    assert 0 < len(files) <= 8 and all(p.is_file() and p.stat().st_size <= 16 * 2**20 for p in files)
    report = json.loads((out / "gpu_cells.json").read_text())
    assert sorted(report["files"]) == [p.name for p in files]
    return report


def test_a_stopped_pack_parks_its_cells_and_the_next_run_finishes_them(tmp_path, monkeypatch):
    from stop_requests import stop_after

    results = tmp_path / "results"
    results.mkdir()
    (results / "plan.txt").write_text(PLAN)
    gc = script()
    with monkeypatch.context() as m:
        stop_after(m, 3)  # the deadline's stop, by steps: each cell saves last/ after its 3rd step
        assert gc.main(args(tmp_path / "out1", results, "--measure", "--steps", "2")) == 0
    report = within_limits(tmp_path / "out1")
    assert report["cells"] == {c: "interrupted" for c in CELLS} and not report["finished"]
    assert report["parked"] == [c.replace("/", "~") + ".tar" for c in CELLS]
    assert 0 <= report["data_wait"] < 1 and report["step_seconds"] > 0
    assert [(r["cells"], r["tf32"]) for r in report["measure"]] == [(1, False), (2, False)]
    assert all(r["examples_per_s"] > 0 and r["tflops_per_s"] > 0 for r in report["measure"])
    assert [(r["val_serial"] is None, r["val_side_by_side"] is None) for r in report["measure"]] == \
        [(True, True), (False, False)]  # K = 2: both validations measured
    assert all(r["val_serial"] > 0 and r["val_side_by_side"] > 0 for r in report["measure"][1:])
    with tarfile.open(tmp_path / "out1" / "results.tar") as tar:
        names = tar.getnames()
        tar.extractall(results, filter="data")  # what a session commits
    assert {f"parked/{c.replace('/', '~')}.tar" for c in CELLS} <= set(names)
    assert {f"progress/{c}.json" for c in CELLS} <= set(names)
    for c in CELLS:  # scripts/park_cells.sh's layout: cells/<rel>/run without its lock
        with tarfile.open(results / "parked" / (c.replace("/", "~") + ".tar")) as tar:
            inner = tar.getnames()
        assert f"cells/{c}/run/last/trainer_state.json" in inner and not any(n.endswith(".lock") for n in inner)

    assert gc.main(args(tmp_path / "out2", results)) == 0
    report = within_limits(tmp_path / "out2")
    assert report["cells"] == {c: "trained" for c in CELLS}
    assert report["finished"] == [f"{c}.json" for c in CELLS] and not report["parked"]
    assert report["obsolete_parked"] == [c.replace("/", "~") + ".tar" for c in CELLS]
    assert "restored parked mpnn/clrs30/bfs/seed0" in (tmp_path / "out2" / "gpu_cells.log").read_text()
    with tarfile.open(tmp_path / "out2" / "results.tar") as tar:
        tar.extractall(results, filter="data")
    for c in CELLS:
        res = json.loads((results / "cells" / f"{c}.json").read_text())
        assert res["examples"] == 32 and res["steps"] == 8  # resumed at step 3, not started over
        assert res["command"] == report["command"]  # the command that ran its last session, as RESULTS.md says
        curve = json.loads((results / "curves" / f"{c}.json").read_text())
        assert [v["examples"] for v in curve["validations"]] == [0, 16, 32]


def test_the_watched_run_trains_in_a_child_process_and_passes_its_report_on(tmp_path):
    """As on a GPU machine: the script trains in a child process that it watches; the child's report is the run's."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "plan.txt").write_text(PLAN)
    assert script().main(args(tmp_path / "out", results, watched=True)) == 0
    report = within_limits(tmp_path / "out")
    assert report["cells"] == {c: "trained" for c in CELLS} and report["finished"] == [f"{c}.json" for c in CELLS]
    assert "--in-process" not in report["command"] and "error" not in report  # the command run, not its child's


# A training process stuck in a call that holds the interpreter's lock (as a device call can): its deadline's timer
# thread and signal handlers never run. ctypes.PyDLL keeps the lock through the C call.
HANG = ("import ctypes, faulthandler, sys; log = open(sys.argv[1], 'a'); faulthandler.enable(log, all_threads=True); "
        "ctypes.PyDLL(None).sleep(600)")


@pytest.mark.parametrize("limit, why", [(["--minutes", "0.02", "--grace", "1", "--stall", "0"], "outran --minutes"),
                                        (["--stall", "1", "--fallback", "none"],
                                         "changed nothing under its work directory")])
def test_a_training_process_that_hangs_is_stopped_its_stacks_logged_and_its_cells_parked(tmp_path, monkeypatch,
                                                                                         limit, why):
    """The first GPU run printed nothing after its first pack started and ended at the command's limit with nothing
    saved. Now the watcher stops a child that outruns --minutes + --grace, or changes nothing under its work
    directory for --stall seconds, with SIGABRT (faulthandler writes every thread's stack to the log), parks what
    the child left under its work directory, and writes the report."""
    from stop_requests import stop_after

    results, work = tmp_path / "results", tmp_path / "work"
    results.mkdir()
    (results / "plan.txt").write_text(PLAN)
    gc = script()
    with monkeypatch.context() as m:  # a child that trained 3 steps of each cell, then stuck
        stop_after(m, 3)
        assert gc.main(args(tmp_path / "out1", results, "--work", str(work))) == 0
    assert sorted(json.loads((work / gc.CELLS_FILE).read_text())["cells"]) == CELLS
    (results / "bfs.txt").write_text(PLAN.replace("bfs,dfs", "bfs"))  # ... and had finished bfs
    assert gc.main(args(tmp_path / "out1b", results, "--work", str(work), "--plan", str(results / "bfs.txt"))) == 0
    (work / gc.CELLS_FILE).write_text(json.dumps({"cells": CELLS, "again": []}))  # the cells it took on
    out = tmp_path / "out2"
    monkeypatch.setattr(gc, "child_command", lambda argv: [sys.executable, "-c", HANG, str(out / "gpu_cells.log")])
    assert gc.main(args(out, results, "--work", str(work), *limit, watched=True)) == 1
    report = within_limits(out)
    assert report["cells"][CELLS[0]] == "trained" and report["cells"][CELLS[1]].startswith("stopped: ")
    assert report["finished"] == [f"{CELLS[0]}.json"] and report["parked"] == [CELLS[1].replace("/", "~") + ".tar"]
    assert why in report["error"] and "**Error:**" in (out / "gpu_cells.md").read_text()
    log = (out / "gpu_cells.log").read_text()
    assert "stopping it with SIGABRT" in log and "Fatal Python error: Aborted" in log  # the stuck stacks
    assert 'File "<string>", line 1 in <module>' in log
    with tarfile.open(out / "results.tar") as tar:
        assert {f"parked/{CELLS[1].replace('/', '~')}.tar", f"cells/{CELLS[0]}.json"} <= set(tar.getnames())


def test_a_stalled_training_process_is_followed_by_the_next_fallback_on_the_same_cells(tmp_path, monkeypatch):
    """A GPU run's minutes are not lost to one stuck path: the watcher stops a stalled child (its stacks logged)
    and starts the next rung of the --fallback ladder, its options appended to the command, on the same cells from
    their checkpoints for the minutes left; the report names the stalled attempt, and the cells finish."""
    from stop_requests import stop_after

    results, work = tmp_path / "results", tmp_path / "work"
    results.mkdir()
    (results / "plan.txt").write_text(PLAN)
    gc = script()
    with monkeypatch.context() as m:  # the cells trained 3 steps each, then a stuck child
        stop_after(m, 3)
        assert gc.main(args(tmp_path / "out1", results, "--work", str(work))) == 0
    out, children = tmp_path / "out2", []
    real = gc.child_command

    def child(argv):
        children.append(argv)
        return [sys.executable, "-c", HANG, str(out / "gpu_cells.log")] if len(children) == 1 else real(argv)
    monkeypatch.setattr(gc, "child_command", child)
    # --stall 6, a look every 0.5 s: the stuck child is stopped after 6 s; the next one, importing torch on a
    # loaded machine, has that long to log its first line
    monkeypatch.setattr(gc, "POLL_SECONDS", 0.5)
    assert gc.main(args(out, results, "--work", str(work), "--stall", "6", "--fallback", "--pack-size 2",
                        "--fallback", "--pack-size 1 --cores 1", watched=True)) == 0  # the first rung: no change
    given = children[0][:-5]  # the command's own options, then --minutes M --in-process --work W
    assert len(children) == 2 and children[1] == [*given, "--pack-size", "1", "--cores", "1", "--minutes",
                                                  children[1][-4], "--in-process", "--work", str(work)]
    assert float(children[1][-4]) < float(children[0][-4]) <= 5  # the minutes left
    report = within_limits(out)
    assert report["cells"] == {c: "trained" for c in CELLS} and report["finished"] == [f"{c}.json" for c in CELLS]
    assert report["pack_size"] == 1 and report["cores"] == 1  # the fallback's options reached the training
    assert [a["options"] for a in report["attempts"]] == ["(as given)"]
    assert "changed nothing under its work directory" in report["attempts"][0]["stopped"]
    assert "--in-process" not in report["command"] and "error" not in report
    log = (out / "gpu_cells.log").read_text()
    assert "Fatal Python error: Aborted" in log and "continuing with the next --fallback" in log
    assert "restored parked" not in log  # resumed from the work directory's checkpoints, not started over
    assert log.count("resumed ") == len(CELLS)
    assert "Stalled first" in (out / "gpu_cells.md").read_text()


def test_a_fallback_that_is_not_options_of_the_script_is_refused_at_once(tmp_path, capfd):
    """A rung is parsed when the command starts, not first when a stall calls on it, minutes later."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "plan.txt").write_text(PLAN)
    assert script().main(args(tmp_path / "out", results, "--fallback", "--pack-size 1",
                              "--fallback", "--bogus 1", watched=True)) == 2
    err = capfd.readouterr().err
    assert "Error: --fallback '--bogus 1' is not options of this script" in err
    assert not (tmp_path / "out" / "gpu_cells.log").exists()  # nothing started


def test_the_fallback_ladder(tmp_path):
    """The ladder's rungs as options; a rung that changes nothing in the command (the default --pack-size 1 after
    a run of one cell at a time) is skipped rather than training the stalled configuration again."""
    gc = script()
    parse = lambda *more: gc.fallbacks(argparse.Namespace(fallback=list(more) if more else None))  # noqa: E731
    assert parse() == [s.split() for s in gc.DEFAULT_FALLBACKS]
    assert parse("none") == []
    assert parse("--eval-threads 1", "--set 'a.b=c d'") == [["--eval-threads", "1"], ["--set", "a.b=c d"]]
    base = ["--out", str(tmp_path)]
    assert gc.same_options(base, [], ["--pack-size", "1"]) and gc.same_options(base, ["--cores", "2"], ["--cores", "2"])
    assert not gc.same_options(base, [], ["--pack-size", "3"])
    assert not gc.same_options(base, [], ["--set", "train.cuda_graph=false"])


def test_a_deadline_that_passes_while_a_pack_is_set_up_still_stops_it(tmp_path, monkeypatch):
    """The deadline's signal can arrive before a pack's stop handler is installed (its data and models being
    made); it is sent again until the training stops, so the pack stops after a step and parks its cells rather
    than training on to its end. The deadline fires at a chosen point (in the pack's set-up), not by the clock."""
    import threading
    import time

    from relreason.studies import training

    gc = script()
    monkeypatch.setattr(gc, "RESEND_SECONDS", 0.2)
    fire = threading.Event()

    class Deadline(gc.Deadline):  # its minutes pass when `fire` is set, not by the clock
        def _signal(self, seconds):
            fire.wait()
            super()._signal(0.0)

    original = training.train_group

    def late(*a, **k):
        fire.set()
        time.sleep(1.0)  # the first signal arrives here, before the pack's own handler
        return original(*a, **k)

    monkeypatch.setattr(gc, "Deadline", Deadline)
    monkeypatch.setattr(training, "train_group", late)
    results = tmp_path / "results"
    results.mkdir()
    (results / "plan.txt").write_text(PLAN)
    more = ["--set", "train.train_examples=8000", "--dump-every", "1"]  # 2,000 steps
    assert gc.main(args(tmp_path / "out", results, *more)) == 0
    report = within_limits(tmp_path / "out")
    assert report["cells"] == {c: "interrupted" for c in CELLS} and len(report["parked"]) == 2
    log = (tmp_path / "out" / "gpu_cells.log").read_text()  # where the time went: the stacks, every second
    assert "(most recent call first):" in log and "in late" in log


def test_the_cores_the_data_streams_share_reach_the_pack(tmp_path, monkeypatch):
    """`--cores 1` (one generating process per cell: a fallback of docs/gpu.md) reaches the pack's share."""
    from relreason.train import pack

    shares = []
    share = pack.stream_workers
    monkeypatch.setattr(pack, "stream_workers", lambda cells, cores: shares.append(cores) or share(cells, cores))
    results = tmp_path / "results"
    results.mkdir()
    (results / "plan.txt").write_text(PLAN)
    assert script().main(args(tmp_path / "out", results, "--cores", "7")) == 0
    assert shares == [7] and within_limits(tmp_path / "out")["cores"] == 7


def break_side_by_side(monkeypatch) -> None:
    """Validating side by side fails (as it might on a device it never ran on)."""
    from relreason.train.seed_group import SeedGroup

    side_by_side = SeedGroup.side_by_side

    def broken(self, members, work):
        if self.eval_threads > 1 and len(members) > 1:
            raise RuntimeError("side by side broke")
        return side_by_side(self, members, work)

    monkeypatch.setattr(SeedGroup, "side_by_side", broken)


def break_packs(monkeypatch, then=lambda failures: None) -> None:
    """Any pack of several cells fails at its first training step, however it validates; `then(failures so
    far)` runs at each failure."""
    from relreason.train.seed_group import SeedGroup

    step, failures = SeedGroup.step, []

    def broken(self, members, *a, **kw):
        if len(members) > 1:
            failures.append(len(members))
            then(failures)
            raise RuntimeError("packs broke")
        return step(self, members, *a, **kw)

    monkeypatch.setattr(SeedGroup, "step", broken)


@pytest.mark.parametrize("breaking, failed", [
    (break_side_by_side, [(2, 2, "RuntimeError: side by side broke")]),
    (break_packs, [(2, 2, "RuntimeError: packs broke"), (2, 1, "RuntimeError: packs broke")]),
], ids=["validating side by side", "every pack"])
def test_a_pack_that_fails_is_trained_again_one_path_down_and_its_cells_finish(tmp_path, monkeypatch, breaking,
                                                                               failed):
    """A GPU run must not lose its minutes to one broken path. A pack that fails is tried again from its cells'
    checkpoints with one validation after another; a pack that fails again is split, and its cells train one at
    a time (an exception is not a stall, so the watcher's ladder never sees it). Both cells finish either way,
    and the report and the exit status say what broke."""
    breaking(monkeypatch)
    results = tmp_path / "results"
    results.mkdir()
    (results / "plan.txt").write_text(PLAN)
    assert script().main(args(tmp_path / "out", results, "--eval-threads", "2")) == 1
    report = within_limits(tmp_path / "out")
    assert [(f["pack_size"], f["eval_threads"], f["error"]) for f in report["failures"]] == failed
    assert report["cells"] == {c: "trained" for c in CELLS} and report["finished"] == [f"{c}.json" for c in CELLS]
    assert f"A pack failed (2 cells, eval_threads 2): {failed[0][2]}" in (tmp_path / "out" / "gpu_cells.md").read_text()


def test_a_split_pack_whose_deadline_passes_before_its_cells_train_alone_reports_them(tmp_path, monkeypatch):
    """The deadline passes between a pack's second failure and its cells' turns alone: they stay in the report
    (failed, their checkpoints parked where they have any), never dropped from it."""
    gc = script()

    def deadline_at_the_second(failures):
        if len(failures) == 2:
            monkeypatch.setattr(gc.Deadline, "left", lambda self: 0.0)

    break_packs(monkeypatch, deadline_at_the_second)
    results = tmp_path / "results"
    results.mkdir()
    (results / "plan.txt").write_text(PLAN)
    assert gc.main(args(tmp_path / "out", results)) == 1
    report = within_limits(tmp_path / "out")
    assert report["cells"] == {c: "failed" for c in CELLS} and len(report["failures"]) == 2
    assert report["parked"] == [c.replace("/", "~") + ".tar" for c in CELLS]  # their step-0 checkpoints


def test_a_transnar_cell_trains_after_its_nar_cell_and_a_committed_nar_record_stays(tmp_path):
    """A NAR's weights are never committed: the TransNAR cell's NAR cell trains first, in a pack of its own
    (packed together, the TransNAR would start before its NAR exists); where a CPU lane already committed that NAR
    cell, it trains again for its TransNAR cells and its committed record is not replaced."""
    text = ["model.layers=1", "model.width=16", "model.heads=2", "train.batch_size=4", "train.train_examples=8",
            "train.eval_every_examples=8", "data.train_num=8", "data.val_num=1", "data.test_num=2",
            "nar.model.hidden=8", "nar.train.batch_size=4", "nar.train.train_examples=8",
            "nar.train.eval_every_examples=8", "nar.data.val_num=4", "nar.data.test_num=4"]
    sets = [x for s in text for x in ("--set", s)]
    results = tmp_path / "results"
    results.mkdir()
    (results / "plan.txt").write_text("1: transnar-ood --tasks text:insertion_sort --seeds 1\n")
    nar = "triplet_gmpnn/transnar_ood_nar/insertion_sort/seed0"

    def once(out):
        assert script().main(["--out", str(out), "--device", "cpu", "--minutes", "5", "--pack-size", "8", "--plan",
                              str(results / "plan.txt"), "--results", str(results), *sets, "--in-process"]) == 0
        report = within_limits(out)
        log = (out / "gpu_cells.log").read_text()
        return report, log

    report, log = once(tmp_path / "out1")
    assert report["cells"] == {nar: "trained", "transnar/transnar_ood/text:insertion_sort/seed0": "trained",
                               "transnar/transnar_ood+model.use_nar=false/text:insertion_sort/seed0": "trained"}
    assert log.index("pack of 1: triplet-gmpnn nar / insertion_sort / seed 0") < log.index("pack of 2: ")
    assert f"{nar}.json" in report["finished"]
    with tarfile.open(tmp_path / "out1" / "results.tar") as tar:  # a lane committed the NAR cell alone
        tar.extractall(results, filter=lambda member, path: member if nar in member.name else None)
    committed = (results / "cells" / f"{nar}.json").read_bytes()
    report, _ = once(tmp_path / "out2")
    assert report["cells"][nar] == "trained" and f"{nar}.json" not in report["finished"]
    assert len(report["finished"]) == 2
    with tarfile.open(tmp_path / "out2" / "results.tar") as tar:
        tar.extractall(results, filter="data")
    assert (results / "cells" / f"{nar}.json").read_bytes() == committed


def test_the_committed_plan_plans_for_a_gpu_run(tmp_path):
    """What a GPU run does first, without training: every line of results/plan.txt plans its next cells (text
    tables too: no graph-only key set on them) and each is captured where it can be (a text model is not, and
    says so, never crashes on graph-only settings)."""
    gc = script()
    work, committed = tmp_path / "work", tmp_path / "results"  # none committed: each line plans all its cells
    committed.mkdir()
    lines = [x for x in (ROOT / "results" / "plan.txt").read_text().splitlines() if x and not x.startswith("#")]
    kinds = {x.split()[1]: x for x in reversed(lines)}  # each table's first line of the committed plan
    assert {"transnar-ood", "ibarz2022"} <= set(kinds)
    (committed / "plan.txt").write_text("\n".join(kinds.values()) + "\n")
    cells = gc.next_cells(committed / "plan.txt", committed, work, ["train.device=cuda"], lambda m: None,
                          str(work / "data"))
    assert cells
    captured = gc.captured(cells, lambda m: None)
    text = [c for c in captured if c.config.model_name in ("transnar", "text_transformer")]
    assert text and all(not c.config.train.cuda_graph for c in text)  # the plan holds the TransNAR study
    assert all(c.config.train.cuda_graph for c in captured if c.config.model_name == "triplet_gmpnn")
    assert gc.capture_problems(text[0].config) == ["not a graph (NAR) workload"]


def test_the_committed_gpu_plan_takes_the_rt_then_captured_core8_cells_a_task_to_a_pack(tmp_path):
    """results/gpu_plan.txt (docs/gpu.md): the RT's bellman_ford cells, then Triplet-GMPNN core-8 cells, every one
    captured, a task's seeds next to each other (a --pack-size 3 run packs one task's seeds)."""
    from relreason.tasks import expand_tasks

    gc = script()
    work = tmp_path / "work"
    cells = gc.captured(gc.next_cells(ROOT / "results" / "gpu_plan.txt", ROOT / "results", work,
                                      ["train.device=cuda"], lambda m: None, str(work / "data")), lambda m: None)
    rt = [c for c in cells if c.config.model_name == "rt"]
    assert [c.task for c in rt] == ["bellman_ford"] * 3 and cells[:3] == rt  # the RT's cells first (issue 39)
    assert rt[0].config.data.order.value == "fixed"  # the reference's order (run.py's train sampler of seed 1)
    assert all(c.config.model_name == "triplet_gmpnn" and c.task in expand_tasks("core8") for c in cells[3:])
    assert all(c.config.train.cuda_graph for c in cells)
    tasks = [c.task for c in cells]
    assert tasks == sorted(tasks, key=tasks.index)  # each task's cells together


def test_the_results_are_split_or_refused_beyond_the_limits(tmp_path, monkeypatch):
    gc = script()
    stage, out = tmp_path / "stage", tmp_path / "out"
    stage.mkdir()
    out.mkdir()
    (stage / "big.bin").write_bytes(os.urandom(3000))
    monkeypatch.setattr(gc, "MAX_BYTES", 4096)  # a tar of one file is 10240 bytes (tar's record size): 3 parts
    assert gc.write_bundle(stage, out, 5) == [f"results.tar.part{k:02d}" for k in range(3)]
    assert all((out / f"results.tar.part{k:02d}").stat().st_size <= 4096 for k in range(3))
    joined = b"".join((out / f"results.tar.part{k:02d}").read_bytes() for k in range(3))
    (tmp_path / "joined.tar").write_bytes(joined)
    with tarfile.open(tmp_path / "joined.tar") as tar:
        assert tar.getnames() == ["big.bin"]
    try:
        gc.write_bundle(stage, tmp_path / "out", 2)
    except RuntimeError as e:
        assert "more than the 2 files left" in str(e)
    else:
        raise AssertionError("a bundle over the file budget was written")


def test_the_script_refuses_a_used_out_and_cuda_without_a_gpu(tmp_path, capfd):
    import torch

    env = {**os.environ, "PYTHON": sys.executable}
    (tmp_path / "x").write_text("")
    res = subprocess.run([str(ROOT / "scripts" / "gpu_cells.sh"), str(tmp_path), "--device", "cpu"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and f"Error: {tmp_path} is not empty" in res.stderr
    if not torch.cuda.is_available():  # said by the training process; the watcher passes its status on
        assert script().main(["--out", str(tmp_path / "o")]) == 1
        assert "torch sees no CUDA device" in capfd.readouterr().err
        assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["gpu_cells.log"]  # nothing to salvage


def test_cells_that_cannot_be_captured_train_in_the_pack_uncaptured(tmp_path):
    from relreason.config import build_config
    from relreason.studies.cells import Cell
    from relreason.studies.variants import Variant

    gc = script()
    assert gc.capture_problems(build_config("mpnn", "bfs", None, [])) == []
    assert gc.capture_problems(build_config("et", "bfs", None, ["processor.dropout=0.1"])) == \
        ["processor.dropout draws from torch's global generator"]
    assert gc.capture_problems(build_config("mpnn", "bfs,dfs", None, [])) == ["not a one-task graph workload"]
    cells = [Cell(Variant("mpnn", "mpnn"), "bfs", 0, tmp_path / "a", build_config("mpnn", "bfs", None, [])),
             Cell(Variant("et", "et"), "bfs", 0, tmp_path / "b",
                  build_config("et", "bfs", None, ["processor.dropout=0.1"]))]
    mine, theirs = gc.captured(cells, lambda m: None)
    assert (mine.config.train.static_step, mine.config.train.cuda_graph) == (True, True)
    assert mine.config.sources["train.cuda_graph"] == "scripts/gpu_cells.py"
    assert theirs is cells[1] and not theirs.config.train.cuda_graph


def test_a_capture_key_the_user_sets_is_not_overwritten(tmp_path):
    """`--set train.cuda_graph=false` (the uncaptured fallback of docs/gpu.md) stands: on CUDA the script
    captures only where neither of its keys was set; on the CPU never."""
    from relreason.config import build_config
    from relreason.studies.cells import Cell
    from relreason.studies.variants import Variant

    gc = script()
    cells = [Cell(Variant("mpnn", "mpnn"), "bfs", 0, tmp_path / "a",
                  build_config("mpnn", "bfs", None, ["train.cuda_graph=false"]))]
    said = []
    for sets in (["train.cuda_graph=false", "model.hidden=8"], [" train.static_step =true"]):
        assert gc.capture_for(cells, "cuda", sets, said.append) == cells
    assert said[0] == "the cells are not captured by this script: --set train.cuda_graph given"
    assert gc.capture_for(cells, "cpu", [], said.append) == cells
    (mine,) = gc.capture_for(cells, "cuda", ["train.cuda_graph_x=1"], said.append)
    assert mine.config.train.cuda_graph and mine.config.train.static_step
