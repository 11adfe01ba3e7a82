"""The processor seam: the one interface every model (MPNN, RT, ET, DAT, GAT, ...) plugs into.

Per algorithm step the network encodes this step's features into node, edge and graph vectors of
width `hidden` and calls the processor with them and the previous step's state:

    state = processor(node_in, edge_in, graph_in, state, adj, node_mask)
      node_in  (B, N, H)     encoded node features of this step
      edge_in  (B, N, N, H)  encoded edge features (node pointers become edges)
      graph_in (B, H)        encoded graph features
      state    State         the previous step's output (`processor.initial_state(...)` at step 0)
      adj      (B, N, N)     bool adjacency (adj input | encoded pointers | self loops), padded rows False
      node_mask (B, N)       bool, False for padded nodes of variable-size graphs: a processor must
                             never let a padded node influence a real one.
    returns State(node (B, N, D), edge (B, N, N, E) or None, graph (B, D) or None)

The network carries the returned state to the next step (the hidden state MUST be carried: a
processor that ignores `state` silently learns through the predicted hints alone). `edge_dim` is E,
the width of the returned edge state (0 when the processor has none); decoders read it for edge
features and, with `pointer_decoding: edge`, for pointers. `node_dim` is D, the width of the
returned node (and graph) state: `hidden` unless the processor works at its own width (the RT's
12 heads x 16 = 192), in which case it projects its inputs itself; decoders read `node_dim`.
`carry_edge` says whether the edge state is fed back next step (RT, ET) or only read by the decoders
of this step (Triplet-GMPNN's triplet messages).

Each processor registers, beside its class, everything relreason knows about it
(relreason.models.entry): its typed config dataclass, so recipes and `--set` are validated against it
before anything is built, its paper and the recipe of that paper's protocol per task kind:

    @register_processor("mpnn", MPNNConfig, "Message passing over all node pairs, max aggregation",
                        paper="Gilmer et al. 2017")
    class MPNN(Processor): ...

Installed plugins add processors the same way (entry-point group `relreason.processors`, see
relreason.plugins); PROCESSORS loads them when it is first read after the built-ins are registered.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch
from torch import nn

from relreason.errors import RelreasonError
from relreason.models.decoders import DecoderInputs
from relreason.models.entry import ModelEntry
from relreason.models.sparse import SparseForm, SparseGraph
from relreason.registry import Registry


@dataclass
class State:
    node: torch.Tensor  # (B, N, H)
    edge: torch.Tensor | None = None  # (B, N, N, E); in the sparse form (E_entries, E) per entry (forward_sparse)
    graph: torch.Tensor | None = None  # (B, H)


class Processor(nn.Module, abc.ABC):
    """Base class: subclasses set `edge_dim` / `carry_edge` and implement `forward`."""

    edge_dim: int = 0
    carry_edge: bool = False
    # Decoders push node-pointer (inf_bias) and edge (inf_bias_edge) logits outside the adjacency
    # below all others, as the reference does for PGN-masked (the only processor setting them).
    inf_bias: bool = False
    inf_bias_edge: bool = False
    # True: `edge_in` may arrive as a relreason.models.encoders.EdgeInput (raw columns + the encoders'
    # linear map, `.dense()` / `.project(W, b)`), so a first linear layer on it can be folded into
    # the small map instead of running on (B, N, N, H). False (default): always the dense tensor.
    factored_edges: bool = False
    # What the decoders read besides [node features, previous, new node state]
    # (relreason.models.decoders.DecoderInputs); the default is the CLRS reference's decoders.
    decoder_inputs: DecoderInputs = DecoderInputs()
    # What `forward_sparse` computes on edge lists (relreason.models.sparse.SparseForm): NONE (no sparse
    # form), EXACT (the dense numbers) or EDGES (messages along edges where the dense form uses all pairs).
    sparse_form: SparseForm = SparseForm.NONE
    # False where the output depends on the order of the nodes by design (RNAR's LSTM reads them in order):
    # permuting the nodes then need not permute the output.
    permutation_equivariant: bool = True

    def __init__(self, cfg, hidden: int):
        super().__init__()
        self.cfg = cfg
        self.hidden = hidden  # H: width of the encoded inputs
        self.node_dim = hidden  # D: width of the node/graph state it returns (subclasses may change it)

    def initial_state(self, batch: int, n: int, device: torch.device, dtype: torch.dtype = torch.float32) -> State:
        """The state before the first step: zeros, as in the reference."""
        edge = torch.zeros(batch, n, n, self.edge_dim, device=device, dtype=dtype) if self.edge_dim else None
        return State(torch.zeros(batch, n, self.node_dim, device=device, dtype=dtype), edge,
                     torch.zeros(batch, self.node_dim, device=device, dtype=dtype))

    def initial_state_sparse(self, graph: SparseGraph, dtype: torch.dtype = torch.float32) -> State:
        """`initial_state` in the sparse form: the edge state (E, edge_dim) per entry of `graph`."""
        device = graph.device
        edge = torch.zeros(graph.entries, self.edge_dim, device=device, dtype=dtype) if self.edge_dim else None
        return State(torch.zeros(graph.size, graph.n, self.node_dim, device=device, dtype=dtype), edge,
                     torch.zeros(graph.size, self.node_dim, device=device, dtype=dtype))

    def eval_workspace(self) -> int:
        """Bytes of scratch buffers one evaluation forward holds, at most, besides what grows with the graphs
        (the same for any batch): the memory probes (relreason.eval.memory) run the kernels in their smallest
        chunks (relreason.models.kernels.smallest_chunks) and add this as the constant it is. 0: none."""
        return 0

    def forward_sparse(self, node_in: torch.Tensor, edge_in, graph_in: torch.Tensor, state: State,
                       graph: SparseGraph, node_mask: torch.Tensor) -> State:
        """One algorithm step on the entries of `graph` (relreason.models.sparse): node_in (B, N, H),
        edge_in an EdgeInput of raw columns (E, F), graph_in (B, H), state.edge (E, edge_dim) or None.
        Returns the State with its edge state per entry. Implemented where `sparse_form` is not NONE."""
        raise NotImplementedError(f"{type(self).__name__} has no sparse form")

    @abc.abstractmethod
    def forward(self, node_in: torch.Tensor, edge_in: torch.Tensor, graph_in: torch.Tensor, state: State,
                adj: torch.Tensor, node_mask: torch.Tensor) -> State:
        """One algorithm step: the new State (see the module docstring)."""


# -- the contract, checked (relreason.models.net calls `checked_step` on a net's first step) ---------------

def processor_label(proc: Processor) -> str:
    """The processor's registered name (and where a plugin's class lives), for error messages."""
    cls = type(proc)
    names = [name for name, entry in PROCESSORS.items() if entry.cls is cls]
    return f"{names[0]!r}" if names else f"{cls.__module__}.{cls.__qualname__}"


def checked_step(proc: Processor, node_in: torch.Tensor, edge_in, graph_in: torch.Tensor, state: State,
                 adj: torch.Tensor, node_mask: torch.Tensor) -> State:
    """One dense step of `proc`, its returned State checked against what the processor declares (the module
    docstring's contract): a State; node (B, N, node_dim); an edge state exactly when edge_dim > 0, of shape
    (B, N, N, edge_dim); a graph state None or (B, node_dim); floating point throughout. An error raised
    inside the processor's own forward is named as the processor's, with the shapes it was given. Raises
    RelreasonError naming the processor, the field, the shape expected and the shape got."""
    name = processor_label(proc)
    B, N = node_in.shape[0], node_in.shape[1]
    given = (f"given node_in {list(node_in.shape)}, edge_in {list(getattr(edge_in, 'shape', ['factored']))}, "
             f"graph_in {list(graph_in.shape)}, adj {list(adj.shape)}")
    try:
        got = proc(node_in, edge_in, graph_in, state, adj, node_mask)
    except (RuntimeError, ValueError, IndexError, TypeError) as e:
        if isinstance(e, torch.OutOfMemoryError):
            raise
        raise RelreasonError(f"processor {name} failed at its first step ({given}): {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}",
                             "see the processor contract in docs/plugins.md (inputs, State and shapes)") from e
    hint = ("return State(node=(B, N, node_dim), edge=(B, N, N, edge_dim) or None, graph=(B, node_dim) or None) "
            "as docs/plugins.md states")
    if not isinstance(got, State):
        raise RelreasonError(f"processor {name} returned {type(got).__name__}, not a State", hint)

    def check(field: str, value, want: tuple[int, ...], legend: str) -> None:
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            raise RelreasonError(f"processor {name}: state.{field} is {type(value).__name__}"
                                 f"{'' if not isinstance(value, torch.Tensor) else f' of {value.dtype}'}, expected "
                                 f"a floating-point tensor of shape {list(want)} ({legend})", hint)
        if tuple(value.shape) != want:
            raise RelreasonError(f"processor {name}: state.{field} has shape {list(value.shape)}, expected "
                                 f"{list(want)} ({legend})", hint)

    check("node", got.node, (B, N, proc.node_dim), f"B, N, node_dim = {proc.node_dim}")
    if got.edge is not None and not proc.edge_dim:
        raise RelreasonError(f"processor {name} returned an edge state but declares edge_dim = 0, so no decoder and "
                             f"no later step would ever read it",
                             "set edge_dim to its width (and carry_edge = True to feed it back at the next step), "
                             "or return edge=None")
    if proc.edge_dim:
        if got.edge is None:
            raise RelreasonError(f"processor {name} declares edge_dim = {proc.edge_dim} but returned no edge state",
                                 "return State(edge=(B, N, N, edge_dim)), or set edge_dim = 0")
        check("edge", got.edge, (B, N, N, proc.edge_dim), f"B, N, N, edge_dim = {proc.edge_dim}")
    if got.graph is not None:
        check("graph", got.graph, (B, proc.node_dim), f"B, node_dim = {proc.node_dim}")
    return got


@dataclass(frozen=True)
class ProcessorEntry(ModelEntry):
    """A NAR model: a processor inside the encode-process-decode network."""

    # `model:` options this processor's paper sets differently from the CLRS defaults (e.g. the RT
    # decodes pointers from edges); applied before any recipe, so every recipe starts from them.
    model_defaults: Mapping[str, object] = field(default_factory=dict)

    def build(self, cfg, hidden: int) -> Processor:
        return self.cls(cfg, hidden)


PROCESSORS: Registry[ProcessorEntry] = Registry("model", "relreason list models")


def register_processor(name: str, config: type, description: str, *, paper: str = "",
                       recipes: Mapping[str, str] | None = None, model_defaults: Mapping[str, object] | None = None
                       ) -> Callable[[type[Processor]], type[Processor]]:
    """A class decorator registering a processor and its facts (see relreason.models.entry.ModelEntry).

    Args:
        config: its config dataclass (the `processor:` section), defaults from its paper.
        description: one line saying what it is; `paper` is its citation ("Gilmer et al. 2017").
        recipes: task kind -> the recipe of its paper's protocol ({"clrs": "rt", "lobster": "lobster_rt"}).
        model_defaults: `model:` options its paper sets unlike the CLRS defaults.
    """

    def add(cls: type[Processor]) -> type[Processor]:
        PROCESSORS.register(name, ProcessorEntry(name, cls, config, description, paper, dict(recipes or {}),
                                                 dict(model_defaults or {})))
        return cls

    return add


def check_config(cfg, minimums: Mapping[str, int], dropout: bool = False) -> None:
    """Raises one RelreasonError naming every option of a processor config below its minimum
    (and `dropout` outside [0, 1) when asked): the shared range check of the config dataclasses."""
    bad = [f"processor.{name}={getattr(cfg, name)} (must be >= {low})" for name, low in minimums.items()
           if getattr(cfg, name) < low]
    if dropout and not 0.0 <= cfg.dropout < 1.0:
        bad.append(f"processor.dropout={cfg.dropout} (must be in [0, 1))")
    if bad:
        raise RelreasonError("invalid processor options: " + ", ".join(bad), "the papers' values are the defaults")


def masked_fill_value(x: torch.Tensor) -> float:
    """A large negative number safe for masking logits / max-aggregation in x's dtype."""
    return torch.finfo(x.dtype).min / 2
