"""`reproduce --verify` across devices (relreason.studies.results.verify_cell): a cell made on a CUDA GPU is
re-trained on the same device kind where this machine has one, else on the CPU and compared within stated
tolerances (CROSS_DEVICE_SCORE_ATOL, CROSS_DEVICE_LOSS_RTOL), and the verdict says which of the two it did.

Why those tolerances hold for CPU against CUDA, tested here without a GPU: the two devices compute the same
float32 maths with kernels that round otherwise (other reduction orders, fused kernels) at every operation, and
training carries that rounding into the weights. A stand-in of the same kind on one device is the vmapped seed
group against the single run (relreason.train.seed_group): batched kernels that round otherwise at every
operation, the same numbers to float rounding. Its first validations' divergence (scores and losses) is measured
below and must lie within a tenth of the tolerances (measured here: scores equal, losses within 1e-6 relative
after 4 steps; a lower bound, since a protocol cell trains longer before its third validation); a code change
that moves a score by two points must not pass."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from relreason.config import build_config
from relreason.errors import RelreasonError
from relreason.runtime import KERNEL_LEVELS, cpu_kernels, hardware, kernels_environment, kernels_hint
from relreason.studies.results import (CROSS_DEVICE_LOSS_RTOL, CROSS_DEVICE_SCORE_ATOL, device_kind, first_kernels,
                                       first_torch, validation_curve, verify_cell, verify_device)
from relreason.studies import results
from relreason.studies.retrain import retrain
from relreason.studies.results_report import verification


def test_the_device_kind_is_read_from_the_hardware_record():
    assert device_kind(["NVIDIA H200, cuda, torch 2.11.0+cu128"]) == "cuda"
    assert device_kind(["Intel(R) Xeon(R) (2 cores), 1 torch thread, cpu, torch 2.11.0",
                        "NVIDIA H100 80GB HBM3, cuda:0, torch 2.11.0"]) == "cuda"
    assert device_kind(["AMD EPYC (16 cores), 16 torch threads, cpu, torch 2.11.0"]) == "cpu"
    assert device_kind([]) == "cpu"
    assert first_torch(["AMD EPYC (2 cores), 1 torch thread, cpu, AVX2 kernels, torch 2.13.0+cpu",
                        "NVIDIA H200, cuda, torch 2.11.0+cu130"]) == "2.13.0"  # the first session's, no build
    assert first_torch(["NVIDIA H200, cuda, torch 2.11.0+cu130"]) == "2.11.0" and first_torch([]) is None


def test_a_cell_trained_again_in_full_is_compared_from_its_start_on():
    """remade_difference (a committed NAR cell trained again for its checkpoint): where both records name the
    weights they started from, another start is the difference (nothing after it compares); then the scores,
    exactly on the device kind that made it, within the stated tolerance across kinds."""
    from relreason.studies.results import remade_difference

    record = {"best_val": 0.75, "best_examples": 320, "test": {"score": 0.5}, "init_weights": "a" * 16}
    assert remade_difference(record, dict(record), across=False) is None
    assert remade_difference(record, {**record, "init_weights": "b" * 16}, across=False) == \
        f"initial weights {'a' * 16} stored, {'b' * 16} now"
    old = {k: v for k, v in record.items() if k != "init_weights"}  # made before the start was recorded
    assert remade_difference(old, {**record, "init_weights": "b" * 16}, across=False) is None
    assert remade_difference(record, {**record, "best_examples": 640}, across=False) == \
        "best validation at 320 examples stored, 640 now"
    assert remade_difference(record, {**record, "best_examples": 640}, across=True) is None
    assert remade_difference(record, {**record, "test": {"score": 0.5 + 1e-9}}, across=False) == \
        "test score 0.500000 stored, 0.500000 now"
    assert remade_difference(record, {**record, "test": {"score": 0.5 + CROSS_DEVICE_SCORE_ATOL / 2}},
                             across=True) is None


def test_a_cpu_session_records_its_kernels_and_verify_reads_them():
    """CPU trajectories are bit-exact only between machines whose torch kernels use the same vector instructions
    (AVX2, AVX512, ...): each CPU session records them, and a verdict says where they differ or are unknown."""
    here = hardware("cpu")
    assert f", cpu, {cpu_kernels()} kernels, torch " in here and device_kind([here]) == "cpu"
    assert first_kernels([here]) == cpu_kernels()


def test_the_first_cpu_session_s_kernels_are_those_a_prefix_was_made_with():
    assert first_kernels(["NVIDIA H200, cuda, torch 2.13.0+cu128",
                          "A (2 cores), 1 torch thread, cpu, AVX2 kernels, torch 2.13.0+cpu",
                          "B (2 cores), 1 torch thread, cpu, AVX512 kernels, torch 2.13.0+cpu"]) == "AVX2"
    assert first_kernels(["AMD EPYC (2 cores), 1 torch thread, cpu, torch 2.13.0+cpu",  # made before recorded
                          "B (2 cores), 1 torch thread, cpu, AVX512 kernels, torch 2.13.0+cpu"]) is None
    assert first_kernels(["NVIDIA H200, cuda, torch 2.13.0+cu128"]) is None and first_kernels([]) is None


def test_a_process_can_lower_its_kernels_but_not_raise_them():
    here = cpu_kernels()
    if here not in KERNEL_LEVELS:  # a machine off the x86 ladder: no level can be asked for
        assert kernels_environment("DEFAULT") is None
        return
    assert kernels_environment("DEFAULT") == {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
    assert kernels_environment(here) == {"ATEN_CPU_CAPABILITY": here.lower(), "MKL_ENABLE_INSTRUCTIONS": here}
    above = KERNEL_LEVELS[KERNEL_LEVELS.index(here) + 1:]
    assert all(kernels_environment(level) is None for level in above) and kernels_environment("AVX1024") is None


def test_the_hint_says_how_to_reach_a_level(monkeypatch):
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert kernels_hint("AVX1024") == "use a machine with AVX1024 kernels"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # a process whose own kernels were lowered
    assert kernels_hint("AVX1024") == ("unset ATEN_CPU_CAPABILITY (it lowers this machine's kernels), or use a "
                                       "machine with AVX1024 kernels")
    if cpu_kernels() in KERNEL_LEVELS:
        assert kernels_hint("DEFAULT") == "set ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2"


@pytest.mark.skipif(cpu_kernels() not in KERNEL_LEVELS[1:],  # DEFAULT, or a machine off the x86 ladder
                    reason="this machine's kernels are the lowest level: there is no other to re-train under")
def test_a_cell_made_with_lower_kernels_is_re_trained_under_them(tmp_path, monkeypatch):
    """A cell whose first session recorded lower kernels than this machine's is re-trained in a child process
    under them (the child's hardware line says so), and the verdict says how; one made with kernels above this
    machine's is re-trained here and its verdict says where it can be verified."""
    sets = ["model.hidden=16", "train.train_examples=32", "train.eval_every_examples=16", "train.batch_size=8",
            "data.val_num=4", "data.test_num=4", "train.threads=1", f"data.data_dir={tmp_path / 'data'}"]
    cfg = build_config("mpnn", "bfs", "quick", sets)
    how = retrain(cfg, tmp_path, "made", "DEFAULT")  # a cell made on a machine of DEFAULT kernels, in a stand-in
    assert how.startswith(f"re-trained under the DEFAULT CPU kernels it was made with (here {cpu_kernels()}; ")
    assert first_kernels(_hardware(tmp_path / "made")) == "DEFAULT"
    made = validation_curve(tmp_path / "made")
    got = verify_cell(cfg, made, 3, tmp_path / "v", made_on="cpu", recorded=True, kernels="DEFAULT")
    assert got["matches"], got["difference"]
    assert got["compared"].endswith(f"; re-trained under the DEFAULT CPU kernels it was made with (here "
                                    f"{cpu_kernels()}; ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS set)")
    assert first_kernels(_hardware(tmp_path / "v" / "verify")) == "DEFAULT"
    above = verify_cell(cfg, made, 2, tmp_path / "w", made_on="cpu", recorded=True, kernels="AVX1024")
    assert above["compared"].endswith(f"; made with AVX1024 CPU kernels, here {cpu_kernels()}, which cannot run "
                                      "them: bit-exact only with the same kernels (to verify it, use a machine with "
                                      "AVX1024 kernels)")
    assert first_kernels(_hardware(tmp_path / "w" / "verify")) == cpu_kernels()
    # kernels not recorded (a cell made before they were): where here's differ, the lower levels are tried in turn
    monkeypatch.setattr(results, "VERIFY_LOSS_RTOL", 0.0)  # losses exactly: a few updates differ in their last bits
    if verify_cell(cfg, made, 3, tmp_path / "n", made_on="cpu")["matches"]:
        pytest.skip("this machine's kernels and DEFAULT round this run alike")
    found = verify_cell(cfg, made, 3, tmp_path / "u", made_on="cpu", recorded=True, kernels=None)
    assert found["matches"] and found["compared"].endswith(
        "it matches: made with DEFAULT") and f"under {cpu_kernels()}, this machine's, it differed (" in found["compared"]
    moved = {**made, "validations": [dict(v) for v in made["validations"]]}
    moved["validations"][2]["loss"] *= 2  # what a change of the code would do: no kernels give it
    lost = verify_cell(cfg, moved, 3, tmp_path / "m", made_on="cpu", recorded=True, kernels=None)
    tried = ", ".join(reversed(KERNEL_LEVELS[:KERNEL_LEVELS.index(cpu_kernels())]))
    assert not lost["matches"] and lost["compared"].endswith(f"it differs under {cpu_kernels()}, this machine's, and "
                                                             f"under {tried} too")
    (tmp_path / "a-file").write_text("")  # the child fails (its data directory is a file): one line, the child's
    broken = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, data_dir=str(tmp_path / "a-file")))
    with pytest.raises(RelreasonError, match=r"^the re-training under DEFAULT CPU kernels failed: cannot create .*"
                                             r"a-file/bfs: Not a directory"):
        retrain(broken, tmp_path, "broken", "DEFAULT")


def _hardware(run_dir) -> list[str]:
    from relreason.rundir import read_object

    return read_object(run_dir / "results.json")["hardware"]


@pytest.mark.parametrize("made_on, cuda_here, expect", [
    ("cuda", True, ("cuda", False)), ("cuda", False, ("cpu", True)), ("cpu", True, ("cpu", False)),
    ("cpu", False, ("cpu", False))])
def test_a_cell_is_re_trained_on_its_device_kind_where_present(made_on, cuda_here, expect):
    assert verify_device(made_on, cuda_here) == expect


def test_the_cross_device_tolerance_covers_a_stand_in_that_rounds_otherwise_at_every_operation(tmp_path):
    import torch

    from relreason.train import run
    from relreason.train.seed_group import run_group

    sets = ["model.hidden=32", "train.train_examples=64", "train.eval_every_examples=16", "train.batch_size=8",
            "data.val_num=4", "data.test_num=4", "train.threads=1", "train.static_step=true", f"data.data_dir={tmp_path / 'data'}"]
    cfg = build_config("mpnn", "bfs", "quick", sets)
    alone = validation_curve(run(cfg, out=tmp_path, name="alone", show_progress=False, log=lambda m: None).run_dir)
    grouped = run_group(cfg, [cfg.train.seed, cfg.train.seed + 1], out=tmp_path / "g", names=["a", "b"],
                        show_progress=False, log=lambda m: None, strategy="vmap")
    rounded = validation_curve(grouped[0].run_dir)  # the same run, rounded otherwise at every operation
    pairs = list(zip(alone["validations"][:3], rounded["validations"][:3]))
    assert [a["examples"] for a, _ in pairs] == [0, 16, 32]
    score_gap = max(abs(a["score"] - b["score"]) for a, b in pairs)
    loss_gap = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in pairs if a["loss"] is not None)
    assert loss_gap > 0  # the stand-in does round otherwise
    assert score_gap <= CROSS_DEVICE_SCORE_ATOL / 10 and loss_gap <= CROSS_DEVICE_LOSS_RTOL / 10, (score_gap, loss_gap)

    if torch.cuda.is_available():
        return  # a GPU machine re-trains a cuda cell on cuda (exactly): the CPU comparison is for machines without
    got = verify_cell(cfg, rounded, 3, tmp_path / "v1", made_on="cuda")  # a cuda cell, verified here on the CPU
    assert got["matches"] and (got["device"], got["made_on"]) == ("cpu", "cuda")
    assert got["compared"].startswith("re-trained on the CPU against a cuda run: scores within ±1 points")
    text = verification(got["code"] and [got["code"]], got, got["code"]["source"])
    assert text.startswith("same first 3 validations") and "re-trained on the CPU against a cuda run" in text
    assert text.endswith(f", under torch {torch.__version__})")  # the release its initial weights came from
    moved = {**rounded, "validations": [dict(v) for v in rounded["validations"]]}
    moved["validations"][2]["score"] += 2 * CROSS_DEVICE_SCORE_ATOL  # what a change of the code would do
    got = verify_cell(cfg, moved, 3, tmp_path / "v2", made_on="cuda")
    assert not got["matches"] and got["difference"].startswith("validation at 32 examples")
    assert got["compared"].endswith(f"; the same start (its step-0 validation {rounded['validations'][0]['score']:.6f} "
                                    "on both)")  # across devices, the untrained model's score compares exactly
    moved["validations"][0]["score"] += 1 / 1024  # one answer of the untrained model
    got = verify_cell(cfg, moved, 3, tmp_path / "v2b", made_on="cuda")
    assert "; another start (its first validation" in got["compared"]
    same = verify_cell(cfg, alone, 3, tmp_path / "v3", made_on="cpu")  # a cpu cell: exactly, on the cpu
    assert same["matches"] and same["compared"].startswith("re-trained on cpu, as made: scores exactly")
    assert "kernels" not in same["compared"]  # the kernels it was made with not given: nothing said of them
    # made with this machine's kernels (whatever later sessions ran on: first_kernels reads the first's)
    mine = verify_cell(cfg, alone, 3, tmp_path / "v4", made_on="cpu", recorded=True, kernels=cpu_kernels())
    assert mine["matches"] and "kernels" not in mine["compared"]
    unknown = verify_cell(cfg, alone, 3, tmp_path / "v6", made_on="cpu", recorded=True)  # made before recorded
    assert unknown["compared"].endswith(f"; its first session's CPU kernels were not recorded: it matches under "
                                        f"{cpu_kernels()}, this machine's")


def test_reproduce_verify_reads_each_cells_kernels_from_its_committed_record(tmp_path, monkeypatch):
    """`reproduce --verify` hands verify_cell what the committed record says: its first CPU session's kernels (a
    lower level re-trains under them; this machine's: nothing to say), or that they were not recorded."""
    import json

    from typer.testing import CliRunner

    from relreason.cli.main import app
    from tests.cli.cli_run import relreason, succeeds

    sets = [x for s in ["model.hidden=16", "train.train_examples=32", "train.eval_every_examples=16",
                        "train.batch_size=8", "data.val_num=4", "data.test_num=4", "train.threads=1",
                        f"data.data_dir={tmp_path / 'data'}"] for x in ("--set", s)]
    cell = ["reproduce", "clrs30", "--models", "mpnn", "--tasks", "bfs", "--seeds", "1"]
    runner = CliRunner()
    here = cpu_kernels()

    def commit(results_dir, env: dict[str, str] | None = None) -> Path:  # the cell trained and committed
        with monkeypatch.context() as m:
            for k, v in (env or {}).items():
                m.setenv(k, v)
            succeeds(relreason(*cell, *sets, "--out", tmp_path / f"rep-{results_dir}"))
            succeeds(relreason("results", "--from", tmp_path / f"rep-{results_dir}", "--results",
                               tmp_path / results_dir, "--md", tmp_path / f"{results_dir}.md"))
        return tmp_path / results_dir / "cells" / "mpnn" / "clrs30" / "bfs" / "seed0.json"

    def compared(results_dir: str) -> str:
        got = runner.invoke(app, [*cell, "--verify", "--verify-validations", "3", "--results",
                                  str(tmp_path / results_dir), "--out", str(tmp_path / f"v-{results_dir}"), "--json"])
        assert got.exit_code == 0, got.output
        (row,) = json.loads(got.stdout)["verified"]
        assert row["matches"], row["difference"]
        return row["compared"]

    record_file = commit("res")
    record = json.loads(record_file.read_text())
    assert first_kernels(record["hardware"]) == here
    assert "kernels" not in compared("res")  # made with this machine's: nothing to say
    unrecorded = f"; its first session's CPU kernels were not recorded: it matches under {here}, this machine's"
    record_file.write_text(json.dumps({**record, "hardware": ["A (2 cores), 1 torch thread, cpu, torch 2.13.0+cpu"]}))
    assert compared("res").endswith(unrecorded)  # made before kernels were recorded
    record_file.write_text(json.dumps({k: v for k, v in record.items() if k != "hardware"}))
    assert compared("res").endswith(unrecorded)  # made before hardware was recorded
    # its record names the weights it started from: a re-training is compared with them first
    assert isinstance(record["init_weights"], str) and len(record["init_weights"]) == 16
    record_file.write_text(json.dumps({**record, "init_weights": "0" * 16}))
    moved = runner.invoke(app, [*cell, "--verify", "--verify-validations", "3", "--results", str(tmp_path / "res"),
                                "--out", str(tmp_path / "v-init"), "--json"])
    assert moved.exit_code == 1, moved.output
    (row,) = json.loads(moved.stdout)["verified"]
    assert row["difference"] == f"initial weights {'0' * 16} stored, {record['init_weights']} now"
    # made under another torch release (which draws other weights from a seed): with the start recorded it is
    # compared; without, it is not re-trained and its verdict stays as it was
    other = ["NVIDIA H200, cuda, torch 2.0.0+cu118"]
    record_file.write_text(json.dumps({**record, "hardware": other}))
    compared("res")  # re-trained and compared, from the same start: it matches
    verdict = tmp_path / "res" / "verify" / "mpnn" / "clrs30" / "bfs" / "seed0.json"
    before = verdict.read_text()
    record_file.write_text(json.dumps({**{k: v for k, v in record.items() if k != "init_weights"}, "hardware": other}))
    got = runner.invoke(app, [*cell, "--verify", "--verify-validations", "3", "--results", str(tmp_path / "res"),
                              "--out", str(tmp_path / "v-torch")])
    assert got.exit_code == 1 and "made with torch 2.0.0" in got.output, got.output
    assert "torch_release_venv.sh 2.0.0" in got.output
    assert verdict.read_text() == before  # not re-trained, its verdict left as it was
    if here not in KERNEL_LEVELS[1:]:
        return  # no level below this machine's to make a cell under
    low = json.loads(commit("low", kernels_environment("DEFAULT")).read_text())
    assert first_kernels(low["hardware"]) == "DEFAULT"
    assert compared("low").endswith(f"; re-trained under the DEFAULT CPU kernels it was made with (here {here}; "
                                    "ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS set)")
