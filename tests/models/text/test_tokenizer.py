"""The character vocabulary: stable ids, exact round trips, loud errors, padded batches, serialisation."""

from __future__ import annotations

import json

import pytest
import torch

from relreason.errors import RelreasonError
from relreason.models.text.tokenizer import BOS, CHARS, EOS, PAD, UNKNOWN_CHAR, VOCAB_SIZE, CharTokenizer

TOK = CharTokenizer.default()
# A CLRS-Text-like example (question = prompt, answer = output), every kind of character it uses.
QUESTION = "bellman_ford:\ns: 3, A: [[0 0.52 -1.3] [0.5 0 0.125]]\npi:\n"
ANSWER = "[3 3 0]\n\n"


def test_ids_are_the_documented_stable_ones():
    assert (PAD, BOS, EOS) == (0, 1, 2)
    assert VOCAB_SIZE == TOK.vocab_size == 99
    assert TOK.encode("\n") == [3]
    assert TOK.encode(" ") == [4]
    assert TOK.encode("~") == [98]
    assert TOK.encode("0") == [4 + 0x30 - 0x20]
    assert sorted(TOK.char_to_id.values()) == list(range(3, 99))  # one id per character, no gaps


def test_every_printable_ascii_character_and_newline_round_trips():
    text = "".join(chr(c) for c in range(0x20, 0x7F)) + "\n"
    assert set(text) == set(CHARS)
    assert TOK.decode(TOK.encode(text)) == text
    assert TOK.decode(TOK.encode(QUESTION + ANSWER)) == QUESTION + ANSWER


@pytest.mark.parametrize("text, char, pos", [("ab\tc", "\t", 2), ("[1 2é]", "é", 4), ("\u00a0", "\u00a0", 0),
                                             ("ok\r\n", "\r", 2)])
def test_encode_names_the_unknown_character_and_its_position(text, char, pos):
    with pytest.raises(RelreasonError) as err:
        TOK.encode(text)
    assert repr(char) in err.value.message and f"position {pos}" in err.value.message


def test_decode_stops_at_eos_and_shows_stray_specials():
    ids = [BOS, *TOK.encode("1 2"), EOS, *TOK.encode("junk")]
    assert TOK.decode(ids) == "1 2"
    assert TOK.decode(torch.tensor(ids)) == "1 2"
    # a special emitted inside an answer must not vanish: the scorer has to see an illegal character
    assert TOK.decode([*TOK.encode("1"), PAD, *TOK.encode("2"), BOS, EOS]) == "1" + UNKNOWN_CHAR + "2" + UNKNOWN_CHAR
    assert UNKNOWN_CHAR not in CHARS
    with pytest.raises(RelreasonError, match="outside the vocabulary"):
        TOK.decode([5, 99])


def test_batch_examples_pads_right_and_targets_answer_and_eos_only():
    pairs = [(QUESTION, ANSWER), ("q:\n", "1\n\n"), ("", "x")]
    batch = TOK.batch_examples(pairs)
    lengths = [len(q) + len(a) + 2 for q, a in pairs]
    assert batch.tokens.dtype == torch.int64 and batch.tokens.shape == (3, max(lengths))
    for row, (q, a), n in zip(range(3), pairs, lengths):
        tokens, target, real = batch.tokens[row], batch.target_mask[row], batch.pad_mask[row]
        assert real.tolist() == [True] * n + [False] * (max(lengths) - n)
        assert (tokens[~real] == PAD).all()
        assert tokens[0] == BOS and tokens[n - 1] == EOS
        assert TOK.decode(tokens[:n]) == q + a
        # targets: exactly the answer's characters and the closing EOS
        assert target.tolist() == [False] * (1 + len(q)) + [True] * (len(a) + 1) + [False] * (max(lengths) - n)
        assert TOK.decode(tokens[target]) == a


def test_batch_prompts_pads_left_with_bos_first():
    tokens, mask = TOK.batch_prompts(["ab\n", "a\n"])
    assert tokens.tolist() == [[BOS, *TOK.encode("ab\n")], [PAD, BOS, *TOK.encode("a\n")]]
    assert mask.tolist() == [[True] * 4, [False, True, True, True]]


def test_empty_batches_are_rejected():
    with pytest.raises(RelreasonError):
        TOK.batch_examples([])
    with pytest.raises(RelreasonError):
        TOK.batch_prompts([])


def test_vocabulary_serialises_through_json_and_is_checked_on_load():
    record = json.loads(json.dumps(TOK.to_dict()))
    again = CharTokenizer.from_dict(record)
    assert again == TOK and again.encode(QUESTION) == TOK.encode(QUESTION)


@pytest.mark.parametrize("change, message", [
    (lambda r: r.pop("chars"), "keys"),
    (lambda r: r.update(version=99), "version"),
    (lambda r: r.update(kind="bpe"), "unsupported"),
    (lambda r: r.update(specials=["<bos>", "<pad>", "<eos>"]), "specials"),
    (lambda r: r.update(chars=r["chars"] + "a"), "repeat"),
    (lambda r: r.update(chars=r["chars"].replace("[", "")), "lacks"),
    (lambda r: r.update(chars=list(r["chars"])), "string"),
])
def test_malformed_vocabulary_records_are_rejected(change, message):
    record = TOK.to_dict()
    change(record)
    with pytest.raises(RelreasonError, match=message):
        CharTokenizer.from_dict(record)
