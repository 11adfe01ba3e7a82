"""What is a result and what is configuration (relreason.protocol): one definition, the same answer
from `compare` (which runs pool as seeds), the studies (which stored run is a planned cell) and the
stale-cell check, on the Edge Transformer's real configuration."""

from __future__ import annotations

import copy
import json

import pytest
from fake_runs import results_json

from relreason.config import build_config
from relreason.protocol import (INCIDENTAL_KEYS, KEY_RULES, LOWERABLE_KEYS, MACHINE_KEYS, NOT_PROTOCOL_KEYS,
                                RESUMABLE_KEYS, SEED_KEY, run_identity, setting_identity)
from relreason.rundir import RunDir, RunRecord
from relreason.runs.discovery import discover_runs
from relreason.runs.grouping import group_runs
from relreason.studies.cells import cell_state, plan_cells, result_identity
from relreason.studies.tables import TABLES

# a value each incidental key may take instead of the ET's own (none changes what the run computes)
OTHER = {"train.device": "cuda", "train.threads": 7, "train.eval_batch_size": 3, "data.data_dir": "/elsewhere",
         "model.nar": "runs/nar", "processor.chunk_mb": 16, "processor.compiled_kernels": False,
         "train.log": "tensorboard", "train.static_step": True, "train.cuda_graph": True}


def _set(plain: dict, key: str, value) -> dict:
    out = copy.deepcopy(plain)
    section, name = key.split(".")
    out.setdefault(section, {})[name] = value
    return out


def _finish(run_dir, plain: dict, score: float) -> None:
    """A finished run with the stored config `plain`, as the loop leaves it."""
    rd = RunDir(run_dir)
    rd.path.mkdir(parents=True)
    rd.config.write_text(RunRecord(relreason="0.1.0", config=plain, command=None).to_json())
    rd.results.write_text(results_json(plain, score))


def test_every_key_with_a_rule_is_a_key_of_some_configuration():
    """A renamed option would silently lose its rule (count as a result again, or refuse a resume): each key that
    KEY_RULES declares must exist."""
    plains = [build_config(m, "bfs").to_dict() for m in ("et", "mpnn")]
    plains.append(build_config("transnar", "text:insertion_sort").to_dict())
    found = {k for k in (*KEY_RULES, *NOT_PROTOCOL_KEYS)
             if any(k.split(".")[1] in (p.get(k.split(".")[0]) or {}) for p in plains)}
    assert found == set(KEY_RULES) | {SEED_KEY}
    assert set(OTHER) == set(INCIDENTAL_KEYS)


def test_each_rule_reads_the_one_declaration():
    """What resume may change, what a study's NAR cells share and what leaves a cell's identity are read from
    KEY_RULES alone (the lists as they were before they were declared in one place)."""
    assert RESUMABLE_KEYS == ("train.train_examples", "train.device", "train.threads", "train.eval_batch_size",
                              "train.log", "train.static_step", "train.cuda_graph")
    assert LOWERABLE_KEYS == ("train.lr",)
    assert set(MACHINE_KEYS) == set(INCIDENTAL_KEYS) - {"model.nar"}
    from relreason.train import resume

    assert resume.RESUMABLE_KEYS is RESUMABLE_KEYS and resume.LOWERABLE_KEYS is LOWERABLE_KEYS


@pytest.mark.parametrize("key", INCIDENTAL_KEYS)
def test_incidental_keys_change_neither_identity(key):
    plain = build_config("et", "bfs").to_dict()
    other = _set(plain, key, OTHER[key])
    assert run_identity(other) == run_identity(plain) and setting_identity(other) == setting_identity(plain)


def test_the_seed_is_a_cell_but_not_a_setting_and_protocol_keys_are_both():
    plain = build_config("et", "bfs").to_dict()
    seed1 = _set(plain, SEED_KEY, 1)
    assert run_identity(seed1) != run_identity(plain) and setting_identity(seed1) == setting_identity(plain)
    layers = _set(plain, "processor.layers", plain["processor"]["layers"] + 1)
    assert run_identity(layers) != run_identity(plain) and setting_identity(layers) != setting_identity(plain)
    relabelled = {**plain, "recipe": "my-copy-of-et"}  # the label of where values came from is no value
    assert run_identity(relabelled) == run_identity(plain)


def test_compare_study_cells_and_stale_checks_agree(tmp_path):
    """The ET cells of mueller2024: a seed run with other kernels is the planned cell and pools with
    seed 0 in `compare`; one with another layer count is stale and compares as another setting."""
    cells = plan_cells(TABLES.get("mueller2024"), ["bfs"], (0, 1), None, tmp_path / "rep", [])
    plain0, plain1 = (c.config.to_dict() for c in cells)
    _finish(cells[0].run_dir, plain0, 0.5)
    kernels = _set(_set(plain1, "processor.chunk_mb", 16), "processor.compiled_kernels", False)
    _finish(cells[1].run_dir, kernels, 0.7)
    assert [cell_state(c) for c in cells] == ["done", "done"]
    assert result_identity(kernels) == result_identity(plain1)
    (g,) = group_runs(discover_runs(tmp_path / "rep"))[0]
    assert g.seeds == [0, 1] and g.test.mean == pytest.approx(0.6)

    layers = _set(plain1, "processor.layers", plain1["processor"]["layers"] + 1)
    (cells[1].run_dir / "results.json").write_text(json.dumps({**json.loads(
        (cells[1].run_dir / "results.json").read_text()), "config": layers}))
    (cells[1].run_dir / "config.json").write_text(RunRecord(relreason="0.1.0", config=layers, command=None).to_json())
    assert cell_state(cells[1]) == "stale"
    groups, _ = group_runs(discover_runs(tmp_path / "rep"))
    assert sorted(g.seeds for g in groups) == [[0], [1]]
