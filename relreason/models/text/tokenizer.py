"""The character-level vocabulary of the text models: every character CLRS-Text can emit, plus PAD/BOS/EOS.

    tok = CharTokenizer.default()
    ids = tok.encode("bfs:\\ns: 0, A: [[0 1] [1 0]]\\npi:\\n")       # list[int], no specials
    batch = tok.batch_examples([(question, answer), ...])           # TokenBatch, right-padded int64
    prompts, mask = tok.batch_prompts([question, ...])              # BOS + question, left-padded
    text = tok.decode(generated_row)                                # stops at EOS

Ids are stable and documented: PAD = 0 (so zero-initialised buffers are padding), BOS = 1, EOS = 2,
"\\n" = 3, then the printable ASCII characters 0x20..0x7E in code-point order (" " = 4 ... "~" = 98);
V = 99. CLRS-Text is ASCII by construction (numbers, names, brackets, ": ", ", " and newlines), so
this vocabulary is closed: an unknown character is a data bug and `encode` says which and where.

A training example is `question` (the prompt) then `answer`; its sequence is
BOS + question + answer + EOS and the loss covers the answer tokens and EOS only (`target_mask`).

The vocabulary is serialisable (`to_dict` / `from_dict`) so a checkpoint's config.json records
exactly which ids the weights were trained on; `from_dict` checks the record before use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch

from relreason.errors import RelreasonError

PAD, BOS, EOS = 0, 1, 2
SPECIALS = ("<pad>", "<bos>", "<eos>")  # names of ids 0, 1, 2
CHARS = "\n" + "".join(chr(c) for c in range(0x20, 0x7F))  # ids 3.. in this order
VOCAB_SIZE = len(SPECIALS) + len(CHARS)  # 99
FORMAT_VERSION = 1  # bump when the to_dict layout changes
# What `decode` shows for a special token the model emitted inside an answer: U+FFFD is outside the
# vocabulary, so a scorer's "illegal character" check sees it instead of silently losing it.
UNKNOWN_CHAR = "\ufffd"


@dataclass
class TokenBatch:
    """Right-padded training sequences BOS + question + answer + EOS."""

    tokens: torch.Tensor  # (B, L) int64, PAD after the end
    target_mask: torch.Tensor  # (B, L) bool: True at answer tokens and EOS (what the loss predicts)
    pad_mask: torch.Tensor  # (B, L) bool: True at real tokens


class CharTokenizer:
    """A fixed character vocabulary: specials first, then one id per character."""

    def __init__(self, specials: Sequence[str] = SPECIALS, chars: str = CHARS):
        self.specials = tuple(specials)
        self.chars = chars
        _check_vocabulary(self.specials, self.chars)
        self.offset = len(self.specials)
        self.vocab_size = self.offset + len(self.chars)
        self.char_to_id = {c: self.offset + i for i, c in enumerate(self.chars)}
        # Fast path for ASCII text: one table lookup per byte (-1 = not in the vocabulary).
        self._ascii = np.full(128, -1, dtype=np.int64)
        for c, i in self.char_to_id.items():
            if ord(c) < 128:
                self._ascii[ord(c)] = i

    @classmethod
    def default(cls) -> "CharTokenizer":
        """The CLRS-Text vocabulary (the only one the models are built for)."""
        return cls()

    # --- serialisation -------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {"kind": "char", "version": FORMAT_VERSION, "specials": list(self.specials), "chars": self.chars}

    @classmethod
    def from_dict(cls, data: dict) -> "CharTokenizer":
        """Rebuilds a tokenizer from `to_dict()`'s record; raises RelreasonError if it is malformed."""
        if not isinstance(data, dict):
            raise RelreasonError(f"tokenizer record must be a mapping, got {type(data).__name__}",
                                 "store CharTokenizer.to_dict() in the checkpoint config")
        expected = {"kind", "version", "specials", "chars"}
        if set(data) != expected:
            raise RelreasonError(f"tokenizer record has keys {sorted(data)}, expected {sorted(expected)}",
                                 "store CharTokenizer.to_dict() in the checkpoint config")
        if data["kind"] != "char" or data["version"] != FORMAT_VERSION:
            raise RelreasonError(f"unsupported tokenizer {data['kind']!r} version {data['version']!r}",
                                 f"this relreason reads kind 'char' version {FORMAT_VERSION}")
        if not isinstance(data["specials"], list) or not isinstance(data["chars"], str):
            raise RelreasonError("tokenizer record: 'specials' must be a list and 'chars' a string",
                                 "store CharTokenizer.to_dict() in the checkpoint config")
        return cls(data["specials"], data["chars"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.specials, self.chars))

    # --- encoding ------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """The ids of `text`'s characters (no specials added).

        Raises:
            RelreasonError: a character is not in the vocabulary (names it and its position).
        """
        return self._encode_array(text).tolist()

    def _encode_array(self, text: str) -> np.ndarray:
        try:
            codes = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
        except UnicodeEncodeError as err:
            self._unknown(text, err.start)
        ids = self._ascii[codes]  # (len,)
        if (ids < 0).any():
            self._unknown(text, int(np.argmax(ids < 0)))
        return ids

    @staticmethod
    def _unknown(text: str, pos: int) -> None:
        context = text[max(0, pos - 10):pos + 10]
        raise RelreasonError(f"character {text[pos]!r} (U+{ord(text[pos]):04X}) at position {pos} is not in the "
                             f"text vocabulary (near {context!r})",
                             "CLRS-Text uses printable ASCII and newlines only; check how the text was rendered")

    def encode_example(self, question: str, answer: str) -> tuple[list[int], list[bool]]:
        """BOS + question + answer + EOS and its target mask (answer tokens and EOS)."""
        q, a = self._encode_array(question), self._encode_array(answer)
        ids = [BOS, *q.tolist(), *a.tolist(), EOS]
        target = [False] * (1 + len(q)) + [True] * (len(a) + 1)
        return ids, target

    def batch_examples(self, examples: Iterable[tuple[str, str]]) -> TokenBatch:
        """Training sequences of (question, answer) pairs, right-padded with PAD to the longest."""
        rows = [self.encode_example(q, a) for q, a in examples]
        if not rows:
            raise RelreasonError("no examples to batch", "pass at least one (question, answer) pair")
        length = max(len(ids) for ids, _ in rows)
        tokens = torch.full((len(rows), length), PAD, dtype=torch.int64)
        target = torch.zeros(len(rows), length, dtype=torch.bool)
        pad_mask = torch.zeros(len(rows), length, dtype=torch.bool)
        for b, (ids, tgt) in enumerate(rows):
            tokens[b, :len(ids)] = torch.tensor(ids, dtype=torch.int64)
            target[b, :len(ids)] = torch.tensor(tgt)
            pad_mask[b, :len(ids)] = True
        return TokenBatch(tokens, target, pad_mask)

    def batch_prompts(self, questions: Iterable[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """BOS + question per row, left-padded with PAD: (tokens (B, P) int64, pad_mask (B, P) bool).

        Left padding puts every row's last prompt token in the last column, where decoding starts;
        the models' `generate` accepts any padding layout, this is just the tidy one."""
        rows = [[BOS, *self._encode_array(q).tolist()] for q in questions]
        if not rows:
            raise RelreasonError("no prompts to batch", "pass at least one question")
        length = max(len(r) for r in rows)
        tokens = torch.full((len(rows), length), PAD, dtype=torch.int64)
        pad_mask = torch.zeros(len(rows), length, dtype=torch.bool)
        for b, ids in enumerate(rows):
            tokens[b, length - len(ids):] = torch.tensor(ids, dtype=torch.int64)
            pad_mask[b, length - len(ids):] = True
        return tokens, pad_mask

    # --- decoding ------------------------------------------------------------------------------

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        """The text of `ids`: a leading BOS is dropped, decoding stops at the first EOS, and any other
        special token (PAD, BOS) shows as U+FFFD so a malformed generation is never silently cleaned.

        Raises:
            RelreasonError: an id outside the vocabulary.
        """
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for k, i in enumerate(ids):
            if not 0 <= i < self.vocab_size:
                raise RelreasonError(f"token id {i} at position {k} is outside the vocabulary [0, {self.vocab_size})",
                                     "decode ids produced by this tokenizer or a model built with its vocab_size")
            if i == EOS:
                break
            if i >= self.offset:
                out.append(self.chars[i - self.offset])
            elif not (k == 0 and i == BOS):
                out.append(UNKNOWN_CHAR)
        return "".join(out)

    def decode_batch(self, tokens: torch.Tensor) -> list[str]:
        """`decode` of every row of a (B, T) tensor (e.g. the output of `generate`)."""
        return [self.decode(row) for row in tokens.tolist()]


def _check_vocabulary(specials: tuple[str, ...], chars: str) -> None:
    """The checks `from_dict` relies on: PAD/BOS/EOS at their fixed ids, no duplicate characters."""
    if tuple(specials[:3]) != SPECIALS[:3] or len(specials) != len(SPECIALS):
        raise RelreasonError(f"tokenizer specials {list(specials)} are not {list(SPECIALS)}",
                             "PAD=0, BOS=1, EOS=2 are fixed ids")
    if not all(isinstance(s, str) for s in specials):
        raise RelreasonError("tokenizer specials must be strings", f"use {list(SPECIALS)}")
    if len(set(chars)) != len(chars):
        dup = sorted({c for c in chars if chars.count(c) > 1})
        raise RelreasonError(f"tokenizer characters repeat: {dup}", "each character gets exactly one id")
    missing = sorted(set(CHARS) - set(chars))
    if missing:
        raise RelreasonError(f"tokenizer vocabulary lacks CLRS-Text characters {missing}",
                             "store CharTokenizer.default().to_dict()")
