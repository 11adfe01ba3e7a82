"""The training step's forward and backward as CUDA graphs (`train.cuda_graph: true`).

The papers' protocols train tiny batches (4 graphs for the RT, 32 of n <= 16 elsewhere), so on a GPU a
step is launch-bound: hundreds of small kernels, each waiting on Python. A CUDA graph records the kernels of
one forward+backward once and replays them with one launch. It replays kernels, not Python, so what it
captures must have fixed shapes, read nothing back to the host and draw no random numbers inside: the
shape-static step (`train.static_step`, relreason.models.net.Net._forward_static) gives the first two, and
a `Tape` (relreason.models.noise) moves the draws out (made before the replay, from the step's own noise).

One graph per batch signature (the shapes and dtypes of the batch's tensors: a bellman_ford batch's hint
length varies, so a run holds a few; the Ibarz et al. stream samples graph sizes too, and made 16 graphs in
its first 40 steps on the H200). Each graph keeps its own memory pool (its activations and gradients), so
memory grows with the number of shapes a run meets; graphs cannot share one pool safely, since they replay
in any order. Each replay:
1. copies the step's batch into the graph's input tensors and its noise draws into the tape's buffers;
2. replays forward and backward, which leave the loss and the gradients in the graph's output tensors;
3. points each parameter's `.grad` at them, for the loop's clipping and Adam step (run eagerly: the
   learning rate changes per step, and an update outside the graph leaves the optimizer as it is).

The numbers are the uncaptured static step's, to float rounding (same kernels; the capture fixes which).
What cannot be captured is refused with one line when the step is first built: a CPU device, several
processes, a multi-task or text workload, a processor dropout (torch's global generator: other numbers
than the uncaptured run's).

A seed group's vmapped step (relreason.train.seed_group) is captured the same way (`grouped=True`): its
input is the members' batches stacked on the seed axis (padded to the group's largest shapes before the
copy, so the graphs are keyed by the group's padded shapes, as few as one run's), its noise one tape per
member (each member's draws, from its own noise), its loss the (K,) losses, and `params` every member's
parameters: one graph replays the K forwards and backwards.

`replay="eager"` re-runs the recorded step instead of replaying a graph: the staging above, without CUDA,
so that the CPU suite checks that a captured run trains the uncaptured run's weights exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch

from relreason.errors import RelreasonError
from relreason.models.noise import Tape
from relreason.train.workloads import NarPart, NarWorkload


def signature(batch) -> tuple:
    """What a graph is keyed by: every tensor's name, shape and dtype (a relreason.models.batch.Batch, or a
    seed group's stacked batches: relreason.train.seed_group.stack_batches' dict)."""
    return tuple((name, tuple(t.shape), t.dtype) for name, t in _tensors(batch))


def _tensors(batch) -> list[tuple[str, torch.Tensor]]:
    if isinstance(batch, dict):  # stacked: {"inputs": {...}, ..., "lengths": t, "node_mask": t}
        get = batch.__getitem__
    else:
        def get(name):
            return getattr(batch, name)
    out = [("lengths", get("lengths")), ("node_mask", get("node_mask"))]
    for group in ("inputs", "hints", "outputs"):
        out += [(f"{group}.{k}", v) for k, v in sorted(get(group).items())]
    return out


def _clone(batch):
    """A batch whose tensors are fresh copies: the graph's input tensors, refilled before each replay."""
    groups = {g: {k: v.clone() for k, v in (batch[g] if isinstance(batch, dict) else getattr(batch, g)).items()}
              for g in ("inputs", "hints", "outputs")}
    if isinstance(batch, dict):
        return {**groups, "lengths": batch["lengths"].clone(), "node_mask": batch["node_mask"].clone()}
    return dataclasses.replace(batch, **groups, lengths=batch.lengths.clone(), node_mask=batch.node_mask.clone())


@dataclass
class _Graph:
    batch: Any  # the captured step's input tensors (a Batch, or a seed group's stacked dict)
    tapes: list[Tape]  # its noise buffers (one per seed-group member)
    run: Callable[[], tuple[torch.Tensor, list[torch.Tensor | None]]]  # replays; returns (loss, grads)


class CapturedStep:
    """Forward and backward of one-process training, replayed from CUDA graphs (module docstring).

    `loss_fn(batch, noise)` is the step's loss (the workload's, under the run's precision); `params` the
    model's parameters, whose `.grad` each call sets. `grouped`: a seed group's step, called with the stacked
    batches and the members' noises (a list), `loss_fn` returning the (K,) losses."""

    # True: every CapturedStep captures on torch's one default capture stream, as before 2026-11-28 (the probe's
    # "shared-capture" variant, scripts/gpu_pack_probe.py). torch keys the cuBLAS workspaces by stream, so graphs
    # captured on one stream bake in one workspace; replayed at once on a pack's side streams they would share it
    # (the leading suspect for the H200 pack stall, docs/gpu.md).
    SHARED_CAPTURE_STREAM = False
    SHARED_CAPTURE_ENV = "RELREASON_SHARED_CAPTURE_STREAM"  # "1": the same, for a GPU command (an escape hatch
    # while capturing on a step's own stream is unmeasured on a GPU)

    def __init__(self, loss_fn: Callable, params: list[torch.nn.Parameter], device: torch.device,
                 replay: str = "cuda", grouped: bool = False):
        if replay not in ("cuda", "eager"):
            raise ValueError(f"replay must be 'cuda' or 'eager', got {replay!r}")
        self.loss_fn, self.params, self.device, self.replay = loss_fn, list(params), device, replay
        self.grouped = grouped
        self.graphs: dict[tuple, _Graph] = {}
        self._stream = None  # this step's own capture stream (made at its first capture)

    def capture_stream(self):
        """The stream this step warms up and captures on: its own (its graphs' cuBLAS workspaces then are its own),
        or None (torch's shared default) under SHARED_CAPTURE_STREAM."""
        if self.SHARED_CAPTURE_STREAM or os.environ.get(self.SHARED_CAPTURE_ENV) == "1":
            return None
        if self._stream is None:  # from torch's round-robin pool of 32: a pack of 8 holds 16 distinct streams
            self._stream = torch.cuda.Stream(self.device)
        return self._stream

    def __call__(self, batch, noise) -> torch.Tensor:
        """The loss of one step (a tensor on the device; (K,) grouped); the parameters' `.grad` hold its
        gradients."""
        noises = list(noise) if self.grouped else [noise]
        key = signature(batch)
        g = self.graphs.get(key)
        if g is None:
            g = self.graphs[key] = self._capture(batch, noises)
        new = dict(_tensors(batch))
        for name, t in _tensors(g.batch):
            t.copy_(new[name])
        for tape, n in zip(g.tapes, noises):
            tape.refill(n)
        loss, grads = g.run()
        for p, grad in zip(self.params, grads):
            p.grad = grad
        return loss

    def _forward_backward(self, batch, noises) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
        for p in self.params:
            p.grad = None
        loss = self.loss_fn(batch, noises) if self.grouped else self.loss_fn(batch, noises[0])
        # a group's members are independent: the backward of their sum gives each its own gradients
        (loss.sum() if self.grouped else loss).backward()
        # detached: a live autograd graph would keep the parameters' AccumulateGrad nodes, made on another
        # stream, alive into the next capture, which CUDA then refuses (a capture must not wait on the
        # legacy stream)
        return loss.detach(), [p.grad for p in self.params]

    def _capture(self, batch, noises: list) -> _Graph:
        static, tapes = _clone(batch), [Tape() for _ in noises]
        taped = [n.taped(t) for n, t in zip(noises, tapes)]

        def serve():
            for t in tapes:
                t.serve()
        if self.replay == "eager":
            self._forward_backward(static, taped)  # records the draws
            serve()

            def again():
                serve()
                return self._forward_backward(static, taped)
            return _Graph(static, tapes, again)
        # warm-up on a side stream (the CUDA graph recipe: lazy handles and autograd state are made outside
        # the capture), the first run recording the draws; the parameters' gradients are discarded
        torch.cuda.synchronize(self.device)  # nothing of earlier steps still runs on another stream
        own = self.capture_stream()
        side = own if own is not None else torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self._forward_backward(static, taped)
            serve()
            for _ in range(2):
                serve()
                self._forward_backward(static, taped)
        torch.cuda.current_stream(self.device).wait_stream(side)
        for p in self.params:
            p.grad = None
        graph = torch.cuda.CUDAGraph()
        serve()
        with torch.cuda.graph(graph, stream=own):
            loss, grads = self._forward_backward(static, taped)

        def replay():
            graph.replay()
            return loss, grads
        return _Graph(static, tapes, replay)


def check_capturable(cfg, device: torch.device, world: int, workload) -> None:
    """Refuses, in one line, a run whose step cannot be captured (train.cuda_graph)."""
    if device.type != "cuda":
        raise RelreasonError(f"train.cuda_graph captures the training step on a CUDA device, but this run trains "
                             f"on {device.type}", "set train.device: cuda (auto picks it on a CUDA machine) or "
                             "train.cuda_graph: false")
    if not cfg.train.static_step:
        raise RelreasonError("train.cuda_graph needs the shape-static step (fixed shapes, no host reads)",
                             "set train.static_step: true as well")
    if world > 1:
        raise RelreasonError("train.cuda_graph captures one process's step; this run has several",
                             "run it without torchrun, or set train.cuda_graph: false")
    if getattr(cfg.processor, "dropout", 0):
        raise RelreasonError(f"train.cuda_graph: {cfg.model_name}'s processor.dropout draws from torch's global "
                             "generator, which a captured step draws differently from the uncaptured run",
                             "set processor.dropout: 0, or train.cuda_graph: false")
    if not isinstance(workload, NarWorkload) or workload.built.multi:
        raise RelreasonError(f"train.cuda_graph captures one-task graph workloads; {cfg.model_name} on {cfg.task} "
                             "is not one", "set train.cuda_graph: false")


def captured_loss(workload, model: torch.nn.Module, precision: str, device: torch.device) -> Callable:
    """The step's loss for a CapturedStep: the workload's, under autocast without its cache (which a
    capture forbids) in bf16."""
    def loss_fn(batch, noise):
        ctx = torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False) if precision == "bf16" \
            else contextlib.nullcontext()
        with ctx:
            loss, _ = workload.loss(model, NarPart(0, batch, noise, 1), 0)
        return loss
    return loss_fn
