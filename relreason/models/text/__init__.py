"""Text models for CLRS-Text: the character tokenizer, a decoder-only transformer with randomized
positional encodings, and TransNAR (the same transformer cross-attending to a frozen NAR's embeddings).

    from relreason.models.text import CharTokenizer, TextTransformer, TextTransformerConfig, TEXT_SHAPES
    model = TextTransformer(TextTransformerConfig(**TEXT_SHAPES["text_cpu"]))

Importing this package registers the two text models of `relreason list models` in `TEXT_MODELS`,
each with its facts (relreason.models.entry): the config dataclass that is its `model:` section, its
paper and its paper recipe (`register_text_model`; the catalog, relreason.models.catalog, reads this
registry beside the processors'):

- `text_transformer` (`TextModelConfig`): the transformer's options plus the tokenizer record, so
  a checkpoint's config.json says which character ids its weights were trained on;
- `transnar` (`TransNARModelConfig`): the same plus the cross-attention options and the frozen NAR:
  `nar` names a NAR run (or checkpoint) and `nar_config` is that NAR's resolved config, read from its
  checkpoint when the configuration is resolved and stored with the TransNAR run (its weights are
  stored too, under `nar.` in model.safetensors), so evaluating a TransNAR needs nothing else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from relreason.data.algorithms import ALGORITHMS
from relreason.errors import RelreasonError
from relreason.files import read_json_object
from relreason.models.entry import ModelEntry
from relreason.models.processors import PROCESSORS
from relreason.models.text.tokenizer import BOS, EOS, PAD, VOCAB_SIZE, CharTokenizer, TokenBatch
from relreason.models.text.transformer import (TEXT_SHAPES, KVCache, PositionMode, TextTransformer,
                                               TextTransformerConfig, make_positions, random_positions,
                                               sequential_positions)
from relreason.models.text.transnar import TransNAR, TransNARConfig
from relreason.plugins import Origin, require_plugins
from relreason.registry import Registry
from relreason.rundir import Checkpoint, RunDir

__all__ = ["BOS", "EOS", "PAD", "TEXT_SHAPES", "VOCAB_SIZE", "CharTokenizer", "KVCache", "PositionMode",
           "TextModelConfig", "TextTransformer", "TextTransformerConfig", "TokenBatch", "TransNAR", "TransNARConfig",
           "TransNARModelConfig", "make_positions", "random_positions", "read_nar_record", "sequential_positions",
           "TEXT_MODELS", "TextModelEntry", "register_text_model"]


@dataclass(frozen=True)
class TextModelEntry(ModelEntry):
    """A text model: `cls` is an nn.Module built as cls(config, vocab_size); `config` is its `model:`
    section, defaults sized for this CPU."""


# a name lives in one family: the text models share the processors' namespace (and, below, their plugins)
TEXT_MODELS: Registry[TextModelEntry] = Registry("text model", "relreason list models", namespace=PROCESSORS)


def register_text_model(name: str, config: type, description: str, *, paper: str = "",
                        recipes: Mapping[str, str] | None = None) -> Callable[[type], type]:
    """A class decorator adding a text model and its facts (relreason.models.entry.ModelEntry); no
    processor may bear its name."""

    def add(cls: type) -> type:
        TEXT_MODELS.register(name, TextModelEntry(name, cls, config, description, paper, dict(recipes or {})))
        return cls

    return add


def _default_tokenizer() -> dict:
    return CharTokenizer.default().to_dict()


@dataclass
class TextModelConfig(TextTransformerConfig):
    """`model:` section of text_transformer: TextTransformerConfig's options (text_cpu shape by default)
    and the vocabulary the weights read."""

    tokenizer: dict = field(default_factory=_default_tokenizer)  # CharTokenizer record; checked whenever loaded

    def __post_init__(self) -> None:
        super().__post_init__()
        vocab = CharTokenizer.from_dict(self.tokenizer).vocab_size
        if vocab != self.vocab_size:
            raise RelreasonError(f"model.tokenizer has {vocab} ids but model.vocab_size is {self.vocab_size}",
                                 "keep the CLRS-Text vocabulary and its size (the defaults)")

    def tokenizer_object(self) -> CharTokenizer:
        return CharTokenizer.from_dict(self.tokenizer)

    def text_config(self) -> TextTransformerConfig:
        """The transformer's own options (what TextTransformer / TransNAR are built from)."""
        own = dataclasses.fields(TextTransformerConfig)
        return TextTransformerConfig(**{f.name: getattr(self, f.name) for f in own})


@dataclass
class TransNARModelConfig(TextModelConfig):
    """`model:` section of transnar: the text transformer's options, the Eq. 3 blocks' (TransNARConfig,
    whose node/edge widths come from the NAR) and the frozen NAR it reads, which must have been trained
    on every algorithm of the run's text tasks (a multi-task NAR run for a group such as text:clrs30)."""

    nar: str | None = None  # the frozen NAR: a NAR run directory (runs/NAME) or checkpoint; needed to train
    # {"run", "checkpoint", "config"}: the NAR's resolved config, read from `nar` when the configuration is
    # resolved and kept with this run (so eval needs no NAR run); re-read whenever `nar` names another run
    nar_config: dict | None = None
    use_nar: bool = True  # false: the same text transformer, data and budget without the NAR (transnar-vs-text)
    nodes_only: bool = False  # cross-attend to node embeddings only (transnar-nodes-only ablation)
    cross_every: int = 1  # an Eq. 3 block (gated cross-attention, FFN) after text layers 0, k, 2k, ... (paper: 1)
    cross_heads: int | None = None  # null: the text model's heads
    cross_head_dim: int | None = None  # null: the text model's head width
    cross_ffn: bool = True  # Eq. 3's feed-forward network after the cross-attention; false: the attention alone

    def __post_init__(self) -> None:
        super().__post_init__()
        self.cross_config(1, 1)  # range checks of the cross-attention options
        if self.nar is None:
            self.nar_config = None
        elif self.nar_config is None or self.nar_config.get("run") != self.nar:
            self.nar_config = read_nar_record(self.nar)
        elif set(self.nar_config) != {"run", "checkpoint", "config"}:
            raise RelreasonError("model.nar_config is not a NAR record (keys run, checkpoint, config)",
                                 "leave model.nar_config null: it is read from model.nar")

    def cross_config(self, node_dim: int, edge_dim: int) -> TransNARConfig:
        """The cross-attention options for a NAR of these widths."""
        return TransNARConfig(node_dim=node_dim, edge_dim=edge_dim, nodes_only=self.nodes_only,
                              cross_every=self.cross_every, cross_heads=self.cross_heads,
                              cross_head_dim=self.cross_head_dim, cross_ffn=self.cross_ffn)


def read_nar_record(target: str) -> dict:
    """{"run": target, "checkpoint": the checkpoint directory, "config": its stored config} of a NAR run
    (its best/ checkpoint) or checkpoint directory.

    Raises:
        RelreasonError: no checkpoint there, or it is not a NAR model's.
    """
    path = Path(target)
    best = RunDir(path).best
    checkpoint = best.path if best.config.is_file() else path
    file = Checkpoint(checkpoint).config
    try:
        meta = read_json_object(file)
        config = meta["config"]
        model = config["model_name"]
    except (RelreasonError, KeyError, TypeError):
        raise RelreasonError(f"model.nar={target!r} is not a trained run or checkpoint (no readable {file})",
                             "train a NAR first, e.g. relreason train triplet_gmpnn insertion_sort --recipe quick "
                             "--name nar, then --set model.nar=runs/nar") from None
    if config.get("processor") is None:
        raise RelreasonError(f"model.nar={target!r} is a {model} run, not a NAR",
                             "give a run of a NAR model (e.g. triplet_gmpnn) on the same algorithms")
    require_plugins(meta.get("plugins", []), f"model.nar={target!r}", _nar_origin)
    return {"run": target, "checkpoint": str(checkpoint), "config": config}


def _nar_origin(kind: str, name: str) -> Origin | None:
    """Where a NAR checkpoint's processor or algorithm `name` comes from here; None when unknown."""
    registry = PROCESSORS if kind == "model" else ALGORITHMS
    return registry.origin(name) if name in registry else None


register_text_model("text_transformer", TextModelConfig,
                    "Decoder-only character transformer with randomized positions (Ruoss et al. 2023), "
                    "TransNAR's text baseline", paper="Bounsi et al. 2024",
                    recipes={"text": "text_transformer"})(TextTransformer)
register_text_model("transnar", TransNARModelConfig,
                    "Text transformer with gated cross-attention (Eq. 3) to a frozen NAR after each layer; "
                    "--set model.nar=runs/NAME", paper="Bounsi et al. 2024", recipes={"text": "transnar"})(TransNAR)
TEXT_MODELS.accept_plugins("relreason.processors")  # the built-ins are all in: a processor plugin may add text models
