"""The model: encode-process-decode over CLRS hint steps, with pluggable processors.

    from relreason.models import Batch, ModelConfig, build_model, prepare_spec
    spec = prepare_spec(ds.spec, cfg, ds.algorithm)
    net = build_model(spec, cfg, "mpnn")
    out = net(Batch.from_dataset(ds, cfg, spec), train=False)
"""

from relreason.models.batch import Batch, prepare_spec
from relreason.models.config import EncoderInit, HintMode, ModelConfig, PointerDecoding, RepredMode
from relreason.models.net import Net, NetOutput, build_model
from relreason.models.processors import PROCESSORS

__all__ = ["PROCESSORS", "Batch", "EncoderInit", "HintMode", "ModelConfig", "Net", "NetOutput", "PointerDecoding",
           "RepredMode", "build_model", "prepare_spec"]
