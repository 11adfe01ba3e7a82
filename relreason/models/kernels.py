"""Fused kernels: broadcast expressions compiled by torch.compile (inductor) into one loop nest.

Some contractions in our processors have no matrix-product form, e.g. the Edge Transformer's
triangular value sum out[g, i, j, c] = sum_k a[g, i, j, k] p[g, i, k, c] q[g, j, k, c]: every pair of
its operands misses an index of the third, so eager PyTorch runs it as elementwise passes over
(.., K, C) buffers at a few GFLOP/s. Written as one broadcast expression and compiled, it becomes a
single loop nest that never builds the (.., K, C) product: 5-8x faster on a 2-core CPU at n = 16 and
n = 64 (scripts/bench_train.py --model et). Results equal the eager kernels to float rounding.

`fused(expr, *args, eager=...)` runs the compiled `expr(*args)`, or the eager kernel on the same
arguments (by default `expr` itself, uncompiled) when compiling is switched off for a block
(`enabled(False)`: the benchmark counts FLOPs so, the memory probes of relreason.eval.memory see every
op so) or unavailable (no C++ compiler, or inductor
failed): then one line on stderr says so, once per process, and every later call runs eager. A
model option (the ET's `compiled_kernels: false`) skips `fused` altogether. Each expression is
compiled once per process with dynamic shapes (an ET run's first compilation takes about 25 s on a
2-core CPU; inductor caches it on disk for later processes). `broken()` and `compiled_calls()` say which
path ran and `reset()` forgets a fallback: tests of the compiled kernels use them (tests/compiled_kernels.py),
since a fallback would otherwise make them compare eager with eager.

Eager kernels that work in chunks of a budget (the ET's triangular product: `chunk_mb`; the decoders'
edge-pointer logits: EDGE_POINTER_CHUNK elements) read it through `chunk_budget`: within
`smallest_chunks()` they take one row at a time, so what the memory probes measure grows with the graphs
alone, and the chunk buffer, bounded by the budget, is added as the constant it is (`Net.eval_workspace`).

Within `plain_autograd()` the models' hand-written autograd Functions (the MPNN messages, the triplet
max-plus, the pointer decoders' logits, the ET's triangular product) and fused kernels give way to the
plain autograd expressions they equal (to float rounding), and no shortcut reads a tensor's value: what
`torch.vmap` needs (a seed group's step, relreason.train.seed_group). They cost more memory there.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

import torch

RECOMPILE_LIMIT = 64  # compiled variants kept per expression (dtypes x stride patterns x size classes)
_compiled: dict[Callable[..., torch.Tensor], Callable[..., torch.Tensor]] = {}
_state = {"on": True, "broken": "", "compiled_calls": 0, "smallest_chunks": False, "plain": False,
          "no_reads": False}


def broken() -> str:
    """Why this process runs the eager kernels in place of the fused ones ("" while compiling works)."""
    return _state["broken"]


def compiled_calls() -> int:
    """How many `fused` calls in this process ran compiled code (tests check that the compiled path ran)."""
    return _state["compiled_calls"]


def reset() -> None:
    """Forgets a compile failure, the call count and the compiled expressions: the next `fused` call
    compiles again (for tests, which must not inherit an earlier test's fallback)."""
    _compiled.clear()
    _state.update(broken="", compiled_calls=0)


@contextlib.contextmanager
def enabled(on: bool) -> Iterator[None]:
    """Within the block, `fused` compiles (on) or always runs the eager kernel (off)."""
    before = _state["on"]
    _state["on"] = on
    try:
        yield
    finally:
        _state["on"] = before


@contextlib.contextmanager
def plain_autograd() -> Iterator[None]:
    """Within the block, models run plain autograd expressions in place of custom Functions and fused
    kernels, with no branch on a tensor's value (module docstring): the forward runs under torch.vmap."""
    before = _state["plain"], _state["no_reads"]
    _state["plain"] = _state["no_reads"] = True
    try:
        yield
    finally:
        _state["plain"], _state["no_reads"] = before


def plain() -> bool:
    """True inside `plain_autograd()`."""
    return _state["plain"]


@contextlib.contextmanager
def no_host_reads() -> Iterator[None]:
    """Within the block (the shape-static step), kernels take no shortcut that reads a tensor's value back
    to the host (`reads_allowed()` is False); their results do not change."""
    before = _state["no_reads"]
    _state["no_reads"] = True
    try:
        yield
    finally:
        _state["no_reads"] = before


def reads_allowed() -> bool:
    """False inside `no_host_reads()` or `plain_autograd()`."""
    return not _state["no_reads"]


@contextlib.contextmanager
def smallest_chunks() -> Iterator[None]:
    """Within the block, eager kernels work in their smallest chunks (`chunk_budget` gives 0: one row)."""
    before = _state["smallest_chunks"]
    _state["smallest_chunks"] = True
    try:
        yield
    finally:
        _state["smallest_chunks"] = before


def chunk_budget(budget: int) -> int:
    """What an eager kernel's chunks may take (bytes or elements, as the kernel counts): `budget`, or 0
    (one row at a time) within `smallest_chunks()`. Results do not depend on it."""
    return 0 if _state["smallest_chunks"] else budget


def fused(expr: Callable[..., torch.Tensor], *args: torch.Tensor,
          eager: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
    """`expr(*args)` compiled into one loop nest, or `eager(*args)` (the same values; default: `expr`
    uncompiled) when compiling is off or unavailable."""
    if not _state["on"] or _state["broken"]:
        return (eager or expr)(*args)
    fn = _compiled.get(expr)
    if fn is None:
        # one variant per dtype and stride pattern (a backward passes transposed views): more than dynamo's 8
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
        fn = _compiled[expr] = torch.compile(expr, dynamic=True, fullgraph=True)
    try:
        # detached: these run inside autograd Functions, where requires_grad flags vary but mean nothing
        out = fn(*(x.detach() for x in args))
    except torch._dynamo.exc.TorchDynamoException as exc:  # e.g. no working C++ compiler on this machine
        cause = getattr(exc, "inner_exception", None) or exc
        text = str(cause).strip()
        reason = f"{type(cause).__name__}: {text.splitlines()[0][:200]}" if text else type(cause).__name__
        _state["broken"] = reason
        print(f"relreason: warning: fused kernels unavailable ({reason}); running the eager kernels "
              "(same results, slower; --set processor.compiled_kernels=false skips the attempt)", file=sys.stderr)
        return (eager or expr)(*args)
    _state["compiled_calls"] += 1
    return out
