"""One processor shared by several algorithms, each with its own encoders and decoders (Ibarz et al. 2022).

    model = MultiNet({"bfs": spec_bfs, "dfs": spec_dfs}, model_cfg, processor)
    out = model("bfs", batch, train=True, generator=g)      # the bfs net's NetOutput
    loss, terms = model.nets["bfs"].loss(batch, out)

The processor is a submodule of the MultiNet (saved once, as `processor.*`); every per-algorithm
`Net` uses it without owning it (`Net(..., shared_processor=True)`), so a gradient step on one
algorithm updates the shared processor and that algorithm's encoders and decoders only.
"""

from __future__ import annotations

from typing import Mapping

from torch import nn

from relreason.data.specs import Spec
from relreason.models.config import ModelConfig
from relreason.models.net import Net, NetOutput
from relreason.models.processors import Processor


class MultiNet(nn.Module):
    def __init__(self, specs: Mapping[str, Spec], cfg: ModelConfig, processor: Processor):
        super().__init__()
        self.processor = processor
        self.nets = nn.ModuleDict({name: Net(spec, cfg, processor, shared_processor=True)
                                   for name, spec in specs.items()})

    def forward(self, task: str, batch, *, train: bool, generator=None) -> NetOutput:
        return self.nets[task](batch, train=train, generator=generator)
