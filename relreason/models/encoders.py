"""Encoders: one linear map per input/hint feature into the hidden width H, summed per location.

Dispatch is on (location, type) only, as in the reference (google-deepmind/clrs `encoders.py`):
- node scalar / mask / mask_one -> node features (one column), node categorical -> node (C columns);
- node pointers (and permutation pointers) -> their one-hot [N, N] rows become an edge column, and
  the pointer (symmetrized, > 0.5) is added to the adjacency;
- edge scalar / mask -> edge column (edge masks are added to the adjacency), edge categorical -> C
  columns; edge pointers get two maps, applied to the one-hot [N, N, N] averaged over the first and
  over the second edge axis;
- graph scalar / mask -> graph (one column), graph categorical -> graph (C columns), graph pointer ->
  its one-hot over nodes becomes a node column.

Because every encoder is linear, the sum over features equals one matmul of the concatenated feature
columns with the concatenated weights. Each feature still owns its parameters (`weight[name]`
(columns, H), `bias[name]` (maps, H)), initialised as the reference does; only the arithmetic is
fused. Edge features are kept *factored* (`EdgeInput`: raw columns (B, N, N, F) and the (F, H) map),
so a layer applied to them afterwards can be folded into the small map instead of running on the
dense (B, N, N, H) tensor; `EdgeInput.dense()` gives the dense features when a consumer needs them.

With `edge_features=False` (a processor that reads no edge features, the RT paper's standard
transformer) nothing is encoded into edges: edge features and node pointers get no encoder and no
columns (the EdgeInput has width-0 columns), and only still shape the adjacency.

The sparse form (`encode_inputs_sparse` / `encode_step_sparse`, relreason.models.sparse) encodes the
same columns with the same weights, edge-located columns per entry of a SparseGraph ((E, F) instead
of (B, N, N, F)); values arrive in `entry_form` (node pointers per entry). The
adjacency is the graph's entry set itself, so nothing shapes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from relreason.data.specs import Feature, Location, Spec, Stage, Type
from relreason.models.config import EncoderInit
from relreason.models.sparse import SparseGraph, entrywise

# (location, type) pairs the encoders, decoders and losses implement (all that CLRS-30 uses, plus graph pointers).
SUPPORTED = frozenset({
    (Location.NODE, Type.SCALAR), (Location.NODE, Type.MASK), (Location.NODE, Type.MASK_ONE),
    (Location.NODE, Type.CATEGORICAL), (Location.NODE, Type.POINTER), (Location.NODE, Type.PERMUTATION_POINTER),
    (Location.EDGE, Type.SCALAR), (Location.EDGE, Type.MASK), (Location.EDGE, Type.CATEGORICAL),
    (Location.EDGE, Type.POINTER),
    (Location.GRAPH, Type.SCALAR), (Location.GRAPH, Type.MASK), (Location.GRAPH, Type.CATEGORICAL),
    (Location.GRAPH, Type.POINTER),
})
PTR = (Type.POINTER, Type.PERMUTATION_POINTER)


def linear(fan_in: int, fan_out: int, bias: bool = True) -> nn.Linear:
    """nn.Linear with the reference's (Haiku) initialisation: truncated normal (2 std), std 1/sqrt(fan_in), zero bias."""
    layer = nn.Linear(fan_in, fan_out, bias=bias)
    std = 1.0 / math.sqrt(fan_in)
    nn.init.trunc_normal_(layer.weight, std=std, a=-2 * std, b=2 * std)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


def check_supported(f: Feature) -> None:
    if (f.location, f.type) not in SUPPORTED:
        raise ValueError(f"feature {f.name}: {f.location.value} {f.type.value} is not supported by the model "
                         "(should_be_permutation must go through prepare_spec first)")


def one_hot(index: torch.Tensor, n: int) -> torch.Tensor:
    """Float one-hot over a new last axis; negative (masked) indices give all-zero rows."""
    return (index.unsqueeze(-1) == torch.arange(n, device=index.device)).float()


def model_form(f: Feature, value: torch.Tensor, n: int) -> torch.Tensor:
    """A Batch tensor in the form the encoders read: pointers one-hot over nodes, the rest float."""
    return one_hot(value, n) if f.type in PTR else value.float()


def entry_form(f: Feature, value: torch.Tensor, graph: SparseGraph) -> torch.Tensor:
    """A Batch value in the form the sparse encoders read (relreason.models.sparse): node pointers per
    entry (E,), edge features gathered per entry (E, ...), everything else as `model_form`."""
    if entrywise(f):
        return graph.pointer_values(value)
    if f.location is Location.EDGE:
        return graph.gather(value.float())
    return model_form(f, value, graph.n)


@dataclass
class EdgeInput:
    """Edge features in factored form: dense = raw @ weight + bias.

    raw (B, N, N, F) feature columns, weight (F, H), bias (H,). Consumers that apply a linear layer
    to the edge features use `project`, which costs B*N*N*F*K instead of B*N*N*H*K when F < H."""

    raw: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor

    @property
    def width(self) -> int:
        return int(self.weight.shape[1])

    def dense(self) -> torch.Tensor:
        """(B, N, N, H)"""
        lead = self.raw.shape[:-1]
        return torch.addmm(self.bias, self.raw.reshape(math.prod(lead), self.raw.shape[-1]), self.weight).view(*lead, -1)

    def project(self, weight: torch.Tensor, bias: torch.Tensor | None = None,
                add: torch.Tensor | None = None) -> torch.Tensor:
        """Equals `dense() @ weight.T + bias + add` for a (K, H) weight (nn.Linear layout): (B, N, N, K).

        `add` is broadcastable to the result, e.g. per-node terms (B, 1, N, K)."""
        lead = self.raw.shape[:-1]
        K = weight.shape[0]
        if self.raw.shape[-1] >= self.width:  # folding would not save work
            out = torch.matmul(self.dense(), weight.t())
            out = out if bias is None else out + bias
            return out if add is None else out + add
        w = self.weight @ weight.t()  # (F, K)
        b = self.bias @ weight.t()  # (K,)
        if bias is not None:
            b = b + bias
        out = torch.addmm(b, self.raw.reshape(math.prod(lead), self.raw.shape[-1]), w).view(*lead, K)
        return out if add is None else out + add


@dataclass
class StepFeatures:
    """The encoded features of one algorithm step."""

    node: torch.Tensor  # (B, N, H)
    edge: EdgeInput  # factored (B, N, N, H); sparse form: (E, H) per entry
    graph: torch.Tensor  # (B, H)
    adj: torch.Tensor | None  # (B, N, N) bool: adjacency | pointers | self loops, padded rows/cols False; sparse: None


@dataclass
class _Slot:
    """Where one feature's columns go."""

    feature: Feature
    target: Location  # the location its encoding is added to
    columns: int  # width of its column block
    maps: int  # number of linear maps (bias rows): 2 for edge pointers


def _slot(f: Feature) -> _Slot:
    check_supported(f)
    width = f.num_classes if f.type is Type.CATEGORICAL else 1
    if f.location is Location.NODE:
        return _Slot(f, Location.EDGE if f.type in PTR else Location.NODE, width, 1)
    if f.location is Location.EDGE:
        return _Slot(f, Location.EDGE, 2 if f.type is Type.POINTER else width, 2 if f.type is Type.POINTER else 1)
    return _Slot(f, Location.NODE if f.type is Type.POINTER else Location.GRAPH, width, 1)


class Encoders(nn.Module):
    """Encodes inputs once per forward and hints once per step; see the module docstring."""

    def __init__(self, spec: Spec, hidden: int, encode_hints: bool, init: EncoderInit, edge_features: bool = True):
        super().__init__()
        self.hidden = hidden
        self.edge_features = edge_features
        stages = (Stage.INPUT, Stage.HINT) if encode_hints else (Stage.INPUT,)
        self.slots: dict[Stage, list[_Slot]] = {s: [_slot(f) for f in spec.values() if f.stage is s] for s in stages}
        if Stage.HINT not in self.slots:
            self.slots[Stage.HINT] = []
        self.weight = nn.ParameterDict()
        self.bias = nn.ParameterDict()
        for slots in self.slots.values():
            for s in filter(self._encodes, slots):
                w = torch.empty(s.columns, hidden)
                # Haiku Linear default: truncated normal (2 std), std = 1/sqrt(fan_in); fan_in is the
                # feature's own width (1, or C for categoricals). xavier_on_scalars: hint scalars 1/sqrt(H).
                fan_in = s.feature.num_classes if s.feature.type is Type.CATEGORICAL else 1
                std = 1.0 / math.sqrt(fan_in)
                if (init is EncoderInit.XAVIER_ON_SCALARS and s.feature.stage is Stage.HINT
                        and s.feature.type is Type.SCALAR):
                    std = 1.0 / math.sqrt(hidden)
                nn.init.trunc_normal_(w, std=std, a=-2 * std, b=2 * std)
                self.weight[s.feature.name] = nn.Parameter(w)
                self.bias[s.feature.name] = nn.Parameter(torch.zeros(s.maps, hidden))

    # -- helpers -------------------------------------------------------------------------------

    def _encodes(self, s: _Slot) -> bool:
        """Whether the slot's feature is encoded (else it only shapes the adjacency)."""
        return self.edge_features or s.target is not Location.EDGE

    def _weights(self, stage: Stage, target: Location) -> torch.Tensor:
        ws = [self.weight[s.feature.name] for s in self.slots[stage] if s.target is target and self._encodes(s)]
        if not ws:
            return self._anchor().new_zeros(0, self.hidden)
        return torch.cat(ws, 0)

    def _anchor(self) -> torch.Tensor:
        """Any parameter, for the device and dtype of empty blocks (every algorithm has the input `pos`)."""
        return next(iter(self.bias.values()))

    def _bias(self, target: Location) -> torch.Tensor:
        bs = [self.bias[s.feature.name].sum(0) for slots in self.slots.values() for s in slots
              if s.target is target and self._encodes(s)]
        return torch.stack(bs).sum(0) if bs else self._anchor().new_zeros(self.hidden)

    @staticmethod
    def _columns(s: _Slot, v: torch.Tensor, node_mask: torch.Tensor, n_real: torch.Tensor) -> torch.Tensor:
        """A feature value in model form -> its column block at its target location."""
        f = s.feature
        if f.type is Type.CATEGORICAL:
            return v
        if f.location is Location.EDGE and f.type is Type.POINTER:
            # v (B, N, N, N) over (i, j, k). Reference: mean_i enc0(v)[.., j, k] + mean_j enc1(v)[i, .., k];
            # averaged over real nodes only so padding changes nothing.
            pair = (node_mask[:, :, None] & node_mask[:, None, :])[..., None]  # (B, N, N, 1)
            v = torch.where(pair, v, 0.0)
            denom = n_real[:, None, None]
            return torch.stack([v.sum(1) / denom, v.sum(2) / denom], -1)  # (B, N, N, 2)
        return v.unsqueeze(-1)

    @staticmethod
    def _adjacency(s: _Slot, v: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        f = s.feature
        if f.location is Location.NODE and f.type in PTR:
            return adj | ((v + v.transpose(-1, -2)) > 0.5)
        if f.location is Location.EDGE and f.type is Type.MASK:
            return adj | ((v + v.transpose(-1, -2)) > 0.0)
        return adj

    def _encode(self, stage: Stage, values: dict[str, torch.Tensor], node_mask: torch.Tensor,
                adj: torch.Tensor) -> tuple[dict[Location, torch.Tensor | None], torch.Tensor]:
        """Columns per target location for one stage's values (model form), and the updated adjacency."""
        dtype = self._anchor().dtype
        n_real = node_mask.sum(1).clamp(min=1).to(dtype)
        cols: dict[Location, list[torch.Tensor]] = {loc: [] for loc in Location}
        for s in self.slots[stage]:
            v = values[s.feature.name].to(dtype)
            if self._encodes(s):
                cols[s.target].append(self._columns(s, v, node_mask, n_real))
            adj = self._adjacency(s, v, adj)
        out = {loc: (torch.cat(c, -1) if c else None) for loc, c in cols.items()}
        return out, adj

    # -- public --------------------------------------------------------------------------------

    def encode_inputs(self, inputs: dict[str, torch.Tensor], node_mask: torch.Tensor) -> "EncodedInputs":
        """Encodes the (time-constant) inputs once per forward pass. `inputs` in Batch form."""
        B, n = node_mask.shape
        spec_of = {s.feature.name: s.feature for s in self.slots[Stage.INPUT]}
        values = {k: model_form(spec_of[k], v, n) for k, v in inputs.items() if k in spec_of}
        eye = torch.eye(n, dtype=torch.bool, device=node_mask.device).expand(B, n, n)
        cols, adj = self._encode(Stage.INPUT, values, node_mask, eye)
        adj = adj & node_mask[:, :, None] & node_mask[:, None, :]  # padded rows and columns never adjacent
        node = self._dense(cols[Location.NODE], self._weights(Stage.INPUT, Location.NODE), (B, n))
        graph = self._dense(cols[Location.GRAPH], self._weights(Stage.INPUT, Location.GRAPH), (B,))
        edge_cols = cols[Location.EDGE]
        if edge_cols is None:
            edge_cols = self._anchor().new_zeros(B, n, n, 0)
        # parameters gathered once per forward pass, reused by every step
        hint_w = {loc: self._weights(Stage.HINT, loc) for loc in Location}
        edge_w = torch.cat([self._weights(Stage.INPUT, Location.EDGE), hint_w[Location.EDGE]], 0)
        return EncodedInputs(node + self._bias(Location.NODE), edge_cols, graph + self._bias(Location.GRAPH),
                             adj, node_mask, hint_w, edge_w, self._bias(Location.EDGE))

    def _encode_sparse(self, stage: Stage, values: dict[str, torch.Tensor], node_mask: torch.Tensor
                       ) -> dict[Location, torch.Tensor | None]:
        """`_encode` on values in entry form: edge-located columns (E, F), node (B, N, F), graph (B, F)."""
        dtype = self._anchor().dtype
        n_real = node_mask.sum(1).clamp(min=1).to(dtype)
        cols: dict[Location, list[torch.Tensor]] = {loc: [] for loc in Location}
        for s in filter(self._encodes, self.slots[stage]):
            cols[s.target].append(self._columns(s, values[s.feature.name].to(dtype), node_mask, n_real))
        return {loc: (torch.cat(c, -1) if c else None) for loc, c in cols.items()}

    def encode_inputs_sparse(self, inputs: dict[str, torch.Tensor], node_mask: torch.Tensor,
                             graph: SparseGraph) -> "EncodedInputs":
        """`encode_inputs` on the entries of `graph` (a relreason.models.sparse.SparseGraph); `inputs`
        in Batch form. Its `edge_cols` are (E, F_in) and its `adj` None."""
        B, n = node_mask.shape
        spec_of = {s.feature.name: s.feature for s in self.slots[Stage.INPUT]}
        values = {k: entry_form(spec_of[k], v, graph) for k, v in inputs.items() if k in spec_of}
        cols = self._encode_sparse(Stage.INPUT, values, node_mask)
        node = self._dense(cols[Location.NODE], self._weights(Stage.INPUT, Location.NODE), (B, n))
        graph_feats = self._dense(cols[Location.GRAPH], self._weights(Stage.INPUT, Location.GRAPH), (B,))
        edge_cols = cols[Location.EDGE]
        if edge_cols is None:
            edge_cols = self._anchor().new_zeros(graph.entries, 0)
        hint_w = {loc: self._weights(Stage.HINT, loc) for loc in Location}
        edge_w = torch.cat([self._weights(Stage.INPUT, Location.EDGE), hint_w[Location.EDGE]], 0)
        return EncodedInputs(node + self._bias(Location.NODE), edge_cols, graph_feats + self._bias(Location.GRAPH),
                             None, node_mask, hint_w, edge_w, self._bias(Location.EDGE))

    def encode_step_sparse(self, base: "EncodedInputs", hints: dict[str, torch.Tensor]) -> StepFeatures:
        """`encode_step` in the sparse form: hint values in entry form; the edges an EdgeInput over (E, F)."""
        if not self.slots[Stage.HINT]:
            return _with_hints(base, None, None)
        return _with_hints(base, self._encode_sparse(Stage.HINT, hints, base.node_mask), None)

    def _dense(self, cols: torch.Tensor | None, w: torch.Tensor, lead: tuple[int, ...]) -> torch.Tensor:
        if cols is None:
            return w.new_zeros(*lead, self.hidden)
        return torch.matmul(cols, w)

    def encode_step(self, base: "EncodedInputs", hints: dict[str, torch.Tensor]) -> StepFeatures:
        """Adds this step's hint values (model form; empty when hints are not encoded) to the inputs."""
        if not self.slots[Stage.HINT]:
            return _with_hints(base, None, base.adj)
        cols, hint_adj = self._encode(Stage.HINT, hints, base.node_mask, base.adj)
        return _with_hints(base, cols, hint_adj & base.node_mask[:, :, None] & base.node_mask[:, None, :])


def _with_hints(base: "EncodedInputs", cols: dict | None, adj) -> StepFeatures:
    """A step's features: the inputs plus the hint columns `cols` (per location; None: no hints) through
    the hint weights; edge columns are appended for the edge projection. Dense and sparse alike."""
    node, graph, edge_cols = base.node, base.graph, base.edge_cols
    if cols is not None:
        if cols[Location.NODE] is not None:
            node = node + torch.matmul(cols[Location.NODE], base.hint_w[Location.NODE])
        if cols[Location.GRAPH] is not None:
            graph = graph + torch.matmul(cols[Location.GRAPH], base.hint_w[Location.GRAPH])
        if cols[Location.EDGE] is not None:
            edge_cols = torch.cat([edge_cols, cols[Location.EDGE]], -1)
    return StepFeatures(node, EdgeInput(edge_cols, base.edge_w, base.edge_b), graph, adj)


@dataclass
class EncodedInputs:
    """The input part of every step's features, computed once per forward pass."""

    node: torch.Tensor  # (B, N, H), biases of all node-located encoders included
    edge_cols: torch.Tensor  # (B, N, N, F_in) raw edge columns of the inputs; sparse form: (E, F_in)
    graph: torch.Tensor  # (B, H), biases included
    adj: torch.Tensor | None  # (B, N, N) bool, padded rows/cols False; sparse form: None
    node_mask: torch.Tensor  # (B, N) bool
    hint_w: dict[Location, torch.Tensor]  # (F_hint at that location, H) hint encoder weights
    edge_w: torch.Tensor  # (F_in + F_hint edge columns, H)
    edge_b: torch.Tensor  # (H,) sum of all edge-located encoder biases

    def select(self, rows: torch.Tensor) -> "EncodedInputs":
        """The samples `rows` only."""
        pick = lambda x: x.index_select(0, rows)  # noqa: E731
        return EncodedInputs(pick(self.node), pick(self.edge_cols), pick(self.graph), pick(self.adj),
                             pick(self.node_mask), self.hint_w, self.edge_w, self.edge_b)
