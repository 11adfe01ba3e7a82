"""Evaluation memory (relreason.eval.memory): the tensor tracker counts exactly, the estimate grows as
documented, batches fit, and the estimate is close to the peak resident set of real evaluations.

The slow tests run evaluations in child processes and read the kernel's high-water mark of the
resident set (VmHWM), reset once the data and the model are built (by writing 5 to
/proc/self/clear_refs), so the peak measured is the evaluation's own.

1. The RT at the lobster_rt recipe's width on backbone-100 lobsters stays within the memory budget of
   the auto-sized evaluation batch (`relreason.train.workloads._pick_batch`). `relreason train rt
   lobster --recipe lobster_rt` was once killed by the OOM killer in its final test (24 GB resident at
   backbone 100): the test batch was not sized to the memory. The child sees 1.5 GiB of available
   memory and evaluates four test graphs with the batch picked automatically; the picker may give one
   batch EVAL_MEMORY_FRACTION (a quarter) of it, so: peak - before <= 384 MiB. Measured (2-core CPU,
   width 224, 30 layers, graphs padded to 125 nodes): ~140 MiB per graph evaluated at once, so the
   picked batch of one takes ~140 MiB, while four graphs at once take ~560 MiB and break the bound.
2. The estimate of one sample (`MemoryEstimate.per_sample` and the kernels' workspace) against the
   measured growth of what `relreason eval --ood N --num 1` does once the model and the split are
   loaded (probe the model, then evaluate): models on bfs (mpnn, rt, triplet_gmpnn), floyd_warshall (n
   steps of edge pointers: n^3 logits a step, kept hard as n^2 indices; a 64 MiB slab workspace), the
   Edge Transformer (its recipe: width 192, 12 heads, 3 layers) with its eager kernels (a 128 MiB chunk
   buffer as the workspace), and pgn on edge lists: bfs at n=1600 under `model.sparse: auto` (sparse
   there, its probes dense and sparse) and dfs at n=800 (3n steps: the kept hint predictions and their
   scoring dominate). Within ESTIMATE_FACTOR either way. Measured (2-core CPU; the peak RSS varies from
   run to run by up to ~1.5x at these sizes), estimate / measured: mpnn bfs n=256 0.98, rt bfs n=192
   1.02, triplet_gmpnn bfs n=256 0.97, mpnn floyd_warshall n=96 0.77, et bfs n=128 eager 1.20 (compiled
   kernels, no workspace: n=128 0.84, n=192 0.77), pgn bfs n=1600 er:c=2 auto 0.76-1.38, pgn dfs n=800
   er:c=2 sparse width 8 0.99. Before: the ET 4.90 at n=128 (its probes' chunk buffer extrapolated), pgn
   bfs n=1600 30 under auto (10 always: n^2 from the probes).
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from relreason.data.specs import POINTER_TYPES, Feature, Location, Stage, Type
from relreason.errors import RelreasonError
from relreason.eval import memory
from relreason.eval.memory import (ALLOCATOR_OVERHEAD, EVAL_MAX_BATCH, SCORING_BYTES, SPARSE_CONVERTER_BYTES, EdgeLists,
                                   Footprint, MemoryEstimate, PeakTracker, Probe, gib, hard_bytes, largest_fitting,
                                   prediction_bytes, sample_bytes, scoring_bytes)

MiB = 2**20

# -- the tracker ------------------------------------------------------------------------------------


def test_tracker_counts_allocations_until_freed_and_never_views():
    keep = torch.zeros(1000)  # before the block: not counted, nor its views
    with PeakTracker() as t:
        a = torch.ones(256, 256)  # 256 KiB
        view = a.t()[:10].unsqueeze(0)  # views share a's storage
        b = a * 2  # 256 KiB more: peak 512 KiB
        b.add_(1)  # in place: nothing new
        del a, view, b
        _ = keep[:5] + 0  # 20 bytes
        c = torch.empty(128, 256)  # 128 KiB while nothing else is held
    assert t.peak == 2 * 256 * 256 * 4
    assert t.live == 128 * 256 * 4 + 20
    del c


# -- the estimate's arithmetic -----------------------------------------------------------------------

SPEC = {  # a graph algorithm's shape: node input, edge input, a node-pointer hint and output, an edge hint
    "pos": Feature("pos", Stage.INPUT, Location.NODE, Type.SCALAR),
    "A": Feature("A", Stage.INPUT, Location.EDGE, Type.SCALAR),
    "pi_h": Feature("pi_h", Stage.HINT, Location.NODE, Type.POINTER),
    "d_h": Feature("d_h", Stage.HINT, Location.EDGE, Type.MASK),
    "pi": Feature("pi", Stage.OUTPUT, Location.NODE, Type.POINTER),
}


def footprint(small: Probe, large: Probe, decodes: bool = True) -> Footprint:
    return Footprint("m at width 8", SPEC, SPEC, decodes, small, large)


def test_bytes_of_samples_and_predictions_follow_the_spec():
    n, steps = 10, 3
    # storage: pos float64 n, A float64 n^2, pi int32 n; per step pi_h int32 n, d_h float32 n^2
    assert sample_bytes(SPEC, n, steps, stored=True) == 8 * n + 8 * n * n + 4 * n + steps * (4 * n + 4 * n * n)
    # model tensors: 4 bytes, pointers 8
    assert sample_bytes(SPEC, n, steps, stored=False) == 4 * n + 4 * n * n + 8 * n + steps * (8 * n + 4 * n * n)
    # a pointer is decoded as logits over the nodes
    assert prediction_bytes(SPEC, n, Stage.HINT) == 4 * (n * n + n * n)
    assert prediction_bytes(SPEC, n, Stage.OUTPUT) == 4 * n * n


def test_activations_grow_between_n2_and_n3_beyond_the_probes():
    # measured as n^1 between the probes (fixed costs): held at n^2 beyond them
    fp = footprint(Probe(32, 32, 5, 1000), Probe(64, 64, 5, 2000))
    assert fp.activations(64) == 2000 and fp.activations(32) == 1000  # as measured, and between at that rate
    assert fp.activations(256) == 2000 * 16
    # measured as n^4: held at n^3
    fp = footprint(Probe(32, 32, 5, 1000), Probe(64, 64, 5, 16000))
    assert fp.activations(128) == 16000 * 8
    # one probe (the sizes asked are all at or below it): n^2 beyond, as measured at it
    fp = footprint(Probe(8, 8, 5, 500), Probe(8, 8, 5, 500))
    assert fp.activations(8) == 500 and fp.activations(16) == 2000


def test_trajectory_length_and_node_count_extrapolate_from_the_probes():
    fp = footprint(Probe(32, 32, 32, 1), Probe(64, 64, 64, 1))  # T = n (Floyd-Warshall)
    assert fp.length(256) == 256 and fp.nodes(256) == 256
    fp = footprint(Probe(32, 32, 6, 1), Probe(64, 64, 5, 1))  # T shrinking (bfs on denser graphs): held
    assert fp.length(1024) == 5
    fp = footprint(Probe(32, 45, 1, 1), Probe(64, 80, 1, 1))  # lobsters: the size is the backbone
    assert fp.nodes(100) == 141  # the largest ratio, 45 / 32


def test_estimate_adds_activations_kept_predictions_data_and_the_split():
    small, large = Probe(32, 32, 32, 10 * MiB), Probe(64, 64, 64, 40 * MiB)
    fp = footprint(small, large)
    est = fp.estimate(128, num=3, device=torch.device("cpu"), free=(1 << 40, 1 << 40))
    n, steps = 128, 128
    # kept hard: per step pi_h as int64 indices (n), d_h as float32 (n^2); scoring's costliest: the mask d_h
    assert hard_bytes(SPEC, n, Stage.HINT) == 8 * n + 4 * n * n
    assert scoring_bytes(SPEC, n) == SCORING_BYTES[Type.MASK] * n * n
    kept = (steps - 1) * hard_bytes(SPEC, n, Stage.HINT)
    scoring = (steps - 1) * scoring_bytes(SPEC, n)
    once = kept + prediction_bytes(SPEC, n, Stage.OUTPUT) + sample_bytes(SPEC, n, steps, stored=False)
    assert est.device_bytes == math.ceil(ALLOCATOR_OVERHEAD * max(fp.activations(128), scoring)) + once
    assert est.host_bytes == sample_bytes(SPEC, n, steps, stored=True) and est.resident == 3 * est.host_bytes
    assert (est.nodes, est.steps) == (128, 128)
    light = footprint(Probe(32, 32, 32, 1000), Probe(64, 64, 64, 4000))  # tiny steps: scoring is the peak
    light_est = light.estimate(128, 3, torch.device("cpu"), (1 << 40, 1 << 40))
    assert light_est.device_bytes == math.ceil(ALLOCATOR_OVERHEAD * scoring) + once
    no_hints = footprint(small, large, decodes=False).estimate(128, 3, torch.device("cpu"), (1 << 40, 1 << 40))
    assert no_hints.device_bytes < est.device_bytes  # no hint predictions kept
    kernels = dataclasses.replace(fp, workspace=64 * MiB).estimate(128, 3, torch.device("cpu"), (1 << 40, 1 << 40))
    assert (kernels.device_bytes, kernels.workspace) == (est.device_bytes, ALLOCATOR_OVERHEAD * 64 * MiB)


def test_on_edge_lists_activations_grow_with_the_entries_the_family_expects():
    small, large = Probe(32, 32, 5, 1000, 200), Probe(64, 64, 5, 1500, 500)  # measured entries^0.44: held at 1
    auto = lambda nodes, density: nodes >= 256 and density <= 0.05  # noqa: E731 (Net.sparse_at under `auto`)
    lists = EdgeLists(small, large, lambda n: 9.0, auto)  # a family of mean degree 9
    assert lists.entries(1000) == 1000 * (1 + 9)
    assert lists.activations(1000) == math.ceil(1500 * 10_000 / 500)
    assert EdgeLists(small, large, None, auto).entries(128) == 500 * 4  # no family: the probes' density held
    dense = footprint(Probe(32, 32, 5, 4000), Probe(64, 64, 5, 16000))
    fp = dataclasses.replace(dense, edge_lists=lists)
    free = (1 << 40, 1 << 40)
    cpu = torch.device("cpu")
    # n=1000 runs sparse (1% of the pairs are entries): the edge lists' step, or the converter's n^2 masks
    got = fp.estimate(1000, 1, cpu, free).device_bytes - dense.estimate(1000, 1, cpu, free).device_bytes
    churn = max(lists.activations(1000), SPARSE_CONVERTER_BYTES * 1000 ** 2, 4 * SCORING_BYTES[Type.MASK] * 1000 ** 2)
    dense_churn = max(dense.activations(1000), 4 * SCORING_BYTES[Type.MASK] * 1000 ** 2)
    assert got == math.ceil(ALLOCATOR_OVERHEAD * churn) - math.ceil(ALLOCATOR_OVERHEAD * dense_churn)
    denser = dataclasses.replace(dense, edge_lists=dataclasses.replace(lists, degree=lambda n: 199.0))
    for size in (128, 2000):  # below AUTO_MIN_NODES, or denser than 5% (degree 199): dense
        assert denser.estimate(size, 1, cpu, free) == dense.estimate(size, 1, cpu, free)


@pytest.mark.parametrize("kind", [t for t in Type if t is not Type.SHOULD_BE_PERMUTATION])
def test_scoring_bytes_bound_what_the_scorer_holds(kind):
    """SCORING_BYTES per element of a hint feature: the scorer's temporaries, all steps at once, exactly."""
    from relreason.eval.metrics import _stats

    S, n = 50, 40
    f = Feature("x", Stage.HINT, Location.NODE, kind, 3 if kind is Type.CATEGORICAL else 0)
    shape = (1, S) + f.shape(n)
    g = torch.Generator().manual_seed(0)
    if kind in POINTER_TYPES:
        pred, truth = torch.randint(0, n, shape, generator=g), torch.randint(0, n, shape, generator=g)
    else:
        pred, truth = torch.rand(shape, generator=g), torch.rand(shape, generator=g)
    valid = torch.ones((1, S) if kind is Type.MASK_ONE else (1, S, n), dtype=torch.bool)  # as element_mask gives
    with PeakTracker() as tracker:
        _stats(f, pred, truth, valid, keep_time=True)
    assert tracker.peak <= S * scoring_bytes({"x": f}, n) < 2 * tracker.peak + 1024


def estimate(per_sample: int, resident: int, free: int, shared: bool = True, device_free: int | None = None,
             workspace: int = 0):
    return MemoryEstimate(512, 512, 10, "rt at width 192", per_sample, 0, resident,
                          free if device_free is None else device_free, free, shared, workspace)


def test_fits_and_batch_sizes():
    assert estimate(10 * MiB, 0, 4000 * MiB).batch() == EVAL_MAX_BATCH  # a quarter of 4000 MiB holds 100
    assert estimate(100 * MiB, 0, 4000 * MiB).batch() == 10
    assert estimate(100 * MiB, 3950 * MiB, 4000 * MiB).batch() == 1  # the split leaves room for one at most
    one = estimate(3000 * MiB, 0, 4000 * MiB)
    assert one.fits and one.batch() == 1  # one sample at a time at worst
    assert not estimate(3000 * MiB, 1500 * MiB, 4000 * MiB).fits  # with the split it does not
    gpu = estimate(3000 * MiB, 0, 4000 * MiB, shared=False, device_free=2000 * MiB)
    assert not gpu.fits and "of device memory" in gpu.describe()


def test_a_kernel_workspace_counts_once_per_batch():
    # a quarter of 4000 MiB is 1000 MiB: 200 MiB of workspace leaves room for 8 samples of 100 MiB, not 10
    assert estimate(100 * MiB, 0, 4000 * MiB, workspace=200 * MiB).batch() == 8
    assert estimate(3000 * MiB, 0, 4000 * MiB, workspace=900 * MiB).fits
    tight = estimate(3000 * MiB, 0, 4000 * MiB, workspace=1100 * MiB)
    assert not tight.fits and tight.batch() == 1 and "~4.0 GiB" in tight.describe()
    gpu = estimate(1500 * MiB, 0, 4000 * MiB, shared=False, device_free=2000 * MiB, workspace=600 * MiB)
    assert not gpu.fits and "~2.1 GiB of device memory" in gpu.describe()  # 2100 MiB


def test_refusal_names_the_size_the_need_the_model_and_what_is_available():
    est = estimate(38 * 2**30, 0, 22 * 2**30)
    assert est.describe() == "n=512 needs ~38 GiB for one sample of rt at width 192; 22 GiB available"
    assert gib(1.5 * 2**30) == "1.5 GiB" and gib(0.02 * 2**30) == "0.02 GiB"
    assert largest_fitting(lambda n: estimate(n * n * MiB, 0, 10_000 * MiB), 2, 500) == 100
    assert largest_fitting(lambda n: estimate(n * n * MiB, 0, 1 * MiB), 2, 500) is None


def et_net(*sets: str):
    from relreason.config import build_config
    from relreason.train.workloads import build_workload

    sets = ["model.hidden=24", "processor.width=64", "processor.heads=2", "processor.layers=1", "train.device=cpu",
            *sets]
    cfg = build_config("et", "bfs", "quick", sets)
    return build_workload(cfg, torch.device("cpu")).model


def test_probes_leave_out_the_et_chunk_buffer_and_add_it_where_evaluation_runs_eager(make_small):
    """The eager triangular product's chunk buffer grows with the graphs only up to processor.chunk_mb: the
    probes measure the product in its smallest chunks, so the chunk budget changes nothing they measure, and
    the buffer is the constant workspace, held only where evaluation runs the eager kernels."""
    ds = make_small("bfs", 40, 1, 0)
    # a row of the product is (2 heads, 40, 40, 32) floats, 0.39 MiB: 1 MiB holds 2 rows, 64 MiB all 40
    peaks = [memory.step_peak(et_net(f"processor.chunk_mb={mb}"), ds, torch.device("cpu")) for mb in (1, 64)]
    assert peaks[0] == peaks[1]
    assert et_net().processor.eval_workspace() == 0  # compiled kernels: no chunk buffer
    assert et_net("processor.compiled_kernels=false", "processor.chunk_mb=16").processor.eval_workspace() == 16 * MiB


def test_probes_leave_out_the_edge_pointer_slab_and_add_it_once(make_small, monkeypatch):
    """The decoders build edge-pointer logits (Floyd-Warshall) in slabs of at most EDGE_POINTER_CHUNK
    elements: a constant workspace, which the probes leave out whatever the chunk."""
    from relreason.config import build_config
    from relreason.models import decoders
    from relreason.train.workloads import build_workload

    def net(task):
        cfg = build_config("mpnn", task, "quick", ["model.hidden=64", "train.device=cpu"])
        return build_workload(cfg, torch.device("cpu")).model

    fw, ds = net("floyd_warshall"), make_small("floyd_warshall", 24, 1, 0)
    assert fw.eval_workspace() == 4 * decoders.EDGE_POINTER_CHUNK and net("bfs").eval_workspace() == 0
    peaks = []
    for rows in (1, 24):  # slabs of one row i, or of all 24: (24, 24, 24, 64) floats, 3.4 MiB
        monkeypatch.setattr(decoders, "EDGE_POINTER_CHUNK", rows * 24 * 24 * 64)
        peaks.append(memory.step_peak(fw, ds, torch.device("cpu")))
    assert peaks[0] == peaks[1]


def test_step_peak_of_a_real_model_is_its_one_step_forward(make_small):
    """`step_peak` measures one model step on the longest sample: more nodes, more memory (about n^2)."""
    from relreason.config import build_config
    from relreason.train.workloads import build_workload

    cfg = build_config("mpnn", "bfs", "quick", ["model.hidden=16", "train.device=cpu"])
    net = build_workload(cfg, torch.device("cpu")).model
    small, large = make_small("bfs", 8, 4, 1), make_small("bfs", 32, 4, 1)
    assert memory.one_step(large).lengths.tolist() == [min(2, int(large.lengths.max()))]
    peaks = [memory.step_peak(net, ds, torch.device("cpu")) for ds in (small, large)]
    assert 0 < peaks[0] < peaks[1] and peaks[1] / peaks[0] > 4
    assert net.training  # left as it was


# -- against real evaluations (slow: child processes) ------------------------------------------------

AVAILABLE = 1.5 * 2**30  # what the lobster child believes it may use
FRACTION = 0.25  # relreason.eval.memory.EVAL_MEMORY_FRACTION (checked in the child)
ESTIMATE_FACTOR = 2.0  # the estimate of one sample is within this factor of the measured peak growth

PEAK = """
import re


def status(key):  # bytes, from /proc/self/status
    return int(re.search(key + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024


def reset_peak():  # VmHWM := VmRSS (Linux >= 4.0); False where the kernel does not support it
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return status("VmHWM") <= status("VmRSS") + 2**20
"""

LOBSTER_CHILD = PEAK + """
import json, resource
import torch
import relreason.runtime
relreason.runtime.available_memory = lambda: int({available})
from relreason.config import build_config
from relreason.eval import memory
from relreason.train import workloads

torch.set_num_threads(1)
cfg = build_config("rt", "lobster", "lobster_rt", ["data.test_num=4", "data.data_dir={data}", "train.device=cpu"])
wl = workloads.build_workload(cfg, torch.device("cpu"))
ds = wl.dataset(0, "test")
reset = reset_peak()
before = status("VmRSS")
res = wl.evaluate("test")
peak = status("VmHWM")
print(json.dumps({{"reset": reset, "before": before, "peak": peak, "label": res["label"], "score": res["score"],
                  "fraction": memory.EVAL_MEMORY_FRACTION,
                  "batch": workloads._pick_batch(None, cfg.train.eval_batch_size, wl.built.net("lobster"), ds)}}))
"""

ESTIMATE_CHILD = PEAK + """
import json
import torch
from relreason.config import build_config
from relreason.runtime import keep_freed_memory
from relreason.train import evaluation, workloads

torch.set_num_threads(1)
keep_freed_memory()  # as `relreason eval` does
cfg = build_config({model!r}, {task!r}, None, ["data.data_dir={data}", "train.device=cpu", *{sets!r}])
wl = workloads.build_workload(cfg, torch.device("cpu"))
ds = wl.dataset(0, "test", {n}, 1, None, {graph!r})
reset = reset_peak()
before = status("VmRSS")  # from here on, what `relreason eval --ood N --num 1` does: probe, then evaluate
fp = evaluation.footprint(cfg, wl, 0, {graph!r}, {n})
est = fp.estimate({n}, 1, torch.device("cpu"), (1 << 50, 1 << 50))
wl.evaluate("test", size={n}, num=1, batch_size=1, graph={graph!r})
print(json.dumps({{"reset": reset, "grown": status("VmHWM") - before, "estimate": est.per_sample + est.workspace}}))
"""


def child(code: str) -> dict:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    if not got["reset"]:
        pytest.skip("this kernel cannot reset the peak RSS (/proc/self/clear_refs): evaluation's own peak is "
                    "unmeasurable")
    return got


@pytest.mark.slow
def test_lobster_backbone_100_test_batch_fits_the_memory_budget(tmp_path):
    got = child(LOBSTER_CHILD.format(available=AVAILABLE, data=tmp_path / "data"))
    assert got["fraction"] == FRACTION
    assert "backbone 100" in got["label"] and "4 samples" in got["label"]
    grown = got["peak"] - got["before"]
    assert grown <= FRACTION * AVAILABLE, (
        f"evaluating took {grown / MiB:.0f} MiB beyond the {got['before'] / MiB:.0f} MiB before it, "
        f"over the picker's budget of {FRACTION * AVAILABLE / MiB:.0f} MiB (batch {got['batch']})")


@pytest.mark.slow
@pytest.mark.parametrize("model, task, n, graph, sets", [
    ("mpnn", "bfs", 256, None, []), ("rt", "bfs", 192, None, []), ("triplet_gmpnn", "bfs", 256, None, []),
    ("mpnn", "floyd_warshall", 96, None, []),
    # the ET's eager kernels (no compilation in the child): its chunk buffer is the workspace, 128 MiB here
    ("et", "bfs", 128, None, ["processor.compiled_kernels=false"]),
    # edge lists: model.sparse auto runs n=1600 sparse, its probes (n <= 64) dense and sparse
    ("pgn", "bfs", 1600, "er:c=2", []),
    # edge lists at 3n steps: the kept hard hint predictions and the scoring dominate
    ("pgn", "dfs", 800, "er:c=2", ["model.sparse=always", "model.hidden=8"])])
def test_estimate_of_one_sample_is_close_to_the_measured_peak(tmp_path, model, task, n, graph, sets):
    got = child(ESTIMATE_CHILD.format(model=model, task=task, n=n, graph=graph, sets=sets, data=tmp_path / "data"))
    ratio = got["estimate"] / got["grown"]
    assert 1 / ESTIMATE_FACTOR <= ratio <= ESTIMATE_FACTOR, (
        f"{model} on {task} at n={n}: estimated {got['estimate'] / MiB:.0f} MiB, measured "
        f"{got['grown'] / MiB:.0f} MiB (ratio {ratio:.2f})")
