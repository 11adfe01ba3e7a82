"""TransNAR (`TransNARWorkload`): the text transformer reading a frozen NAR run on the graph form of the same examples.

The NAR recorded in `model.nar_config` is rebuilt from its config (`build_nar`), loaded from its
checkpoint, frozen (requires_grad False, eval mode, run under no_grad) and attached to the model as
`nar` (`FrozenNar`: its weights are saved under `nar.` with every checkpoint, so evaluation needs no
NAR run). For each batch it runs on the graph form of the same examples, graphs of different sizes
padded to the largest (`Batch.pad_nodes`, a node mask), one call per algorithm; its final node and
edge states are what every Eq. 3 block reads. The NAR must know every algorithm of the run (a group
needs a multi-task NAR run, e.g. `relreason train triplet_gmpnn clrs30`): otherwise building the
workload fails naming the algorithms it lacks.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from relreason.config import config_from_dict
from relreason.errors import RelreasonError
from relreason.models.batch import Batch
from relreason.models.build import build_nar
from relreason.models.text import TextTransformer, TransNAR
from relreason.protocol import run_identity
from relreason.rundir import CHECKPOINT_CONFIG
from relreason.tasks import task_entries
from relreason.train import checkpoint as ckpt
from relreason.train.text.examples import Rendered
from relreason.train.text.workload import TextWorkload


class FrozenNar(nn.Module):
    """A trained NAR (Net or MultiNet), frozen: no gradients, always in eval mode. Its submodules are
    registered under their own names, so `nar.<key>` in a TransNAR checkpoint is the NAR's `<key>`."""

    def __init__(self, net: nn.Module):
        super().__init__()
        for name, child in net.named_children():
            self.add_module(name, child)
        self.__dict__["net"] = net  # called through; its modules are registered above, not twice
        for p in self.parameters():
            p.requires_grad_(False)
        self.train(False)

    def train(self, mode: bool = True) -> "FrozenNar":
        return super().train(False)


def concat_batches(batches: list) -> object:
    """Batches of one spec and node count, concatenated; hints zero-padded in time to the longest."""
    if len(batches) == 1:
        return batches[0]
    t = max(b.max_length for b in batches)

    def pad_time(x: torch.Tensor) -> torch.Tensor:
        extra = t - x.shape[1]
        return x if extra == 0 else torch.cat([x, x.new_zeros((x.shape[0], extra) + tuple(x.shape[2:]))], 1)

    def cat(name: str, pad=lambda x: x) -> dict[str, torch.Tensor]:
        return {k: torch.cat([pad(getattr(b, name)[k]) for b in batches]) for k in getattr(batches[0], name)}

    return replace(batches[0], inputs=cat("inputs"), hints=cat("hints", pad_time), outputs=cat("outputs"),
                   lengths=torch.cat([b.lengths for b in batches]), node_mask=torch.cat([b.node_mask for b in batches]))


def nar_checkpoint_matches(nar_config: dict) -> bool:
    """Whether the NAR checkpoint a TransNAR recorded (model.nar_config) is here and holds what the recorded
    config computes (relreason.protocol.run_identity: where and how it ran aside, e.g. a NAR captured as CUDA
    graphs on a GPU), so that its weights are the ones the record speaks of."""
    source = Path(nar_config["checkpoint"])
    return (source / CHECKPOINT_CONFIG).is_file() and \
        run_identity(ckpt.read_checkpoint_meta(source)["config"]) == run_identity(nar_config["config"])


class TransNARWorkload(TextWorkload):
    """TransNAR: the text transformer reading a frozen NAR run on the graph form of the same examples."""

    def _prepare(self) -> None:
        m = self.cfg.model
        self.nar_built, self.nar_loaded = None, False
        if not m.use_nar:
            return
        if m.nar_config is None:
            raise RelreasonError("transnar needs a trained NAR: model.nar is not set",
                                 "e.g. --set model.nar=runs/NAME (a triplet_gmpnn run on the same algorithms)")
        nar_cfg = config_from_dict(m.nar_config["config"])
        built = build_nar(nar_cfg, task_entries(nar_cfg.task), self.device)
        by_algorithm = {t.algorithm: t.name for t in built.tasks if t.kind == "clrs"}
        missing = [a for a in self.algorithms if a not in by_algorithm]
        if missing:
            raise RelreasonError(f"the NAR {m.nar} was trained on {nar_cfg.task}, not on {', '.join(missing)} "
                                 f"({len(missing)} of the {len(self.algorithms)} algorithms of {self.cfg.task})",
                                 "one TransNAR reads one NAR for all its algorithms: train it on all of them, e.g. "
                                 "relreason train triplet_gmpnn clrs30 --name nar")
        processor = built.model.processor
        if processor.edge_dim == 0 and not m.nodes_only:
            raise RelreasonError(f"the NAR {m.nar} ({nar_cfg.model_name}) has no edge state to cross-attend to",
                                 "set model.nodes_only=true, or use a NAR with edge embeddings (triplet_gmpnn, rt, et)")
        # The NAR's own checkpoint, when it is still the one recorded (training); evaluation and resuming
        # load the copy under `nar.` in this run's checkpoints over whatever is loaded here.
        self.nar_loaded = nar_checkpoint_matches(m.nar_config)
        if self.nar_loaded:
            ckpt.load_weights(Path(m.nar_config["checkpoint"]), built.model)
        self.nar_built = built
        self.nar_model_cfg = nar_cfg.model
        self.nar_tasks = by_algorithm
        self.node_dim, self.edge_dim = processor.node_dim, processor.edge_dim

    def fresh_start_problem(self) -> str | None:
        """A new run needs the NAR's weights from its recorded checkpoint (model.nar_config): without them the
        NAR would be the random one `build_nar` made."""
        if self.nar_built is None or self.nar_loaded:
            return None
        source = self.cfg.model.nar_config["checkpoint"]
        why = "is gone" if not (Path(source) / CHECKPOINT_CONFIG).is_file() else \
            "holds another configuration than model.nar_config records"
        return f"the NAR checkpoint {source} that model.nar={self.cfg.model.nar} recorded {why}: this run would train on a random NAR"

    def _build_model(self) -> nn.Module:
        m = self.cfg.model
        if self.nar_built is None:  # use_nar false: the text transformer alone, initialised identically
            return TextTransformer(m.text_config())
        model = TransNAR(m.text_config(), m.cross_config(self.node_dim, max(self.edge_dim, 1)))
        model.add_module("nar", FrozenNar(self.nar_built.model))
        return model

    @torch.no_grad()
    def _inputs(self, batch: Rendered) -> dict:
        if self.nar_built is None:
            return {}
        return self.nar_embeddings(batch)

    @torch.no_grad()
    def nar_embeddings(self, batch: Rendered, pad_to: int | None = None) -> dict:
        """The frozen NAR's final node (B, N, Dn) and edge (B, N, N, De) states on the batch's graph form,
        graphs padded to the largest (or `pad_to`) nodes, and the node mask (B, N)."""
        b = len(batch)
        n = max(max(p.dataset.n for p in batch.graphs), pad_to or 0)
        nodes = torch.zeros(b, n, self.node_dim, device=self.device)
        edges = None if self.cfg.model.nodes_only else torch.zeros(b, n, n, self.edge_dim, device=self.device)
        node_mask = torch.zeros(b, n, dtype=torch.bool, device=self.device)
        for i in sorted({p.task_index for p in batch.graphs}):
            task = self.nar_tasks[self.algorithms[i]]
            spec = self.nar_built.specs[task]
            parts = [p for p in batch.graphs if p.task_index == i]
            graphs = concat_batches([Batch.from_dataset(p.dataset, self.nar_model_cfg, spec, self.device).pad_nodes(n)
                                     for p in parts])
            rows = torch.as_tensor(np.concatenate([p.rows for p in parts]), device=self.device)
            state = self.nar_built.net(task)(graphs, train=False, return_state=True).state
            nodes[rows] = state.node
            node_mask[rows] = graphs.node_mask
            if edges is not None:
                edges[rows] = state.edge
        return {"nodes": nodes, "edges": edges, "node_mask": node_mask}
