"""Workloads: deterministic step data, multi-task training (Ibarz et al.'s loop), the Ibarz stream."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from compiled_kernels import assert_compiled_ran, compiled_kernels  # noqa: F401 (a fixture)
from relreason.config import build_config
from relreason.seeds import Purpose, derive_seed
from resume_check import assert_resume_is_exact
from relreason.train.workloads import NarWorkload, step_indices, validation_generator

TINY = ["model.hidden=16", "train.batch_size=4", "train.eval_every_examples=16", "data.train_num=24",
        "data.train_size=5", "data.val_size=5", "data.test_size=6", "data.val_num=8", "data.test_num=8"]


def tiny(tmp_path, model="mpnn", task="bellman_ford", extra=(), recipe="default"):
    return build_config(model, task, recipe, TINY + [f"data.data_dir={tmp_path / 'data'}", *extra])


def test_step_streams_are_independent_across_seeds_steps_and_purposes():
    # the old `seed * 1_000_003 + k` made seed s's validation stream equal to seed s-1's training streams
    seeds = {derive_seed(s, p, k) for s in range(4) for p in Purpose for k in range(50)}
    assert len(seeds) == 4 * len(Purpose) * 50
    assert not np.array_equal(step_indices(1, 0, 1000, 32), step_indices(0, 1, 1000, 32))
    np.testing.assert_array_equal(step_indices(3, 7, 1000, 32), step_indices(3, 7, 1000, 32))
    a = torch.rand(5, generator=validation_generator(2))
    b = torch.rand(5, generator=torch.Generator().manual_seed(derive_seed(1, Purpose.NOISE, 0, 0)))  # step_noise's
    assert not torch.equal(a, b)


@pytest.mark.slow
def test_multi_task_training_lowers_both_losses(tmp_path):
    """One shared processor, per-algorithm encoders/decoders, one update per algorithm per step."""
    cfg = tiny(tmp_path, "mpnn", "bfs,insertion_sort", ["train.train_examples=160", "train.eval_every_examples=160",
                                                        "model.hidden=32"])
    wl = NarWorkload(cfg, torch.device("cpu"))
    opt = torch.optim.Adam(wl.model.parameters(), lr=3e-3)
    first, last = None, None
    for step in range(60):
        losses = {}
        for part in wl.step_batches(step):
            loss, _ = wl.loss(wl.model, part, step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses[wl.tasks[part[0]].name] = loss.item()
        if step < 5:
            first = {k: (first or {}).get(k, 0) + v / 5 for k, v in losses.items()}
        if step >= 55:
            last = {k: (last or {}).get(k, 0) + v / 5 for k, v in losses.items()}
    assert set(first) == {"bfs", "insertion_sort"}
    for task in first:
        assert last[task] < 0.7 * first[task], (task, first[task], last[task])


def test_multi_task_model_shares_one_processor_and_saves_it_once(tmp_path):
    cfg = tiny(tmp_path, "mpnn", "bfs,dfs")
    wl = NarWorkload(cfg, torch.device("cpu"))
    keys = list(wl.model.state_dict())
    assert any(k.startswith("processor.") for k in keys)
    assert not any(".processor." in k for k in keys)  # the per-task nets do not own a copy
    assert wl.model.nets["bfs"].processor is wl.model.nets["dfs"].processor is wl.model.processor
    # a step on bfs leaves dfs's encoders and decoders untouched (their grads stay None, Adam skips them)
    opt = torch.optim.Adam(wl.model.parameters(), lr=1e-2)
    before = {k: v.clone() for k, v in wl.model.state_dict().items()}
    part = wl.step_batches(0)[0]
    loss, _ = wl.loss(wl.model, part, 0)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    after = wl.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in after if k.startswith("nets.dfs."))
    assert any(not torch.equal(before[k], after[k]) for k in after if k.startswith("processor."))


@pytest.mark.slow
def test_edge_transformer_with_compiled_kernels_resumes_exactly(tmp_path, compiled_kernels):
    """The fused loops (relreason.models.kernels) are as deterministic as the eager kernels."""
    assert build_config("et", "bellman_ford").processor.compiled_kernels
    assert_resume_is_exact(lambda n: tiny(tmp_path, "et", "bellman_ford", [f"train.train_examples={n}"]),
                           24, 12, tmp_path)
    assert_compiled_ran()  # else both runs were eager and this said nothing about the fused loops


@pytest.mark.slow
def test_multi_task_run_resumes_exactly_and_reports_per_task(tmp_path):
    res = assert_resume_is_exact(lambda n: tiny(tmp_path, "mpnn", "bfs,dfs", [f"train.train_examples={n}"]),
                                 32, 16, tmp_path)
    assert set(res.test["per_task"]) == {"bfs", "dfs"}
    assert res.test["score"] == pytest.approx(np.mean([v["score"] for v in res.test["per_task"].values()]))
    results = json.loads((tmp_path / "b" / "r" / "results.json").read_text())
    assert set(results["per_task"]) == {"bfs", "dfs"} and results["tasks"] == ["bfs", "dfs"]


def test_ibarz_stream_batches_are_fresh_deterministic_and_cycle_sizes(tmp_path):
    cfg = tiny(tmp_path, "mpnn", "bellman_ford", ["data.stream=ibarz", "train.train_examples=40"])
    wl = NarWorkload(cfg, torch.device("cpu"))
    try:
        sizes = [wl.step_batches(step)[0][1].n for step in range(6)]
        assert sizes == [4, 7, 11, 13, 16, 4]
        again = NarWorkload(cfg, torch.device("cpu"))
        try:
            a = wl.step_batches(5)[0][1]
            # a second workload started at step 5 (a resumed run) sees exactly the same batch
            b = again.step_batches(5)[0][1]
            for k in a.inputs:
                assert torch.equal(a.inputs[k], b.inputs[k]), k
        finally:
            again.close()
        val = wl.dataset(0, "val")
        assert val.n == 5 and len(val) == 8 and "ibarz" in val.meta["split"]
    finally:
        wl.close()


# -- data.order and data.validation (the reference's data order and validation) ----------------------------

def test_data_orders_follow_their_reference():
    from relreason.data.config import DataOrder

    # sequential: tfds repeat().batch() over a split of 10 in batches of 4: 0-3, 4-7, 8 9 0 1 (across the end)
    seq = [step_indices(s, k, 10, 4, order=DataOrder.SEQUENTIAL).tolist() for s in (0, 5) for k in range(3)]
    assert seq[:3] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]] and seq[3:] == seq[:3]  # the seed changes nothing
    # fixed: drawn with replacement, the same for every seed, yet not the order of any one seed
    fixed = [step_indices(s, 3, 1000, 32, order=DataOrder.FIXED) for s in (0, 1, 7)]
    assert all(np.array_equal(fixed[0], f) for f in fixed)
    assert not any(np.array_equal(fixed[0], step_indices(s, 3, 1000, 32)) for s in range(4))
    # seeded: the run's seed sets it (what every recipe did before the key existed)
    assert not np.array_equal(step_indices(0, 3, 1000, 32), step_indices(1, 3, 1000, 32))
    assert np.array_equal(step_indices(2, 3, 1000, 32), step_indices(2, 3, 1000, 32, order=DataOrder.SEEDED))


@pytest.mark.parametrize("order,same_across_seeds", [("seeded", False), ("fixed", True), ("sequential", True)])
def test_a_workload_takes_its_batches_in_the_configured_order(tmp_path, order, same_across_seeds):
    def first_batches(seed):
        wl = NarWorkload(tiny(tmp_path, extra=[f"data.order={order}", f"train.seed={seed}"]), torch.device("cpu"))
        return [wl.step_batches(step)[0].batch.inputs for step in range(3)]

    a, b = first_batches(0), first_batches(1)
    same = all(torch.equal(x[k], y[k]) for x, y in zip(a, b) for k in x if k != "pos")
    assert same == same_across_seeds


def test_fixed_order_makes_the_ibarz_stream_independent_of_the_seed_and_sequential_is_refused(tmp_path):
    from relreason.errors import RelreasonError

    def batch(seed, order):
        wl = NarWorkload(tiny(tmp_path, extra=["data.stream=ibarz", f"data.order={order}", f"train.seed={seed}",
                                               "train.train_examples=40"]), torch.device("cpu"))
        try:
            return wl.step_batches(1)[0].batch.inputs["A"]
        finally:
            wl.close()

    assert torch.equal(batch(0, "fixed"), batch(3, "fixed"))
    assert not torch.equal(batch(0, "seeded"), batch(3, "seeded"))
    with pytest.raises(RelreasonError, match="data.order sequential .* ibarz"):
        tiny(tmp_path, extra=["data.stream=ibarz", "data.order=sequential"])


def test_resampled_validation_draws_anew_each_time_and_fixed_scores_the_same_set(tmp_path):
    from relreason.train.workloads import validation_resample

    draws = [validation_resample(0, 0, k, 64) for k in (0, 320, 320)]
    assert len(draws[0]) == 64 and len(set(draws[0].tolist())) < 64  # with replacement: some repeat
    assert not np.array_equal(draws[0], draws[1]) and np.array_equal(draws[1], draws[2])  # a resume redraws the same

    def scored(validation, monkeypatch):
        """What each of three validations (draws 0, 16, 0) scores: the graphs' weights and the positions drawn."""
        import relreason.eval.evaluate as evaluate

        seen, real = [], evaluate.score_dataset
        monkeypatch.setattr(evaluate, "score_dataset", lambda net, ds, spec, cfg, dev, bs, on, scorer, gen, shard:
                            seen.append((torch.as_tensor(ds.inputs["A"]), torch.rand(8, generator=gen)))
                            or real(net, ds, spec, cfg, dev, bs, on, scorer, gen, shard))
        cfg = tiny(tmp_path, "triplet_gmpnn", extra=["data.stream=ibarz", f"data.validation={validation}",
                                                      "data.val_num=16", "train.train_examples=40"])
        wl = NarWorkload(cfg, torch.device("cpu"))
        try:
            for k in (0, 16, 0):
                wl.evaluate("val", draw=k)
        finally:
            wl.close()
        return seen

    def same(a, b):
        return torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])

    with pytest.MonkeyPatch.context() as mp:
        fixed = scored("fixed", mp)
    with pytest.MonkeyPatch.context() as mp:
        resampled = scored("resampled", mp)
    assert same(fixed[0], fixed[1]) and same(fixed[0], fixed[2])  # one set, one draw of positions, every time
    assert same(resampled[0], resampled[2]) and not torch.equal(resampled[0][0], resampled[1][0]) \
        and not torch.equal(resampled[0][1], resampled[1][1])  # its own samples and positions; a resume redraws them
    assert resampled[0][0].shape == fixed[0][0].shape  # as many samples as the set holds


def test_the_automatic_evaluation_batch_is_sized_from_the_devices_free_memory(monkeypatch):
    """Issue 29: on a CUDA device the batch must fit the device's free memory, not the host's RAM."""
    import relreason.eval.memory as memory
    from relreason.train.workloads import EVAL_LIVE_PAIR_TENSORS, _pick_batch

    class Net(torch.nn.Module):
        cfg = type("C", (), {"hidden": 16})()

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

    per_sample = 8 * 8 * 16 * 4 * EVAL_LIVE_PAIR_TENSORS  # n = 8, width 16
    seen = []
    monkeypatch.setattr(memory, "free_memory", lambda device: seen.append(device) or (10 * per_sample, 10**15))
    ds = type("D", (), {"n": 8})()
    assert _pick_batch(None, None, Net(), ds) == int(10 * per_sample * memory.EVAL_MEMORY_FRACTION // per_sample)
    assert seen == [torch.device("cpu")]  # asked for where the net's parameters are, not the host
    assert _pick_batch(3, None, Net(), ds) == 3 and _pick_batch(None, 5, Net(), ds) == 5
