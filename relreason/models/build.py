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

import dataclasses
from dataclasses import dataclass

import torch
from torch import nn

from relreason.data.specs import Spec
from relreason.errors import RelreasonError
from relreason.models.batch import prepare_spec
from relreason.models.multitask import MultiNet
from relreason.models.net import build_model
from relreason.models.processors import PROCESSORS
from relreason import runtime  # runtime.available_memory read on use: the seam tests replace


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
    specs = {t.name: prepare_spec(t.spec, cfg.model, t.algorithm) for t in tasks}

    def build() -> nn.Module:
        if len(tasks) == 1:
            return build_model(specs[tasks[0].name], cfg.model, cfg.model_name, cfg.processor)
        return MultiNet(specs, cfg.model, PROCESSORS.get(cfg.model_name).build(cfg.processor, cfg.model.hidden))

    check_model_memory(cfg, build, device)
    torch.manual_seed(cfg.train.seed)
    return BuiltNar(list(tasks), specs, build().to(device))


# A model's weights, gradients and Adam's two moments: four float32 copies of every parameter
TRAINING_COPIES = 4
PARAMETER_BYTES = 4


def _sizes(cfg) -> list[tuple[str, int]]:
    """("section.key", value) of every integer setting of the model and processor sections."""
    out = []
    for section in ("model", "processor"):
        values = getattr(cfg, section, None)
        fields = dataclasses.asdict(values) if dataclasses.is_dataclass(values) else (values or {})
        out += [(f"{section}.{k}", v) for k, v in fields.items() if type(v) is int]
    return out


def memory_limit(device: torch.device) -> int:
    """Bytes a model may take on `device`: the GPU's free memory, else the memory this process can use."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]

    return runtime.available_memory()


def check_model_memory(cfg, build, device: torch.device, limit: int | None = None) -> None:
    """Refuses a configuration whose model would not fit in memory, before anything is allocated: the
    sizes read from a config (a hub folder's, a checkpoint's) are untrusted, and `model.hidden:
    1000000000` must be one line naming the key, not an allocation that takes the machine down.

    First a bound that costs nothing: each processor layer holds at least one hidden x hidden matrix,
    so `layers x hidden^2` parameters (which also keeps the exact count below from constructing a
    million layers); then the exact count of `build()` on the meta device, which allocates nothing.
    Training keeps TRAINING_COPIES copies of each float32 parameter. Raises RelreasonError."""
    limit = memory_limit(device) if limit is None else limit
    sizes = dict(_sizes(cfg))
    hidden = sizes.get("model.hidden") or sizes.get("model.width") or 1  # a NAR's H, a text model's D
    layers = sizes.get("processor.layers") or sizes.get("model.layers") or 1
    bound = layers * hidden * hidden * PARAMETER_BYTES * TRAINING_COPIES
    if bound <= limit:
        with torch.device("meta"):
            model = build()
        bound = sum(p.numel() for p in model.parameters()) * PARAMETER_BYTES * TRAINING_COPIES
    if bound > limit:
        key, value = max(((k, v) for k, v in sizes.items() if v > 1), key=lambda kv: kv[1], default=("model.hidden",
                                                                                                        hidden))
        raise RelreasonError(f"{key}={value:,} asks for a model of {_gib(bound)} (weights, gradients and Adam's "
                             f"moments), more than the {_gib(limit)} free on {device}",
                             "check the configuration's sizes (model.hidden, processor.layers, heads ...): a "
                             "downloaded or edited config.json may ask for anything")


def _gib(n: int) -> str:
    return f"{n / (1 << 30):,.1f} GiB"
