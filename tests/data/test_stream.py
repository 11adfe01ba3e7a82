"""The Ibarz training stream: deterministic per (algorithm, seed, step), row subsets equal to the full
batch's rows, the reference's size schedule, edge probabilities and needle lengths, and prefetching
workers that deliver the same batches and always go away."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from fake_runs import dead_pid

from relreason.data import ALGORITHMS, generate
from relreason.data import stream as stream_module
from relreason.data.specs import POINTER_TYPES, Stage, Type
from relreason.data.store import fingerprint, owner_tag
from relreason.data.stream import (EDGE_PROBABILITIES, HALVED_EDGE_PROBABILITIES, SIZES, SPARSE_ALGORITHMS,
                                   MultiPrefetcher, Prefetcher, TrainingStream)
from relreason.errors import RelreasonError

MATCHERS = ("naive_string_matcher", "kmp_matcher")
GRAPH_ALGORITHMS = [n for n in ALGORITHMS.names() if TrainingStream(n, 0).edge_probabilities is not None]


def digest(ds) -> str:
    return fingerprint(ds.arrays())


def assert_same_samples(a, b) -> None:
    """Equal inputs, outputs and lengths, and equal hints up to each sample's length."""
    assert a.algorithm == b.algorithm and len(a) == len(b)
    np.testing.assert_array_equal(a.lengths, b.lengths)
    for store in ("inputs", "outputs"):
        for k, v in getattr(a, store).items():
            np.testing.assert_array_equal(v, getattr(b, store)[k], err_msg=k)
    T = int(a.lengths.max())
    for k, v in a.hints.items():
        np.testing.assert_array_equal(v[:, :T], b.hints[k][:, :T], err_msg=k)


def worker_gone(pid: int) -> bool:
    """The process no longer runs (a zombie left to an init that does not reap counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pid: int, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if worker_gone(pid):
            return True
        time.sleep(0.05)
    return worker_gone(pid)


def test_the_reference_constants():
    assert SIZES == (4, 7, 11, 13, 16)
    np.testing.assert_allclose(EDGE_PROBABILITIES, np.arange(1, 10) / 10)
    np.testing.assert_allclose(HALVED_EDGE_PROBABILITIES, np.arange(1, 10) / 20)
    assert SPARSE_ALGORITHMS <= set(ALGORITHMS.names())
    assert set(GRAPH_ALGORITHMS) == {
        "dfs", "bfs", "topological_sort", "articulation_points", "bridges", "strongly_connected_components",
        "mst_kruskal", "mst_prim", "bellman_ford", "dijkstra", "dag_shortest_paths", "floyd_warshall"}


@pytest.mark.parametrize("name", ["bellman_ford", "naive_string_matcher", "insertion_sort"])
def test_same_step_same_bytes_in_any_order(name):
    first, second = TrainingStream(name, seed=3), TrainingStream(name, seed=3)
    forward = [digest(first.batch(k)) for k in range(6)]
    backward = [digest(second.batch(k)) for k in reversed(range(6))][::-1]
    assert forward == backward
    assert len(set(forward)) == 6
    assert digest(TrainingStream(name, seed=4).batch(2)) != forward[2]


def test_algorithms_have_their_own_streams():
    """Same seed, same sampler: bellman_ford and dijkstra must still see different graphs."""
    a = TrainingStream("bellman_ford", seed=0).batch(0)
    b = TrainingStream("dijkstra", seed=0).batch(0)
    assert not np.array_equal(a.inputs["A"], b.inputs["A"])


@pytest.mark.parametrize("name", ["bellman_ford", "kmp_matcher", "quickselect"])
@pytest.mark.parametrize("rows", [slice(0, 8), slice(8, 32), slice(5, 6), [31, 2, 17, 2]])
def test_rows_equal_the_rows_of_the_full_batch(name, rows):
    stream = TrainingStream(name, seed=11)
    for step in (0, 4):
        full, part = stream.batch(step), stream.batch(step, rows=rows)
        index = np.arange(32)[rows] if isinstance(rows, slice) else np.asarray(rows)
        assert part.meta["rows"] == index.tolist()
        assert_same_samples(full.take(index), part)
        assert part.max_length == part.lengths.max()  # padded to its own rows' longest
        for key in ("p", "length_needle"):
            if key in full.meta:
                assert part.meta[key] == [full.meta[key][i] for i in index]


@pytest.mark.parametrize("rows", [slice(3, 3), [], [32], [-1], [[0, 1]], [0.5]])
def test_bad_rows_are_rejected(rows):
    with pytest.raises(RelreasonError):
        TrainingStream("bfs", 0).batch(0, rows=rows)


def test_size_schedule_cycles_through_the_sizes():
    stream = TrainingStream("dijkstra", seed=0)
    assert [stream.size(k) for k in range(12)] == [4, 7, 11, 13, 16] * 2 + [4, 7]
    for k in range(5):
        ds = stream.batch(k, rows=[0])
        assert ds.n == ds.meta["size"] == SIZES[k]
    assert TrainingStream("bfs", 0, sizes=(5, 9)).schedule == (5, 9)


@pytest.mark.parametrize("name", MATCHERS)
def test_string_matchers_have_one_size_and_random_needles(name):
    stream = TrainingStream(name, seed=1)
    assert stream.schedule == (20,)  # max(SIZES) * 5 // 4, haystack + needle
    needles = []
    for step in range(8):
        ds = stream.batch(step)
        assert ds.n == 20 and len(ds) == 32
        needle = ds.inputs["string"].sum(axis=1)  # the needle's nodes
        np.testing.assert_array_equal(needle, ds.meta["length_needle"])
        needles += ds.meta["length_needle"]
        # the needle really occurs in the haystack, at the reported match
        key = ds.inputs["key"].argmax(-1)
        for b in range(len(ds)):
            m = int(needle[b])
            at = int(ds.outputs["match"][b].argmax())
            np.testing.assert_array_equal(key[b, at:at + m], key[b, 20 - m:])
    counts = np.bincount(needles, minlength=9)
    assert counts[0] == 0 and len(counts) == 9 and counts[1:].min() > 0.5 * len(needles) / 8


def test_edge_probability_is_drawn_per_sample_and_used():
    """dfs graphs are directed ER graphs over all N x N entries: their density estimates p."""
    stream = TrainingStream("dfs", seed=5, batch_size=64)
    ps, density = [], []
    for step in (4, 9, 14):  # size 16
        ds = stream.batch(step)
        ps += ds.meta["p"]
        density += list((ds.inputs["A"] != 0).mean(axis=(1, 2)))
    ps, density = np.asarray(ps), np.asarray(density)
    values, counts = np.unique(ps, return_counts=True)
    assert set(values) == set(EDGE_PROBABILITIES)
    assert counts.min() > 0.5 * len(ps) / 9  # ~uniform over the nine values
    for p in EDGE_PROBABILITIES:
        assert abs(density[ps == p].mean() - p) < 0.04  # ~20 graphs of 256 entries each


@pytest.mark.parametrize("name", GRAPH_ALGORITHMS)
def test_halved_probabilities_exactly_for_the_sparse_algorithms(name):
    stream = TrainingStream(name, seed=2)
    ds = stream.batch(4)
    expected = HALVED_EDGE_PROBABILITIES if name in SPARSE_ALGORITHMS else EDGE_PROBABILITIES
    assert stream.edge_probabilities == expected
    assert set(ds.meta["p"]) <= set(expected) and len(set(ds.meta["p"])) > 3


def test_undirected_graphs_follow_their_halved_p():
    """mst_kruskal: undirected (mat *= mat.T), so off-diagonal edges appear with probability p^2."""
    ds = TrainingStream("mst_kruskal", seed=0, batch_size=256).batch(4)
    n = ds.n
    off = ~np.eye(n, dtype=bool)
    edges = (ds.inputs["A"] != 0)[:, off].mean(axis=1)
    ps = np.asarray(ds.meta["p"])
    assert ps.max() <= 0.45
    assert abs(edges.mean() - np.mean(ps ** 2)) < 0.01


def test_per_sample_draws_are_the_reference_samplers_calls(monkeypatch):
    """Given the same random stream, a sample is drawn with the reference's calls, written out:
    `BellmanFordSampler(p=...)` and `MatcherSampler(length_needle=-8)` of clrs samplers.py."""
    monkeypatch.setattr(TrainingStream, "generator", lambda self, step, row: np.random.RandomState(100 * step + row))
    ds = TrainingStream("bellman_ford", seed=0, batch_size=6).batch(2)  # size 11
    for b in range(6):
        ref = np.random.RandomState(200 + b)
        p = ref.choice(EDGE_PROBABILITIES)
        mat = ref.binomial(1, p, size=(11, 11))
        mat *= mat.T
        w = ref.uniform(size=(11, 11))
        w *= w.T
        np.testing.assert_array_equal(ds.inputs["A"][b], mat * np.sqrt(w + 1e-3))
        assert ds.inputs["s"][b].argmax() == ref.choice(11) and ds.meta["p"][b] == p
    ds = TrainingStream("naive_string_matcher", seed=0, batch_size=6).batch(1)  # always 20 nodes
    for b in range(6):
        ref = np.random.RandomState(100 + b)
        m = ref.randint(1, high=1 - (-8))
        needle = ref.randint(0, high=4, size=(m,))
        haystack = ref.randint(0, high=4, size=(20 - m,))
        at = ref.choice(20 - 2 * m)
        haystack[at:at + m] = needle
        np.testing.assert_array_equal(ds.inputs["key"][b].argmax(-1), np.concatenate([haystack, needle]))
        assert ds.meta["length_needle"][b] == m


@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_every_algorithm_streams_valid_batches_at_every_size(name):
    stream = TrainingStream(name, seed=0, batch_size=3)
    for step, n in enumerate(stream.schedule):
        ds = stream.batch(step)
        nodes = generate(name, num=1, size=n, seed=0).n  # optimal_bst has n + 1 nodes, segments_intersect 4
        assert (ds.algorithm, ds.n, len(ds)) == (name, nodes, 3)
        assert ds.meta["algorithm"] == name and ds.meta["split"] == "stream" and ds.meta["stream"] == "ibarz"
        assert ds.meta["step"] == step and ds.meta["size"] == n
        B, T = len(ds), ds.max_length
        assert ds.lengths.min() >= 1 and ds.lengths.max() == T
        for f in ds.spec.values():
            x = {Stage.INPUT: ds.inputs, Stage.OUTPUT: ds.outputs, Stage.HINT: ds.hints}[f.stage][f.name]
            lead = (B, T) if f.stage is Stage.HINT else (B,)
            assert x.shape == lead + f.shape(nodes), f.name
            if f.type in POINTER_TYPES:
                assert x.min() >= -1 and x.max() < nodes, f.name  # -1: masked
            elif f.type in (Type.MASK_ONE, Type.CATEGORICAL) and f.stage is not Stage.HINT:
                assert np.all(np.abs(x).sum(-1) == 1), f.name  # one-hot (lcs_length masks a class with -1)


@pytest.mark.parametrize("kwargs", [dict(seed=-1), dict(seed=1.5), dict(batch_size=0), dict(sizes=()),
                                    dict(sizes=(1, 4)), dict(algorithm="bellmanford")])
def test_bad_streams_are_rejected(kwargs):
    args = dict(algorithm="bellman_ford", seed=0) | kwargs
    with pytest.raises(RelreasonError):
        TrainingStream(**args)


def test_string_matchers_need_room_for_the_needle():
    with pytest.raises(RelreasonError, match="needle"):
        TrainingStream("kmp_matcher", 0, sizes=(4, 13))  # 13 * 5 // 4 = 16 nodes: a needle of 8 leaves 8


def test_prefetcher_delivers_the_stream_in_order():
    stream = TrainingStream("bellman_ford", seed=7, batch_size=8)
    with Prefetcher(stream, start_step=3, depth=2, rows=slice(2, 6), stop_step=9) as batches:
        got = list(batches)
    assert [step for step, _ in got] == list(range(3, 9))
    for step, ds in got:
        assert digest(ds) == digest(stream.batch(step, rows=slice(2, 6)))
        assert ds.spec is stream.batch(step).spec


def test_multi_prefetcher_serves_several_streams_with_several_workers():
    streams = [TrainingStream("bfs", 1, batch_size=4), TrainingStream("naive_string_matcher", 1, batch_size=4)]
    with MultiPrefetcher(streams, start_step=10, depth=1, workers=2, stop_step=15) as batches:
        got = list(batches)
    assert [step for step, _ in got] == list(range(10, 15))
    for step, datasets in got:
        assert [digest(d) for d in datasets] == [digest(s.batch(step)) for s in streams]


def test_workers_stop_on_close_and_on_garbage_collection():
    stream = TrainingStream("floyd_warshall", seed=0)
    p = Prefetcher(stream, depth=2, workers=2)
    next(p)
    pids, spool = p.worker_pids, p._spool
    p.close()
    assert all(worker_gone(pid) for pid in pids) and not os.path.exists(spool)
    p.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        next(p)
    p = Prefetcher(stream, depth=2)
    pids = p.worker_pids
    del p
    gc.collect()
    assert all(worker_gone(pid) for pid in pids)


def test_an_interrupt_while_a_prefetcher_starts_leaves_no_spool(monkeypatch):
    made, real = [], os.mkdir

    def mkdir_then_interrupt(path, *args, **kwargs):  # the moment a Ctrl-C lands just after the spool is made
        real(path, *args, **kwargs)
        if os.path.basename(path).startswith(stream_module.SPOOL_PREFIX):
            made.append(path)
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "mkdir", mkdir_then_interrupt)
    try:
        Prefetcher(TrainingStream("bfs", 0))
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    gc.collect()
    assert made and not os.path.exists(made[0])


def test_a_new_prefetcher_removes_the_spools_dead_processes_left(tmp_path, monkeypatch):
    """A training killed outright (its data workers with it) cannot remove its spool: the next one does."""
    monkeypatch.setattr(stream_module, "SHM_DIR", str(tmp_path))
    monkeypatch.setattr(stream_module, "SHM_MIN_FREE", 0)
    host = owner_tag().split("@")[1]
    prefix = stream_module.SPOOL_PREFIX
    stale = tmp_path / f"{prefix}{dead_pid()}@{host}.0123abcd.tmp"
    kept = [tmp_path / f"{prefix}{os.getppid()}@{host}.0123abcd.tmp",  # a live process's
            tmp_path / f".other.{dead_pid()}@{host}.0123abcd.tmp"]  # not a spool: not ours to remove here
    for d in (stale, *kept):
        d.mkdir()
    (stale / "step.pkl").write_bytes(b"x")
    p = Prefetcher(TrainingStream("bfs", 0))
    try:
        assert Path(p._spool).parent == tmp_path and Path(p._spool).exists()
        assert not stale.exists() and all(d.exists() for d in kept)
    finally:
        p.close()
    assert not Path(p._spool).exists()


def test_worker_errors_are_raised_in_the_parent():
    stream = TrainingStream("bfs", 0)
    object.__setattr__(stream, "algorithm", "no_such_algorithm")  # breaks only where batches are made
    p = Prefetcher(stream)
    with pytest.raises(RelreasonError, match="unknown algorithm 'no_such_algorithm'") as err:
        next(p)
    assert err.value.hint and "data worker" not in str(err.value)
    assert "Traceback" in str(err.value.__cause__)
    assert all(wait_gone(pid) for pid in p.worker_pids)


def test_a_killed_worker_is_reported():
    p = Prefetcher(TrainingStream("bfs", 0), depth=1)
    next(p)
    os.kill(p.worker_pids[0], signal.SIGKILL)
    with pytest.raises(RuntimeError, match="exited"):
        for _ in range(10):
            next(p)


PARENT = textwrap.dedent("""
    import os, signal, sys
    from relreason.data.stream import Prefetcher, TrainingStream
    p = Prefetcher(TrainingStream("bfs", 0), depth=2)
    next(p)
    print(p.worker_pids[0], p._spool, flush=True)
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    input()
""")


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_workers_do_not_outlive_their_parent(how):
    """Ctrl-C (KeyboardInterrupt) or a hard kill of the training process stops its workers."""
    proc = subprocess.run([sys.executable, "-c", PARENT, how], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    pid, spool = proc.stdout.split()
    assert proc.returncode != 0
    assert wait_gone(int(pid)), f"worker {pid} outlived its parent ({how})"
    assert not os.path.exists(spool)  # its batch files went with it
    if how == "SIGINT":
        assert "KeyboardInterrupt" in proc.stderr and proc.stderr.count("Traceback") == 1  # the worker stays quiet
