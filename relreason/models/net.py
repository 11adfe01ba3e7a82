"""The encode-process-decode network over an algorithm's hint steps (CLRS reference semantics).

    net = build_model(spec, ModelConfig(), "mpnn", MPNNConfig())
    out = net(batch, train=True, generator=g)      # NetOutput: raw predictions
    loss, terms = net.loss(batch, out)             # scalar tensor, {"output.pi": .., "hint.d": ..}
    preds = net.predict(out)                       # storage convention, for relreason.eval.Scorer
    out = net(batch, train=False, hard_hints=True) # evaluation: hints kept as `predict` returns them

Per forward pass, with T the batch's longest trajectory, the network runs S = max(1, T - 1) steps:
step 0 encodes the inputs and the ground-truth hints[0]; step s >= 1 encodes the hints predicted at
step s - 1 (soft or hard, `hint_repred`; in training, per sample and per step, the ground truth
instead with probability `teacher_forcing`, drawn anew at every step: the reference's and the RT
authors' `hint_teacher_forcing_noise` is 1 - teacher_forcing); every
step runs the processor from the carried state and decodes hints[s + 1]. A sample with L hint steps
runs max(1, L - 1) steps: afterwards its state is frozen (later steps compute only the samples still
running), and its outputs are decoded from its own last step. The loop over steps is the only Python
loop; everything inside is batched.

The network keeps every step's hint predictions until the end of the pass: raw (logits; a pointer's
over the n nodes) for the loss, or, with `hard_hints` (evaluation: scoring reads nothing else), in the
storage convention `predict` returns, hardened as each step ends (a pointer's index: n times smaller;
dfs at n = 1,600 has 4,800 steps). `predict` then gives the same tensors either way.

On large sparse graphs (`model.sparse`, relreason.models.sparse) the same loop runs on edge lists:
`sparse_graph(batch)` says whether and on which entries; the NetOutput then holds node-pointer
predictions per entry ((E,) outputs, (E, S) hints) beside the graph, and `loss` and `predict` read them
over each node's candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch
from torch import nn

from relreason.data.specs import Location, Spec, Stage, Type
from relreason.errors import RelreasonError
from relreason.models.batch import Batch, permutation_mask_of, prepare_spec
from relreason.models import sparse as sp
from relreason.models.config import ModelConfig, PointerCandidates, PointerDecoding, RepredMode, ScalarLoss, SparseMode
from relreason.models.decoders import (EDGE_POINTER_CHUNK, DecodeContext, Decoders, feedback, fuse_permutation,
                                       harden, uniform)
from relreason.models.encoders import Encoders, check_supported, entry_form, model_form
from relreason.models.kernels import no_host_reads
from relreason.models.losses import element_mask, feature_loss_sum
from relreason.models.noise import Noise, Site, as_noise, stream, subset
from relreason.models.processors import PROCESSORS, Processor, State
from relreason.models.processors.base import checked_step


@dataclass
class NetOutput:
    """Raw predictions of one forward pass."""

    outputs: dict[str, torch.Tensor]  # name -> (B, ...) logits / values, decoded at each sample's last step
    hints: dict[str, torch.Tensor]  # name -> (B, S, ...): entry s predicts hints[:, s + 1]
    node_mask: torch.Tensor  # (B, N) bool
    # forward(return_state=True): each sample's processor state after its own last step; the edge is that
    # step's edge state (also for processors that do not carry it, e.g. Triplet-GMPNN's triplet messages)
    state: State | None = None
    # the sparse form's edge list (None: dense); node pointers are then per entry: outputs (E,), hints (E, S)
    graph: sp.SparseGraph | None = None
    # forward(hard_hints=True): `hints` hold `predict`'s hard predictions (B, S, ...), per entry never
    hard_hints: bool = False


def _scatter(full: torch.Tensor | None, rows: torch.Tensor, part: torch.Tensor, size: int) -> torch.Tensor:
    """`part` written into rows `rows` of `full` ((size, ...) zeros when None), out of place."""
    if full is None:
        full = part.new_zeros((size,) + tuple(part.shape[1:]))
    return full.index_copy(0, rows, part)


def _put(buffers: dict[str, torch.Tensor], name: str, s: int, steps: int, value: torch.Tensor) -> None:
    """Writes one step's `value` (B, ...) (or (E,)) into buffers[name][:, s], a (B, steps, ...) buffer of
    zeros made at the first write: one buffer, not a stack of small per-step tensors at the end (on long
    trajectories those fragment the heap between the steps' temporaries, and the stack doubles them)."""
    if name not in buffers:
        buffers[name] = value.new_zeros((value.shape[0], steps) + tuple(value.shape[1:]))
    buffers[name][:, s] = value


def _where(keep: torch.Tensor, a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    """Per sample (keep (B,)): a where keep else b."""
    if a is None:
        return None
    return torch.where(keep.view(-1, *([1] * (a.dim() - 1))), a, b)


class Net(nn.Module):
    """Encoders + processor + decoders; see the module docstring."""

    def __init__(self, spec: Spec, cfg: ModelConfig, processor: Processor, shared_processor: bool = False):
        """`shared_processor`: the processor belongs to a multi-task model that holds (and saves) it
        once; this net only uses it, so it is not one of this net's submodules."""
        super().__init__()
        self.spec = prepare_spec(spec, cfg)
        self.cfg = cfg
        for f in self.spec.values():
            check_supported(f)
        if cfg.pointer_decoding is PointerDecoding.EDGE and processor.edge_dim == 0:
            raise RelreasonError("model.pointer_decoding 'edge' needs a processor with an edge state",
                                 "use pointer_decoding: node, or a processor with edge_dim > 0 (e.g. rt)")
        if shared_processor:
            self.__dict__["processor"] = processor  # a plain attribute: not registered, not in state_dict()
        else:
            self.processor = processor
        self._contract_checked = False  # the first processor step is checked against the contract (_process)
        reads = processor.decoder_inputs
        # a processor that reads no edge features gets none encoded (its decoders read none either)
        self.encoders = Encoders(self.spec, cfg.hidden, cfg.hint_mode.encode, cfg.encoder_init,
                                 edge_features=reads.edge_features)
        self.output_features = [f for f in self.spec.values() if f.stage is Stage.OUTPUT]
        self.hint_features = [f for f in self.spec.values() if f.stage is Stage.HINT]
        dec = dict(hidden=cfg.hidden, node_dim=processor.node_dim, edge_dim=processor.edge_dim,
                   pointer_decoding=cfg.pointer_decoding, carry_edge=processor.carry_edge,
                   inf_bias=processor.inf_bias, inf_bias_edge=processor.inf_bias_edge, inputs=reads,
                   restrict_pointers=cfg.pointer_candidates is PointerCandidates.GRAPH)
        self.output_decoders = Decoders(self.output_features, **dec)
        self.hint_decoders = Decoders(self.hint_features, **dec) if cfg.hint_mode.decode else None

    def eval_workspace(self) -> int:
        """Bytes of scratch buffers one evaluation forward holds at most, whatever the graphs and the batch
        (relreason.eval.memory adds them as a constant; its probes run the smallest chunks): the processor's
        (`Processor.eval_workspace`), and one slab of edge-pointer logits where an edge pointer is decoded."""
        decoded = self.output_features + (self.hint_features if self.hint_decoders is not None else [])
        slab = any(f.location is Location.EDGE and f.type is Type.POINTER for f in decoded)
        return self.processor.eval_workspace() + (EDGE_POINTER_CHUNK * 4 if slab else 0)  # float32

    # -- forward -------------------------------------------------------------------------------

    def _process(self, *args) -> State:
        """One processor step; a net's first is checked against the processor contract (checked_step), so a
        plugin's processor that returns a wrong shape or an edge state it did not declare fails at once,
        named, instead of training on a dropped state."""
        if self._contract_checked:
            return self.processor(*args)
        got = checked_step(self.processor, *args)
        self._contract_checked = True
        return got

    def forward(self, batch: Batch, *, train: bool, generator: torch.Generator | Noise | None = None,
                return_state: bool = False, hard_hints: bool = False, static: bool = False) -> NetOutput:
        """Runs the hint loop. `generator` draws teacher forcing, Gumbel noise and dropout (training only),
        each site and step from its own stream drawn for the global batch (relreason.models.noise), so
        a sample's noise does not depend on the batch it is in; `return_state` also returns the final
        processor state (`NetOutput.state`, what TransNAR reads); `hard_hints` (evaluation) keeps each
        step's hint predictions as `predict` returns them (module docstring), which `loss` cannot read.

        Each step computes only the samples still running (a sample with L hint steps runs
        max(1, L - 1) steps): the batch shrinks as trajectories end, which skips about a third of
        the work on CLRS batches; the others keep their state and get zero hint predictions there
        (never scored). A sample's outputs are decoded at its own last step.

        `static` (the shape-static step, `_forward_static`): finished samples are masked, not dropped: every
        step computes all B samples and every shape is fixed by the batch's tensors alone, with no host
        synchronisation (a seed group's vmap and CUDA graphs need it). The same numbers to float rounding."""
        cfg, proc = self.cfg, self.processor
        B, n, device = batch.size, batch.n, batch.device
        if hard_hints and train:
            raise ValueError("hard_hints is for evaluation (train=False): the loss reads raw hint predictions")
        noise = as_noise(generator, B)
        if static:
            if cfg.sparse is SparseMode.ALWAYS:
                raise RelreasonError("the shape-static step (train.static_step) runs dense graphs only",
                                     "set model.sparse: auto or never, or train.static_step: false")
            with no_host_reads():
                return self._forward_static(batch, train, noise, return_state)
        graph = self.sparse_graph(batch, return_state)
        if graph is not None:
            return self._forward_sparse(batch, graph, train, noise, hard_hints)
        S = max(1, batch.max_length - 1)
        steps = [max(1, L - 1) for L in batch.lengths.tolist()]  # steps each sample runs
        hard = cfg.hint_repred is not RepredMode.SOFT and not (cfg.hint_repred is RepredMode.HARD_ON_EVAL and train)
        reads = proc.decoder_inputs
        read_prev_edge = proc.carry_edge or reads.edge_history  # see FeatureDecoder.read_prev_edge

        base = self.encoders.encode_inputs(batch.inputs, batch.node_mask)
        state = proc.initial_state(B, n, device, base.node.dtype)
        edge0 = state.edge  # fed every step to processors that do not carry their edge state
        hint_preds: dict[str, list[torch.Tensor]] = {f.name: [] for f in self.hint_features} if self.hint_decoders else {}
        kept: dict[str, torch.Tensor] = {}  # hard_hints: name -> (B, S, ...) hard predictions, written per step
        prev: dict[str, torch.Tensor] = {}  # last step's raw hint predictions, (B, ...)
        outputs: dict[str, torch.Tensor] = {}
        final_edge = None  # (B, N, N, E) with return_state: each sample's edge state of its last step
        edge_in_form = (lambda e: e) if proc.factored_edges else (lambda e: e.dense())  # noqa: E731

        for s in range(S):
            running = [b for b in range(B) if steps[b] > s]
            if not running:  # only when hints were padded past every sample's length
                for k, v in prev.items():
                    if hard_hints:
                        _put(kept, k, s, S, self._hard(k, torch.zeros_like(v), batch.node_mask, None))
                    else:
                        hint_preds[k].append(torch.zeros_like(v))
                continue
            rows = None if len(running) == B else torch.tensor(running, device=device)
            pick = (lambda x: x) if rows is None else (lambda x: None if x is None else x.index_select(0, rows))  # noqa: E731
            sub = base if rows is None else base.select(rows)
            now = State(pick(state.node), pick(state.edge), pick(state.graph))
            values = self._hint_inputs(batch, s, prev, rows, train, hard, stream(noise, Site.TEACHER_FORCING, s))
            feats = self.encoders.encode_step(sub, values)
            edge_in = edge_in_form(feats.edge)
            new = State(now.node, now.edge if proc.carry_edge else pick(edge0), now.graph)
            for _ in range(cfg.processor_steps):
                new = self._process(feats.node, edge_in, feats.graph, new, feats.adj, sub.node_mask)
                if new.graph is None:
                    new = replace(new, graph=now.graph)
            if train and cfg.dropout > 0:
                keep = uniform(new.node.shape, device, subset(stream(noise, Site.DROPOUT, s), rows)) >= cfg.dropout
                new = replace(new, node=new.node * keep / (1.0 - cfg.dropout))
            ctx = DecodeContext(
                h=torch.cat([feats.node, now.node, new.node], -1),  # (b, N, H + 2D)
                edge=feats.edge if reads.edge_features else None, edge_state=new.edge if proc.edge_dim else None,
                prev_edge=now.edge if read_prev_edge and proc.edge_dim else None,
                graph=feats.graph, adj=feats.adj, node_mask=sub.node_mask,
                prev_graph=now.graph if reads.graph_history else None,
                graph_state=new.graph if reads.graph_history else None)
            if self.hint_decoders is not None:
                raw = self.hint_decoders(ctx, train, subset(stream(noise, Site.HINT_DECODERS, s), rows))
                prev = raw if rows is None else {k: _scatter(None, rows, v, B) for k, v in raw.items()}
                for k, v in prev.items():
                    if hard_hints:
                        _put(kept, k, s, S, self._hard(k, v, batch.node_mask, None))
                    else:
                        hint_preds[k].append(v)
            ending = [i for i, b in enumerate(running) if steps[b] == s + 1]
            if ending:  # decode the outputs of the samples whose last step this is
                whole = len(ending) == len(running)
                at = None if whole else torch.tensor(ending, device=device)
                dest = None if whole and rows is None else torch.tensor([running[i] for i in ending], device=device)
                out = self.output_decoders(ctx if whole else ctx.select(at), train,
                                           subset(stream(noise, Site.OUTPUT_DECODERS, s), dest))
                if dest is None:
                    outputs = out
                else:
                    outputs = {k: _scatter(outputs.get(k), dest, v, B) for k, v in out.items()}
            if return_state and new.edge is not None:
                final_edge = new.edge if rows is None else _scatter(final_edge, rows, new.edge, B)
            new_edge = new.edge if proc.carry_edge else now.edge
            if rows is None:
                state = State(new.node, new_edge, new.graph)
            else:  # finished samples keep their state
                state = State(state.node.index_copy(0, rows, new.node),
                              None if state.edge is None else state.edge.index_copy(0, rows, new_edge),
                              None if state.graph is None else state.graph.index_copy(0, rows, new.graph))

        hints = kept if hard_hints else {k: torch.stack(v, 1) for k, v in hint_preds.items()}
        final = State(state.node, final_edge, state.graph) if return_state else None
        return NetOutput(outputs, hints, batch.node_mask, final, hard_hints=hard_hints)

    # -- the shape-static step ---------------------------------------------------------------------

    def _forward_static(self, batch: Batch, train: bool, noise: Noise | None, return_state: bool) -> NetOutput:
        """`forward` with finished samples masked, not dropped: all B samples run all S steps (S from the
        hint tensors' length, so a batch padded to a longer trajectory runs more, fully masked, steps); a
        finished sample keeps its state through `torch.where` and gets zero hint predictions; its outputs
        are those decoded at its own last step. No Python branch reads a tensor's value, so nothing waits
        for the device and the step runs under `torch.vmap` (relreason.train.seed_group).

        Per-sample noise is drawn for the whole batch as in `forward`, so each sample sees the same
        numbers; the dense form only (a seed group refuses `model.sparse: always`)."""
        cfg, proc = self.cfg, self.processor
        B, n, device = batch.size, batch.n, batch.device
        S = max(1, batch.max_length - 1)
        steps = (batch.lengths - 1).clamp(min=1)  # (B,) steps each sample runs
        hard = cfg.hint_repred is not RepredMode.SOFT and not (cfg.hint_repred is RepredMode.HARD_ON_EVAL and train)
        reads = proc.decoder_inputs
        read_prev_edge = proc.carry_edge or reads.edge_history
        edge_in_form = (lambda e: e) if proc.factored_edges else (lambda e: e.dense())  # noqa: E731

        base = self.encoders.encode_inputs(batch.inputs, batch.node_mask)
        state = proc.initial_state(B, n, device, base.node.dtype)
        edge0 = state.edge
        hint_preds: dict[str, list[torch.Tensor]] = {f.name: [] for f in self.hint_features} if self.hint_decoders else {}
        prev: dict[str, torch.Tensor] = {}  # last step's raw hint predictions (B, ...), zero for finished samples
        outputs: dict[str, torch.Tensor] = {}
        final_edge = None  # (B, N, N, E) with return_state
        for s in range(S):
            running = steps > s  # (B,) bool
            ending = steps == s + 1  # (B,) bool: this is the sample's last step
            values = self._hint_inputs(batch, s, prev, None, train, hard, stream(noise, Site.TEACHER_FORCING, s))
            feats = self.encoders.encode_step(base, values)
            edge_in = edge_in_form(feats.edge)
            new = State(state.node, state.edge if proc.carry_edge else edge0, state.graph)
            for _ in range(cfg.processor_steps):
                new = self._process(feats.node, edge_in, feats.graph, new, feats.adj, batch.node_mask)
                if new.graph is None:
                    new = replace(new, graph=state.graph)
            if train and cfg.dropout > 0:
                keep = uniform(new.node.shape, device, stream(noise, Site.DROPOUT, s)) >= cfg.dropout
                new = replace(new, node=new.node * keep / (1.0 - cfg.dropout))
            ctx = DecodeContext(
                h=torch.cat([feats.node, state.node, new.node], -1),  # (B, N, H + 2D)
                edge=feats.edge if reads.edge_features else None, edge_state=new.edge if proc.edge_dim else None,
                prev_edge=state.edge if read_prev_edge and proc.edge_dim else None,
                graph=feats.graph, adj=feats.adj, node_mask=batch.node_mask,
                prev_graph=state.graph if reads.graph_history else None,
                graph_state=new.graph if reads.graph_history else None)
            if self.hint_decoders is not None:
                raw = self.hint_decoders(ctx, train, stream(noise, Site.HINT_DECODERS, s))
                prev = {k: _where(running, v, torch.zeros_like(v)) for k, v in raw.items()}
                for k, v in prev.items():
                    hint_preds[k].append(v)
            out = self.output_decoders(ctx, train, stream(noise, Site.OUTPUT_DECODERS, s))
            outputs = {k: _where(ending, v, outputs[k] if k in outputs else torch.zeros_like(v))
                       for k, v in out.items()}
            if return_state and new.edge is not None:
                final_edge = _where(running, new.edge, torch.zeros_like(new.edge) if final_edge is None else final_edge)
            new_edge = new.edge if proc.carry_edge else state.edge
            state = State(_where(running, new.node, state.node), _where(running, new_edge, state.edge),
                          _where(running, new.graph, state.graph))
        hints = {k: torch.stack(v, 1) for k, v in hint_preds.items()}  # (B, S, ...)
        final = State(state.node, final_edge, state.graph) if return_state else None
        return NetOutput(outputs, hints, batch.node_mask, final)

    # -- the sparse form -------------------------------------------------------------------------

    def sparse_graph(self, batch: Batch, return_state: bool = False) -> sp.SparseGraph | None:
        """The edge list this batch runs on under `model.sparse`, or None when it runs dense
        (relreason.models.sparse: `auto` only where sparse computes the dense processor's numbers).

        Raises:
            RelreasonError: `model.sparse: always` where the network or the batch has no sparse form."""
        if not self.sparse_at(batch.n, None, return_state):
            return None
        graph = sp.SparseGraph.from_batch(batch)
        if not self.sparse_at(batch.n, graph.density, return_state):
            return None
        problems = sp.data_problems(self.spec, batch, graph)
        if problems and self.cfg.sparse is SparseMode.ALWAYS:
            raise sp.refuse(problems)
        return None if problems else graph

    def sparse_at(self, nodes: int, density: float | None, return_state: bool = False) -> bool:
        """Whether a batch of `nodes` node slots runs on edge lists under `model.sparse`, before its data
        checks (`sparse_graph`): `density` is the share of its real node pairs that are entries (None: not
        known yet, taken as low enough). Memory estimates ask it of the graphs they expect.

        Raises:
            RelreasonError: `model.sparse: always` where the network has no sparse form."""
        mode = self.cfg.sparse
        if mode is SparseMode.NEVER:
            return False
        proc = self.processor
        problems = sp.static_problems(self.spec, proc, self.cfg.pointer_decoding is PointerDecoding.EDGE, return_state)
        if mode is SparseMode.AUTO:
            return not problems and proc.sparse_form is sp.SparseForm.EXACT and nodes >= sp.AUTO_MIN_NODES \
                and (density is None or density <= sp.AUTO_MAX_DENSITY)
        if problems:
            raise sp.refuse(problems)
        return True

    def _forward_sparse(self, batch: Batch, graph: sp.SparseGraph, train: bool, noise: Noise | None,
                        hard_hints: bool) -> NetOutput:
        """`forward` on the entries of `graph`: every sample runs at every step, a finished sample keeps its
        state (a per-sample mask) and gets zero hint predictions; its outputs come from its own last step."""
        cfg, proc = self.cfg, self.processor
        B, device = batch.size, batch.device
        S = max(1, batch.max_length - 1)
        steps = (batch.lengths - 1).clamp(min=1)  # (B,) steps each sample runs
        hard = cfg.hint_repred is not RepredMode.SOFT and not (cfg.hint_repred is RepredMode.HARD_ON_EVAL and train)
        reads = proc.decoder_inputs
        read_prev_edge = proc.carry_edge or reads.edge_history

        def keep(mask: torch.Tensor, a: torch.Tensor | None, b: torch.Tensor | None, per_entry: bool):
            """Per sample (mask (B,)): a where mask else b; per_entry: a, b are (E, ...)."""
            if a is None:
                return None
            m = mask[graph.entry_graph] if per_entry else mask
            return torch.where(m.view(-1, *([1] * (a.dim() - 1))), a, b)

        base = self.encoders.encode_inputs_sparse(batch.inputs, batch.node_mask, graph)
        state = proc.initial_state_sparse(graph, base.node.dtype)
        edge0 = state.edge
        # hint predictions, each written into one (E, S) or (B, S, ...) buffer made at the first step: on long
        # trajectories (dfs: 3n steps) small per-step tensors between the step's temporaries fragment the heap
        hints: dict[str, torch.Tensor] = {}
        prev: dict[str, torch.Tensor] = {}
        outputs: dict[str, torch.Tensor] = {}
        for s in range(S):
            running = steps > s  # (B,)
            if not bool(running.any()):  # only when hints were padded past every sample's length
                if hard_hints:  # what `predict` makes of the raw buffer's zeros there
                    for k, v in prev.items():
                        _put(hints, k, s, S, self._hard(k, torch.zeros_like(v), batch.node_mask, graph))
                continue
            values = self._hint_inputs_sparse(batch, graph, s, prev, train, hard,
                                              stream(noise, Site.TEACHER_FORCING, s))
            feats = self.encoders.encode_step_sparse(base, values)
            new = State(state.node, state.edge if proc.carry_edge else edge0, state.graph)
            for _ in range(cfg.processor_steps):
                new = proc.forward_sparse(feats.node, feats.edge, feats.graph, new, graph, batch.node_mask)
                if new.graph is None:
                    new = replace(new, graph=state.graph)
            if train and cfg.dropout > 0:
                drop = uniform(new.node.shape, device, stream(noise, Site.DROPOUT, s)) >= cfg.dropout
                new = replace(new, node=new.node * drop / (1.0 - cfg.dropout))
            ctx = DecodeContext(
                h=torch.cat([feats.node, state.node, new.node], -1),  # (B, N, H + 2D)
                edge=feats.edge if reads.edge_features else None, edge_state=new.edge if proc.edge_dim else None,
                prev_edge=state.edge if read_prev_edge and proc.edge_dim else None,
                graph=feats.graph, adj=None, node_mask=batch.node_mask,
                prev_graph=state.graph if reads.graph_history else None,
                graph_state=new.graph if reads.graph_history else None, sparse=graph)
            if self.hint_decoders is not None:
                raw = self.hint_decoders(ctx, train, stream(noise, Site.HINT_DECODERS, s))
                prev = {k: keep(running, v, torch.zeros_like(v), sp.entrywise(self.spec[k])) for k, v in raw.items()}
                for k, v in prev.items():
                    _put(hints, k, s, S, self._hard(k, v, batch.node_mask, graph) if hard_hints else v)
            ending = steps == s + 1
            if bool(ending.any()):
                out = self.output_decoders(ctx, train, stream(noise, Site.OUTPUT_DECODERS, s))
                outputs = {k: keep(ending, v, outputs.get(k, torch.zeros_like(v)), sp.entrywise(self.spec[k]))
                           for k, v in out.items()}
            new_edge = new.edge if proc.carry_edge else state.edge
            state = State(keep(running, new.node, state.node, False), keep(running, new_edge, state.edge, True),
                          keep(running, new.graph, state.graph, False))
        return NetOutput(outputs, hints, batch.node_mask, None, graph, hard_hints)

    def _hint_inputs_sparse(self, batch: Batch, graph: sp.SparseGraph, s: int, prev: dict[str, torch.Tensor],
                            train: bool, hard: bool, generator: Noise | None) -> dict[str, torch.Tensor]:
        """`_hint_inputs` in entry form (relreason.models.encoders.entry_form), for every sample."""
        if not self.cfg.hint_mode.encode:
            return {}
        tf = self.cfg.teacher_forcing

        def truth() -> dict[str, torch.Tensor]:
            return {f.name: entry_form(f, batch.hints[f.name][:, s], graph) for f in self.hint_features}

        if s == 0 or (train and tf >= 1.0):
            return truth()
        scalar_grad = self.cfg.hint_repred is RepredMode.HARD_SCALAR_GRAD
        decoded = {f.name: sp.pointer_feedback(prev[f.name], hard, graph) if sp.entrywise(f)
                   else feedback(f, prev[f.name], hard, batch.node_mask, scalar_grad) for f in self.hint_features}
        if not (train and tf > 0.0):
            return decoded
        force = uniform(batch.size, batch.device, generator) < tf  # (B,)
        gt = truth()
        return {k: _where(force[graph.entry_graph] if sp.entrywise(self.spec[k]) else force, gt[k], v)
                for k, v in decoded.items()}

    def _hint_inputs(self, batch: Batch, s: int, prev: dict[str, torch.Tensor], rows: torch.Tensor | None,
                     train: bool, hard: bool, generator: Noise | None) -> dict[str, torch.Tensor]:
        """The hint values encoded at step s for the running samples `rows` (None: all), model form."""
        if not self.cfg.hint_mode.encode:
            return {}
        n, tf = batch.n, self.cfg.teacher_forcing
        pick = (lambda x: x) if rows is None else (lambda x: x.index_select(0, rows))  # noqa: E731
        node_mask = pick(batch.node_mask)

        def truth() -> dict[str, torch.Tensor]:
            return {f.name: model_form(f, pick(batch.hints[f.name][:, s]), n) for f in self.hint_features}

        if s == 0 or (train and tf >= 1.0):
            return truth()
        scalar_grad = self.cfg.hint_repred is RepredMode.HARD_SCALAR_GRAD
        decoded = {f.name: feedback(f, pick(prev[f.name]), hard, node_mask, scalar_grad) for f in self.hint_features}
        if not (train and tf > 0.0):
            return decoded
        # per sample, as the reference; drawn for the whole batch so a sample's draw does not depend on the others
        force = pick(uniform(batch.size, batch.device, generator) < tf)
        gt = truth()
        return {k: _where(force, gt[k], v) for k, v in decoded.items()}

    # -- loss and predictions ------------------------------------------------------------------

    def loss(self, batch: Batch, out: NetOutput, counts: Callable[[torch.Tensor], torch.Tensor] | None = None,
             read_terms: bool = True) -> tuple[torch.Tensor, dict]:
        """Sum of the output losses and (hints decoded) the hint losses averaged over valid steps.

        `counts` (distributed training) maps this batch's numbers of valid elements, one per term (K,),
        to what each term's summed loss is divided by: the global batch's numbers over the number of
        processes, so the processes' mean loss (and DDP's mean gradient) is the global batch's.
        `read_terms` False: the terms stay 0-d tensors (nothing read back to the host: the shape-static step)."""
        if out.hard_hints:
            raise ValueError("loss reads raw hint predictions; this NetOutput holds hard ones (hard_hints=True)")
        sums: dict[str, torch.Tensor] = {}
        numbers: dict[str, torch.Tensor] = {}
        every = torch.ones(batch.size, dtype=torch.bool, device=batch.device)
        relative = self.cfg.scalar_loss is ScalarLoss.RELATIVE
        graph = out.graph

        def term(f, pred, truth, valid, **kw):
            if graph is not None and sp.entrywise(f):  # per-entry logits, over each node's candidates
                return sp.pointer_loss_sum(pred, truth, element_mask(f, valid, batch.node_mask), graph)
            return feature_loss_sum(f, pred, truth, valid, batch.node_mask, **kw)

        for f in self.output_features:
            k = f"output.{f.name}"
            sums[k], numbers[k] = term(f, out.outputs[f.name], batch.outputs[f.name], every, relative=relative)
        if self.hint_decoders is not None:
            steps = batch.max_length - 1  # hint targets hints[1:]; predictions past them (T = 1) are unused
            valid = batch.lengths[:, None] > torch.arange(1, steps + 1, device=batch.device)[None, :]  # (B, steps)
            for f in self.hint_features:
                k = f"hint.{f.name}"
                sums[k], numbers[k] = term(f, out.hints[f.name][:, :steps], batch.hints[f.name][:, 1:], valid)
        number = torch.stack(list(numbers.values()))  # (K,)
        # a term with no valid element is 0, not NaN (the reference's max(count, eps))
        terms = torch.stack(list(sums.values())) / (number.clamp(min=1) if counts is None else counts(number))
        return terms.sum(), dict(zip(sums, terms.detach().tolist() if read_terms else terms.detach().unbind()))

    def _hard(self, name: str, raw: torch.Tensor, node_mask: torch.Tensor, graph: sp.SparseGraph | None
              ) -> torch.Tensor:
        """Raw predictions of a feature, (B, [S,] ...) or per entry (E, [S]) for a node pointer of the sparse
        form, in the storage convention (relreason.models.decoders.harden; a permutation pointer still unfused)."""
        f = self.spec[name]
        if graph is not None and sp.entrywise(f):
            return sp.pointer_indices(raw, graph)
        return harden(f, raw, node_mask)

    @torch.no_grad()
    def predict(self, out: NetOutput) -> dict[str, torch.Tensor]:
        """Hard predictions in the storage convention, outputs (B, ...) and hints (B, S, ...) by name.

        A permutation pointer comes back fused with its `_mask` into the linear-order pointer the
        dataset stores (first node points to itself); the `_mask` itself is not returned."""
        preds = {name: self._hard(name, raw, out.node_mask, out.graph) for name, raw in out.outputs.items()}
        for name, raw in out.hints.items():
            preds[name] = raw if out.hard_hints else self._hard(name, raw, out.node_mask, out.graph)
        for name in list(preds):
            if permutation_mask_of(self.spec, name):
                base = name[: -len("_mask")]
                preds[base] = fuse_permutation(preds[base], preds.pop(name))
        return preds


def build_model(spec: Spec, model_cfg: ModelConfig, processor_name: str, processor_cfg=None) -> Net:
    """Builds the network for `spec` (original or prepared) with the registered processor `processor_name`.

    `processor_cfg` is an instance of the processor's config dataclass (default: its defaults)."""
    entry = PROCESSORS.get(processor_name)
    if processor_cfg is None:
        processor_cfg = entry.config()
    if not isinstance(processor_cfg, entry.config):
        raise RelreasonError(f"processor {processor_name!r} needs a {entry.config.__name__}, "
                             f"got {type(processor_cfg).__name__}", "build it from the processor: section")
    return Net(spec, model_cfg, entry.build(processor_cfg, model_cfg.hidden))

