"""The network's options (everything except the processor's own architecture), with the reference's defaults.

`ModelConfig` is the `model:` section of a recipe. Enums are str-valued so YAML strings map onto
them directly (`ModelConfig(hint_mode="decoded_only")` is accepted and normalized). Defaults are
those of the CLRS reference run (google-deepmind/clrs `examples/run.py`, `baselines.py`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping

from relreason.data.specs import Stage
from relreason.errors import RelreasonError


class HintMode(str, enum.Enum):
    """How hints enter the model (CLRS `--hint_mode`)."""

    ENCODED_DECODED = "encoded_decoded"  # hints are fed back in and predicted (the benchmark's default task)
    DECODED_ONLY = "decoded_only"  # hints are only prediction targets (an auxiliary loss)
    NONE = "none"  # hints are ignored: inputs -> outputs after T-1 steps

    @property
    def encode(self) -> bool:
        return self is HintMode.ENCODED_DECODED

    @property
    def decode(self) -> bool:
        return self is not HintMode.NONE


class RepredMode(str, enum.Enum):
    """How a predicted hint is turned back into an input for the next step."""

    SOFT = "soft"  # softmax / sigmoid: gradients flow through the fed-back hints
    HARD = "hard"  # argmax / threshold: no gradient through fed-back hints
    HARD_ON_EVAL = "hard_on_eval"  # soft while training, hard in evaluation
    # hard, but scalars keep their gradient: CLRS v1's `postprocess`, so the RT authors' fork
    # (github CameronDiao/relational-transformer, decoders.py) in training and evaluation
    HARD_SCALAR_GRAD = "hard_scalar_grad"


class PointerDecoding(str, enum.Enum):
    """Where node pointers are decoded from."""

    NODE = "node"  # logit[i, j] = w . max(W1 h_i, W2 h_j + W3 e_ji) (CLRS)
    EDGE = "edge"  # logit[i, j] = linear([e_ij, previous edge state, new edge state]) (Relational Transformer)


class EncoderInit(str, enum.Enum):
    """Initialisation of the input/hint encoders (CLRS `--encoder_init`)."""

    DEFAULT = "default"  # truncated normal, std 1/sqrt(fan_in) (Haiku's Linear default) everywhere
    XAVIER_ON_SCALARS = "xavier_on_scalars"  # as DEFAULT, but scalar hints get std 1/sqrt(hidden)


class PointerCandidates(str, enum.Enum):
    """Which nodes a node pointer may choose from."""

    ALL = "all"  # every real node (CLRS)
    GRAPH = "graph"  # the adjacency the processor reads (neighbours and the node itself): the sparse form's choice


class SparseMode(str, enum.Enum):
    """Whether the network runs on edge lists (relreason.models.sparse)."""

    AUTO = "auto"  # sparse where it computes what the dense processor would, on large sparse graphs
    ALWAYS = "always"  # sparse, refusing where it cannot (MPNN, Triplet-GMPNN: messages along edges, another model)
    NEVER = "never"  # dense node pairs (CLRS)


class ScalarLoss(str, enum.Enum):
    """The loss of scalar outputs."""

    MSE = "mse"  # squared error (CLRS)
    RELATIVE = "relative"  # |y - y_hat| / |y|, the lobster benchmark's metric used as its objective


def coerce_enums(cfg: object, section: str, kinds: Mapping[str, type[enum.Enum]]) -> None:
    """Turns each option of a config dataclass named in `kinds` into its enum (YAML and `--set` give strings).

    Raises:
        RelreasonError: a value that is none of its enum's, named as `section.option`, with the choices."""
    for name, kind in kinds.items():
        value = getattr(cfg, name)
        if not isinstance(value, kind):
            try:
                setattr(cfg, name, kind(value))
            except ValueError:
                choices = ", ".join(m.value for m in kind)
                raise RelreasonError(f"{section}.{name}: unknown value {value!r}", f"use one of: {choices}") from None


@dataclass
class ModelConfig:
    """Encode-process-decode options shared by every processor."""

    hidden: int = 128  # H: encoder/decoder width; CLRS run.py --hidden_size 128
    hint_mode: HintMode = HintMode.ENCODED_DECODED  # the benchmark's task definition (run.py default)
    teacher_forcing: float = 0.0  # P(ground-truth hint fed in place of the prediction) in training; run.py 0.0
    hint_repred: RepredMode = RepredMode.SOFT  # run.py --hint_repred_mode soft
    enforce_permutations: bool = True  # sorting `pred` as permutation pointer + Sinkhorn; run.py True
    random_pos: bool = True  # randomized sorted `pos` in training batches; run.py --random_pos True
    pred_as_input: bool = True  # constant `pred_h` hint becomes a `pred` input; run.py --enforce_pred_as_input
    pointer_decoding: PointerDecoding = PointerDecoding.NODE  # CLRS decodes pointers from node pairs
    processor_steps: int = 1  # message-passing steps per algorithm step; run.py --nb_msg_passing_steps 1
    encoder_init: EncoderInit = EncoderInit.XAVIER_ON_SCALARS  # run.py --encoder_init default
    dropout: float = 0.0  # dropout on the new hidden state in training; run.py --dropout_prob 0.0
    scalar_loss: ScalarLoss = ScalarLoss.MSE  # outputs only (hints stay MSE); lobster tasks use `relative`
    pointer_candidates: PointerCandidates = PointerCandidates.ALL  # CLRS: a pointer may choose any node
    sparse: SparseMode = SparseMode.AUTO  # edge lists only where they give the dense numbers (>= 256 nodes, <= 5% edges)
    # hints the model neither reads nor predicts, as if the algorithm had none of them (CLRS v1's quickselect has
    # no `pivot` hint); the others, their steps and the outputs are unchanged
    drop_hints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        coerce_enums(self, "model", {"hint_mode": HintMode, "hint_repred": RepredMode,
                                     "pointer_decoding": PointerDecoding, "encoder_init": EncoderInit,
                                     "scalar_loss": ScalarLoss, "pointer_candidates": PointerCandidates,
                                     "sparse": SparseMode})
        if self.hidden < 1:
            raise RelreasonError(f"model.hidden must be positive, got {self.hidden}", "use e.g. 128")
        if not 0.0 <= self.teacher_forcing <= 1.0:
            raise RelreasonError(f"model.teacher_forcing must be in [0, 1], got {self.teacher_forcing}",
                                 "0 feeds back predictions, 1 always feeds ground-truth hints")
        if self.processor_steps < 1:
            raise RelreasonError(f"model.processor_steps must be >= 1, got {self.processor_steps}", "use 1")
        if not 0.0 <= self.dropout < 1.0:
            raise RelreasonError(f"model.dropout must be in [0, 1), got {self.dropout}", "use 0.0 to disable")
        self.drop_hints = tuple(self.drop_hints)
        if len(set(self.drop_hints)) < len(self.drop_hints) or "pred_h" in self.drop_hints:
            raise RelreasonError(f"model.drop_hints must name distinct hints other than pred_h, got {list(self.drop_hints)}",
                                 "pred_h (the static predecessor hint) is model.pred_as_input's")

    def task_problems(self, specs: dict) -> list[str]:
        """What is wrong with these options for tasks of these specs ({task: spec}): a dropped hint no task has."""
        have = {name for spec in specs.values() for name, f in spec.items() if f.stage is Stage.HINT}
        missing = [h for h in self.drop_hints if h not in have]
        return [f"model.drop_hints: {', '.join(specs)} {'has' if len(specs) == 1 else 'have'} no hint "
                f"{', '.join(missing)}"] if missing else []
