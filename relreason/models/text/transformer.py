"""A decoder-only character transformer for CLRS-Text, with randomized positional encodings.

    cfg = TextTransformerConfig(**TEXT_SHAPES["text_cpu"])
    model = TextTransformer(cfg)
    batch = CharTokenizer.default().batch_examples(pairs)                  # right-padded
    pos = model.positions(batch.pad_mask, train=True, generator=gen)      # (B, L)
    loss = model.loss(batch.tokens, pos, batch.target_mask, batch.pad_mask)
    out = model.generate(prompts, prompt_mask, max_new_tokens=200, generator=gen)   # (B, T), PAD after EOS

Architecture (the TransNAR paper's text baseline, Bounsi et al. 2024: a decoder-only transformer of
the Chinchilla family with randomized positional encodings): token embedding, `layers` pre-LayerNorm
blocks (x += attn(LN(x)); x += MLP(LN(x)) with a 4x GELU MLP), a final LayerNorm and an untied
output head. Attention is causal multi-head attention through
`torch.nn.functional.scaled_dot_product_attention` with rotary position embeddings (RoPE) on queries
and keys, so a token's position enters only through its rotation and any integer position
< `max_position` is as good as any other: that is what lets positions be randomized.

Randomized positional encodings (Ruoss et al., ACL 2023, "Randomized Positional Encodings Boost
Length Generalization of Transformers"): a sequence of length n gets as positions a sorted random
n-subset of [0, L_max) (L_max = `max_position`, 8,192 in TransNAR), drawn per sequence from an
explicit torch.Generator. What the authors do at test time (their code,
github google-deepmind/randomized_positional_encodings): the NOISY_* encodings in
`models/positional_encodings.py` draw a fresh subset on every call, with no training/evaluation
switch, and `experiments/range_evaluation.py` calls the model with a fresh rng key at every test
length, so evaluation uses randomized positions too. That is also the only choice that keeps test
positions in distribution: after training on random subsets (typical gap L_max / n), 0..n-1 (all
gaps 1) is a pattern the model has essentially never seen. `PositionMode.RANDOM` (default) follows
them; `RANDOM_TRAIN` (random in training, 0..n-1 at evaluation) and `SEQUENTIAL` (0..n-1 always: the
switch off) are there for ablations.

Padding: every sequence position has a boolean `pad_mask` (True = real token). Pad keys are never
attended to, except by the pad query itself (so no softmax row is empty; pad outputs are never
read); positions count real tokens only, so a row's logits do not depend on how much padding it
carries or where. A right-padded batch (padding after each row) needs no mask at all: causality
already hides it.

Decoding (`generate`) is greedy with a KV cache, a length cap and per-row EOS stopping; prompts may
be padded on either side. With randomized positions, the n + max_new_tokens positions a row may use
are drawn once, up front (a sorted subset for the longest sequence the row can reach), so that cached
keys stay valid; keep `max_new_tokens` close to the expected answer length.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from relreason.errors import RelreasonError
from relreason.models.processors.base import check_config
from relreason.models.text.tokenizer import EOS, PAD, VOCAB_SIZE


class PositionMode(str, enum.Enum):
    """Which positions a sequence of n tokens gets."""

    RANDOM = "random"  # sorted random n-subset of [0, max_position), in training and evaluation (Ruoss et al.'s code)
    RANDOM_TRAIN = "random_train"  # random subset in training, 0..n-1 in evaluation
    SEQUENTIAL = "sequential"  # 0..n-1 always: randomized positions switched off


# The two documented shapes; recipes apply one over the defaults (which are `text_cpu`).
TEXT_SHAPES: Mapping[str, Mapping[str, int]] = {
    # TransNAR's text model: 6 layers, 70M parameters, Chinchilla family, context 2,048. With a
    # 99-character vocabulary the embeddings are negligible (2 x 99 x D), so ~70M is all in the
    # blocks: 6 x 12 D^2 = 70M gives D ~ 990; D = 1024 with Chinchilla's 64-wide heads (16 heads)
    # gives 75.7M parameters.
    "text_paper": {"layers": 6, "width": 1024, "heads": 16, "context": 2048},
    # A useful CPU run in about an hour: 4 x 128 (0.81M parameters, 7.9 MFLOP per token at 512
    # tokens) trains at ~4,000 tokens/s on one core of this machine (scripts/bench_text.py), i.e.
    # ~15M tokens (~30k CLRS-Text examples of ~500 characters) an hour per core; 4 x 256 (3.2M)
    # manages only ~1,200 tokens/s. (Ruoss et al.'s length-generalization models are 5 x 64.)
    "text_cpu": {"layers": 4, "width": 128, "heads": 4, "context": 2048},
}


@dataclass
class TextTransformerConfig:
    """Text transformer options; defaults are the `text_cpu` shape and the TransNAR paper's settings."""

    layers: int = 4  # text_cpu shape (TEXT_SHAPES); the paper's model has 6
    width: int = 128  # D, text_cpu shape; the paper's ~70M model: 1024
    heads: int = 4  # head width D / heads = 32 (text_paper: 16 x 64, Chinchilla's head width)
    mlp_ratio: int = 4  # GELU MLP hidden = 4 D (standard transformer / Chinchilla)
    context: int = 2048  # longest sequence trained on or generated (TransNAR paper's context size)
    max_position: int = 8192  # L_max: randomized positions are drawn from [0, L_max) (TransNAR paper)
    positions: PositionMode = PositionMode.RANDOM  # Ruoss et al. randomize at train and test time (see module doc)
    rope_base: float = 10000.0  # RoPE wavelength base (Su et al.; Ruoss et al.'s max_time)
    # Untied: with 99 characters tying saves 0.013M of 0.81M (text_cpu) or 0.1M of 76M parameters,
    # and untied input/output tables let a character's role as context differ from its role as a
    # prediction; the TransNAR paper does not say.
    tie_embeddings: bool = False
    vocab_size: int = VOCAB_SIZE  # the CLRS-Text character vocabulary (tokenizer.py)

    def __post_init__(self) -> None:
        check_config(self, {"layers": 1, "width": 1, "heads": 1, "mlp_ratio": 1, "context": 1,
                            "max_position": 1, "vocab_size": 4})
        try:
            self.positions = PositionMode(self.positions)
        except ValueError:
            raise RelreasonError(f"processor.positions: unknown value {self.positions!r}",
                                 f"use one of: {', '.join(m.value for m in PositionMode)}") from None
        if self.width % self.heads or (self.width // self.heads) % 2:
            raise RelreasonError(f"processor.width={self.width} is not heads={self.heads} x an even head width",
                                 "RoPE rotates pairs of channels: pick width = heads x an even number")
        if self.positions is not PositionMode.SEQUENTIAL and self.max_position < self.context:
            raise RelreasonError(f"processor.max_position={self.max_position} < processor.context={self.context}",
                                 "randomized positions need at least `context` distinct positions")
        if self.rope_base <= 1.0:
            raise RelreasonError(f"processor.rope_base must be > 1, got {self.rope_base}", "use 10000")

    @property
    def head_dim(self) -> int:
        return self.width // self.heads


# --- positions ---------------------------------------------------------------------------------


def sequential_positions(pad_mask: torch.Tensor) -> torch.Tensor:
    """(B, L) int64: 0..n-1 on each row's real tokens in order (padding does not count); 0 on padding."""
    return torch.where(pad_mask, pad_mask.long().cumsum(1) - 1, 0)


def random_positions(pad_mask: torch.Tensor, max_position: int, generator: torch.Generator) -> torch.Tensor:
    """(B, L) int64: each row's real tokens get, in order, a sorted uniform random subset of
    [0, max_position) of the row's size (Ruoss et al.); padded slots get 0. One draw per row."""
    b, _ = pad_mask.shape
    n = pad_mask.sum(1)  # (B,)
    longest = int(n.max()) if b else 0
    if longest > max_position:
        raise RelreasonError(f"a sequence of {longest} tokens needs more than max_position={max_position} positions",
                             "raise processor.max_position or shorten the sequences")
    if longest == 0:
        return torch.zeros_like(pad_mask, dtype=torch.long)
    # The first k of a uniformly random permutation of [0, L_max) are a uniform random k-subset.
    keys = torch.rand(b, max_position, generator=generator, device=pad_mask.device)  # (B, L_max)
    chosen = keys.topk(longest, dim=1).indices  # (B, longest), in random order
    rank = torch.arange(longest, device=pad_mask.device)
    chosen = chosen.masked_fill(rank[None, :] >= n[:, None], max_position).sort(dim=1).values  # row's n first
    slot_rank = sequential_positions(pad_mask).clamp_max(longest - 1)  # (B, L): k-th real token -> k
    return torch.where(pad_mask, chosen.gather(1, slot_rank), 0)


def make_positions(mode: PositionMode, pad_mask: torch.Tensor, max_position: int, train: bool,
                   generator: torch.Generator | None) -> torch.Tensor:
    """The positions `mode` gives in training (`train=True`) or evaluation."""
    randomize = mode is PositionMode.RANDOM or (mode is PositionMode.RANDOM_TRAIN and train)
    if not randomize:
        return sequential_positions(pad_mask)
    if generator is None:
        raise RelreasonError("randomized positions need an explicit torch.Generator",
                             "pass generator=torch.Generator().manual_seed(seed) (kept for resume)")
    return random_positions(pad_mask, max_position, generator)


# --- rotary embeddings -------------------------------------------------------------------------


def rope_tables(positions: torch.Tensor, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (B, 1, T, head_dim / 2) for the given (B, T) integer positions."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim)
    angles = positions.to(torch.float32)[:, None, :, None] * inv_freq  # (B, 1, T, hd/2)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates channel pairs (i, i + hd/2) of x (B, h, T, hd) by position x frequency (the 'rotate
    half' layout; Ruoss et al. pair neighbouring channels, a fixed permutation of the same thing)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


# --- masks and the KV cache --------------------------------------------------------------------


def attention_mask(key_mask: torch.Tensor, start: int) -> torch.Tensor:
    """(B, 1, T, S) bool for queries at columns start..S-1 over keys 0..S-1 (key_mask (B, S)):
    causal, pad keys hidden, and every query sees itself (so a pad query's row is never empty)."""
    s = key_mask.shape[1]
    q_idx = torch.arange(start, s, device=key_mask.device)[:, None]  # (T, 1)
    k_idx = torch.arange(s, device=key_mask.device)[None, :]  # (1, S)
    mask = (k_idx <= q_idx) & (key_mask[:, None, :] | (k_idx == q_idx))  # (B, T, S)
    return mask[:, None]


def is_right_padded(pad_mask: torch.Tensor) -> bool:
    """True when every row is real tokens then padding (then causality alone hides the padding)."""
    return bool((pad_mask.long().cummin(dim=1).values.bool() == pad_mask).all())


class KVCache:
    """Keys/values of every layer for the columns decoded so far (preallocated to `length` columns)."""

    def __init__(self, layers: int, batch: int, heads: int, length: int, head_dim: int,
                 device: torch.device, dtype: torch.dtype):
        self.k = torch.zeros(layers, batch, heads, length, head_dim, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.key_mask = torch.zeros(batch, length, dtype=torch.bool, device=device)  # True: real token
        self.filled = 0  # columns whose keys are stored

    def extend_mask(self, new_mask: torch.Tensor) -> torch.Tensor:
        """Registers the next T columns' pad mask (B, T); returns the attention mask (B, 1, T, S)."""
        start, t = self.filled, new_mask.shape[1]
        self.key_mask[:, start:start + t] = new_mask
        return attention_mask(self.key_mask[:, :start + t], start)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stores the new columns' k, v (B, h, T, hd); returns all keys/values so far (B, h, S, hd)."""
        end = self.filled + k.shape[2]
        self.k[layer, :, :, self.filled:end] = k
        self.v[layer, :, :, self.filled:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def advance(self, t: int) -> None:
        self.filled += t


# --- the model ---------------------------------------------------------------------------------


class SelfAttention(nn.Module):
    def __init__(self, cfg: TextTransformerConfig, layer: int):
        super().__init__()
        self.layer, self.heads, self.head_dim = layer, cfg.heads, cfg.head_dim
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width, bias=False)
        self.proj = nn.Linear(cfg.width, cfg.width, bias=False)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None,
                cache: KVCache | None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, self.head_dim).transpose(1, 2)
                   for z in self.qkv(x).split(d, dim=-1))  # 3 x (B, h, T, hd)
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if cache is not None:
            k, v = cache.update(self.layer, k, v)  # (B, h, S, hd)
        # mask None: plain causal attention (a right-padded batch or no padding at all)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)  # (B, h, T, hd)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, width: int, ratio: int):
        super().__init__()
        self.fc = nn.Linear(width, ratio * width, bias=False)
        self.proj = nn.Linear(ratio * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-LN block: x += attn(LN(x)); x += MLP(LN(x))."""

    def __init__(self, cfg: TextTransformerConfig, layer: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.width)
        self.attn = SelfAttention(cfg, layer)
        self.norm2 = nn.LayerNorm(cfg.width)
        self.mlp = MLP(cfg.width, cfg.mlp_ratio)

    def forward(self, x, rope, mask, cache):
        x = x + self.attn(self.norm1(x), rope, mask, cache)
        return x + self.mlp(self.norm2(x))


class TextTransformer(nn.Module):
    """Decoder-only transformer over characters (see the module docstring)."""

    def __init__(self, cfg: TextTransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.layers))
        self.norm_f = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab_size, bias=False)
        self.apply(self._init)
        for block in self.blocks:  # GPT-2: residual branches scaled so the residual stream's variance stays O(1)
            for proj in (block.attn.proj, block.mlp.proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * cfg.layers))
        if cfg.tie_embeddings:
            self.head.weight = self.tok_emb.weight

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # tied weights are counted once

    # --- positions, context, core --------------------------------------------------------------

    def positions(self, pad_mask: torch.Tensor, train: bool, generator: torch.Generator | None = None
                  ) -> torch.Tensor:
        """(B, L) positions for a batch under the configured PositionMode (training or evaluation)."""
        return make_positions(self.cfg.positions, pad_mask, self.cfg.max_position, train, generator)

    def _prepare_context(self, **inputs: Any) -> Any:
        """What every layer may read besides the tokens (nothing here; TransNAR's NAR embeddings)."""
        if inputs:
            raise TypeError(f"TextTransformer takes no extra inputs, got {sorted(inputs)}")
        return None

    def _hidden(self, x: torch.Tensor, rope, mask: torch.Tensor | None, cache: KVCache | None,
                context: Any) -> torch.Tensor:
        """The blocks and the final norm: x (B, T, D) embedded tokens -> (B, T, D)."""
        for block in self.blocks:
            x = block(x, rope, mask, cache)
        return self.norm_f(x)

    def _check_length(self, length: int) -> None:
        if length > self.cfg.context:
            raise RelreasonError(f"a sequence of {length} tokens exceeds the model's context of {self.cfg.context}",
                                 "raise processor.context or shorten the examples")

    def _run(self, tokens: torch.Tensor, positions: torch.Tensor, pad_mask: torch.Tensor | None,
             context: Any) -> torch.Tensor:
        """(B, L) tokens -> (B, L, D) final hidden states, no cache."""
        self._check_length(int(pad_mask.sum(1).max()) if pad_mask is not None else tokens.shape[1])
        mask = None if pad_mask is None or is_right_padded(pad_mask) else attention_mask(pad_mask, 0)
        rope = rope_tables(positions, self.cfg.head_dim, self.cfg.rope_base)
        return self._hidden(self.tok_emb(tokens), rope, mask, None, context)

    # --- public API ----------------------------------------------------------------------------

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, pad_mask: torch.Tensor | None = None,
                **inputs: Any) -> torch.Tensor:
        """Logits (B, L, V) for tokens (B, L) int64 at positions (B, L); pad_mask (B, L) True = real."""
        return self.head(self._run(tokens, positions, pad_mask, self._prepare_context(**inputs)))

    def loss(self, tokens: torch.Tensor, positions: torch.Tensor, target_mask: torch.Tensor,
             pad_mask: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        """Mean next-token cross-entropy over the target tokens (answer + EOS; `TokenBatch.target_mask`).

        The head runs only on the slots that predict a target, so question tokens cost no logits."""
        h = self._run(tokens, positions, pad_mask, self._prepare_context(**inputs))  # (B, L, D)
        predicts = target_mask[:, 1:]  # (B, L-1): slot t predicts token t+1
        if not predicts.any():
            raise RelreasonError("no target tokens in the batch", "target_mask must mark answer tokens and EOS")
        logits = self.head(h[:, :-1][predicts])  # (n_targets, V)
        return F.cross_entropy(logits, tokens[:, 1:][predicts])

    @torch.no_grad()
    def generate(self, prompts: torch.Tensor, prompt_mask: torch.Tensor | None, max_new_tokens: int,
                 generator: torch.Generator | None = None, use_cache: bool = True, **inputs: Any) -> torch.Tensor:
        """Greedy continuation of each prompt row, stopping per row at EOS.

        Args:
            prompts: (B, P) int64, BOS + question per row, padded on either side (PAD).
            prompt_mask: (B, P) bool, True at real tokens (None: no padding).
            max_new_tokens: length cap of the continuation.
            generator: draws the randomized positions (needed unless positions are sequential in evaluation).
            use_cache: False recomputes the whole sequence per token (the reference the cache is tested against).
        Returns:
            (B, T) int64 with T <= max_new_tokens: generated tokens, EOS included, PAD after a row's EOS.
        """
        if max_new_tokens < 1:
            raise RelreasonError(f"max_new_tokens must be >= 1, got {max_new_tokens}", "e.g. the answer length + 1")
        b, p = prompts.shape
        device = prompts.device
        if prompt_mask is None:
            prompt_mask = torch.ones(b, p, dtype=torch.bool, device=device)
        if not prompt_mask.any(1).all():
            raise RelreasonError("a prompt row has no real token", "every prompt starts with BOS")
        self._check_length(int(prompt_mask.sum(1).max()) + max_new_tokens)
        full_mask = torch.cat([prompt_mask, prompt_mask.new_ones(b, max_new_tokens)], dim=1)  # (B, P + T)
        positions = self.positions(full_mask, train=False, generator=generator)  # drawn once for the longest reach
        context = self._prepare_context(**inputs)
        last_real = p - 1 - prompt_mask.flip(1).long().argmax(1)  # (B,) each row's last prompt token
        rows = torch.arange(b, device=device)
        out = torch.full((b, max_new_tokens), PAD, dtype=torch.long, device=device)
        done = torch.zeros(b, dtype=torch.bool, device=device)

        if use_cache:
            cache = KVCache(self.cfg.layers, b, self.cfg.heads, p + max_new_tokens, self.cfg.head_dim,
                            device, self.tok_emb.weight.dtype)
            h = self._cached_step(prompts, positions[:, :p], prompt_mask, cache, context)[rows, last_real]  # (B, D)
        else:
            seq = prompts
            h = self._run(seq, positions[:, :p], prompt_mask, context)[rows, last_real]
        for t in range(max_new_tokens):
            nxt = self.head(h).argmax(-1).masked_fill(done, PAD)  # (B,)
            out[:, t] = nxt
            done |= nxt == EOS
            if bool(done.all()) or t == max_new_tokens - 1:
                return out[:, :t + 1]
            col = slice(p + t, p + t + 1)
            if use_cache:
                h = self._cached_step(nxt[:, None], positions[:, col], full_mask[:, col], cache, context)[:, -1]
            else:
                seq = torch.cat([seq, nxt[:, None]], dim=1)
                h = self._run(seq, positions[:, :p + t + 1], full_mask[:, :p + t + 1], context)[:, -1]
        return out

    def _cached_step(self, tokens: torch.Tensor, positions: torch.Tensor, new_mask: torch.Tensor,
                     cache: KVCache, context: Any) -> torch.Tensor:
        """Runs the next T columns (B, T) through the model, reading and extending the cache."""
        mask = cache.extend_mask(new_mask)  # (B, 1, T, S)
        rope = rope_tables(positions, self.cfg.head_dim, self.cfg.rope_base)
        h = self._hidden(self.tok_emb(tokens), rope, mask, cache, context)
        cache.advance(tokens.shape[1])
        return h
