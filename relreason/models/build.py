"""Building a configured model: the same code path in training, evaluation, ablations and TransNAR.

    device = resolve_device("auto")
    built = build_nar(cfg, task_entries(cfg.task), device)   # NAR models on graph tasks
    built.model, built.specs["bellman_ford"], built.tasks

A single task gives a plain `Net`; several tasks (`core8`, `bfs,dfs`) give a `MultiNet` with one
shared processor. Initialisation is seeded by `train.seed`, so the same config gives the same
initial weights.

The model layer reads neither the run configuration's module nor the task registry (both stand
above it): the caller hands over the resolved config and its task entries (relreason.tasks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from relreason.data.specs import Spec
from relreason.errors import RelreasonError


def resolve_device(name: str) -> torch.device:
    """`auto` (CUDA when present, else CPU), `cpu`, `cuda` or `cuda:N`, checked to exist."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RelreasonError(f"device {name!r} requested but CUDA is not available", "use --device cpu or auto")
        index = torch.device(name).index
        if index is not None and index >= torch.cuda.device_count():
            raise RelreasonError(f"device {name!r} does not exist ({torch.cuda.device_count()} CUDA devices)",
                                 "use cuda:0 .. cuda:N-1, or auto")
    elif name != "cpu":
        raise RelreasonError(f"unknown device {name!r}", "use auto, cpu, cuda or cuda:N")
    return torch.device(name)


@dataclass
class BuiltNar:
    tasks: list  # the task entries (relreason.tasks.Task), in training order
    specs: dict[str, Spec]  # task name -> the prepared spec its net trains on
    model: nn.Module  # Net (one task) or MultiNet

    @property
    def multi(self) -> bool:
        return len(self.tasks) > 1

    def net(self, task: str) -> nn.Module:
        """The Net of one task (the model itself for a single task)."""
        return self.model.nets[task] if self.multi else self.model


def build_nar(cfg, tasks: list, device: torch.device) -> BuiltNar:
    """The tasks, prepared specs and model (Net or MultiNet) of a NAR config, on `device`.

    Args:
        cfg: a resolved NAR config (relreason.config.Config): model_name, model, processor, train.seed.
        tasks: its task entries in training order (`relreason.tasks.task_entries(cfg.task)`), each with
            a name, a graph spec and the CLRS algorithm behind it.
    """
    from relreason.models.batch import prepare_spec
    from relreason.models.multitask import MultiNet
    from relreason.models.net import build_model
    from relreason.models.processors import PROCESSORS

    specs = {t.name: prepare_spec(t.spec, cfg.model, t.algorithm) for t in tasks}
    torch.manual_seed(cfg.train.seed)
    if len(tasks) == 1:
        model = build_model(specs[tasks[0].name], cfg.model, cfg.model_name, cfg.processor)
    else:
        processor = PROCESSORS.get(cfg.model_name).build(cfg.processor, cfg.model.hidden)
        model = MultiNet(specs, cfg.model, processor)
    return BuiltNar(list(tasks), specs, model.to(device))
