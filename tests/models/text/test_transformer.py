"""The text transformer: causality, padding invariance, randomized positions, answer-only loss,
cached decoding equal to uncached decoding, per-row EOS stopping, and a tiny task learned end to end."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from relreason.errors import RelreasonError
from relreason.models.text.tokenizer import BOS, EOS, PAD, CharTokenizer
from relreason.models.text.transformer import (TEXT_SHAPES, PositionMode, TextTransformer, TextTransformerConfig,
                                               attention_mask, make_positions, random_positions,
                                               sequential_positions)

TOK = CharTokenizer.default()


def tiny(**overrides) -> TextTransformer:
    torch.manual_seed(0)
    cfg = dict(layers=2, width=32, heads=4, context=128, max_position=512)
    cfg.update(overrides)
    return TextTransformer(TextTransformerConfig(**cfg)).eval()


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_tokens(b: int, length: int, seed: int = 0) -> torch.Tensor:
    tokens = torch.randint(3, 99, (b, length), generator=gen(seed))
    tokens[:, 0] = BOS
    return tokens


# --- positions ---------------------------------------------------------------------------------


def test_random_positions_are_sorted_distinct_in_range_and_follow_the_mask():
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1, 1], [1, 1, 0, 1, 1, 0, 1]], dtype=torch.bool)
    pos = random_positions(mask, 64, gen())
    for row, real in zip(pos, mask):
        values = row[real]
        assert (values[1:] > values[:-1]).all()  # strictly increasing: sorted and distinct
        assert values.min() >= 0 and values.max() < 64
        assert (row[~real] == 0).all()
    # the same generator state gives the same draw; another seed another one
    assert torch.equal(random_positions(mask, 64, gen(3)), random_positions(mask, 64, gen(3)))
    assert not torch.equal(random_positions(mask, 64, gen(3)), random_positions(mask, 64, gen(4)))


def test_random_positions_are_a_uniform_subset():
    # Ruoss et al.: a uniformly random k-subset, so every position is chosen with probability k / L_max
    # and the subset's sorted order is the token order.
    rows, k, l_max = 4000, 3, 8
    pos = random_positions(torch.ones(rows, k, dtype=torch.bool), l_max, gen(1))
    freq = torch.bincount(pos.flatten(), minlength=l_max).double() / rows
    assert torch.allclose(freq, torch.full((l_max,), k / l_max, dtype=torch.double), atol=0.03)
    subsets = {tuple(r) for r in pos.tolist()}
    assert len(subsets) == math.comb(l_max, k)  # every subset occurs


def test_position_modes_in_training_and_evaluation():
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    seq = torch.tensor([[0, 0, 1, 2], [0, 1, 0, 0]])
    assert torch.equal(sequential_positions(mask), seq)
    for train in (True, False):
        assert torch.equal(make_positions(PositionMode.SEQUENTIAL, mask, 512, train, None), seq)
    assert torch.equal(make_positions(PositionMode.RANDOM_TRAIN, mask, 512, False, None), seq)
    drawn = make_positions(PositionMode.RANDOM_TRAIN, mask, 512, True, gen())
    assert torch.equal(drawn, random_positions(mask, 512, gen()))
    assert torch.equal(make_positions(PositionMode.RANDOM, mask, 512, False, gen()), drawn)  # Ruoss: also at test
    with pytest.raises(RelreasonError, match="Generator"):
        make_positions(PositionMode.RANDOM, mask, 512, False, None)
    with pytest.raises(RelreasonError, match="max_position"):
        random_positions(torch.ones(1, 9, dtype=torch.bool), 8, gen())


# --- the forward pass --------------------------------------------------------------------------


def test_changing_a_later_token_never_changes_earlier_logits():
    model = tiny()
    tokens = random_tokens(2, 20)
    pos = random_positions(torch.ones(2, 20, dtype=torch.bool), 512, gen())
    with torch.no_grad():
        before = model(tokens, pos)
        for t in (5, 12, 19):
            changed = tokens.clone()
            changed[:, t] = (changed[:, t] + 7) % 96 + 3
            after = model(changed, pos)
            torch.testing.assert_close(after[:, :t], before[:, :t], rtol=0, atol=1e-6)
            assert not torch.allclose(after[:, t:], before[:, t:])


@pytest.mark.parametrize("layout", ["left", "right", "both", "scattered"])
def test_padding_never_changes_a_real_tokens_logits(layout):
    model = tiny()
    n, extra = 12, 5
    tokens = random_tokens(1, n)
    pos = random_positions(torch.ones(1, n, dtype=torch.bool), 512, gen())
    with torch.no_grad():
        alone = model(tokens, pos)[0]  # (n, V)
    mask = torch.ones(n + extra, dtype=torch.bool)
    pads = {"left": range(extra), "right": range(n, n + extra), "both": [0, 1, n + 2, n + 3, n + 4],
            "scattered": [0, 3, 7, 8, 16]}[layout]
    mask[list(pads)] = False
    padded = torch.randint(3, 99, (1, n + extra), generator=gen(9))  # padding content must not matter either
    padded[0, mask] = tokens[0]
    padded_pos = torch.zeros(1, n + extra, dtype=torch.long)
    padded_pos[0, mask] = pos[0]
    with torch.no_grad():
        logits = model(padded, padded_pos, mask[None])[0]
    assert torch.isfinite(logits).all()
    torch.testing.assert_close(logits[mask], alone, rtol=0, atol=1e-5)


def test_attention_mask_is_causal_hides_pads_and_keeps_the_diagonal():
    key_mask = torch.tensor([[False, True, True, False, True]])
    mask = attention_mask(key_mask, 0)[0, 0]  # (5, 5)
    for i in range(5):
        for j in range(5):
            assert bool(mask[i, j]) == (j <= i and (bool(key_mask[0, j]) or i == j))
    assert torch.equal(attention_mask(key_mask, 3)[0, 0], mask[3:])


def test_loss_counts_answer_tokens_and_eos_only():
    model = tiny()
    batch = TOK.batch_examples([("q: [1 2 3]\n", "6\n\n"), ("a longer question: [4 5]\n", "[5 4]\n\n")])
    pos = random_positions(batch.pad_mask, 512, gen())
    loss = model.loss(batch.tokens, pos, batch.target_mask, batch.pad_mask)
    # independent reference: cross-entropy of every next-token prediction, weighted by the target mask
    logits = model(batch.tokens, pos, batch.pad_mask)
    per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), batch.tokens[:, 1:], reduction="none")  # (B, L-1)
    weights = batch.target_mask[:, 1:].float()
    assert weights.sum() == len("6\n\n") + 1 + len("[5 4]\n\n") + 1
    torch.testing.assert_close(loss, (per_token * weights).sum() / weights.sum())
    # question tokens are not targets: the loss is blind to how well the model predicts them
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    everything = batch.target_mask | batch.pad_mask
    model.loss(batch.tokens, pos, everything, batch.pad_mask).backward()
    assert any(not torch.allclose(p.grad, grads[n]) for n, p in model.named_parameters())


def test_config_is_validated():
    with pytest.raises(RelreasonError, match="even head width"):
        TextTransformerConfig(width=30, heads=2)  # head width 15
    with pytest.raises(RelreasonError, match="positions"):
        TextTransformerConfig(positions="noisy")
    with pytest.raises(RelreasonError, match="max_position"):
        TextTransformerConfig(context=4096, max_position=2048)
    with pytest.raises(RelreasonError, match="layers"):
        TextTransformerConfig(layers=0)
    assert TextTransformerConfig(positions="random_train").positions is PositionMode.RANDOM_TRAIN
    model = tiny(context=16)
    with pytest.raises(RelreasonError, match="context"):
        model(random_tokens(1, 17), torch.zeros(1, 17, dtype=torch.long))


def test_tied_embeddings_share_one_matrix():
    model = tiny(tie_embeddings=True)
    assert model.head.weight is model.tok_emb.weight
    assert model.num_parameters() == tiny().num_parameters() - 99 * 32


@pytest.mark.parametrize("shape", sorted(TEXT_SHAPES))
def test_parameter_count_of_the_documented_shapes(shape):
    cfg = TextTransformerConfig(**TEXT_SHAPES[shape])
    with torch.device("meta"):
        model = TextTransformer(cfg)
    d, v = cfg.width, cfg.vocab_size
    per_block = 4 * d * d + 2 * cfg.mlp_ratio * d * d + 2 * 2 * d  # attention, MLP, two LayerNorms
    assert model.num_parameters() == 2 * v * d + cfg.layers * per_block + 2 * d
    if shape == "text_paper":  # TransNAR: 6 layers, ~70M parameters
        assert cfg.layers == 6 and cfg.context == 2048 and 65e6 < model.num_parameters() < 80e6


# --- decoding ----------------------------------------------------------------------------------


@pytest.mark.parametrize("positions", ["random", "sequential"])
def test_cached_and_uncached_decoding_give_the_same_tokens(positions):
    model = tiny(positions=positions)
    prompts, mask = TOK.batch_prompts(["sort: 3 1 2\n", "q\n", "a much longer question: [1 2 3 4]\n"])
    cached = model.generate(prompts, mask, 12, generator=gen(5))
    uncached = model.generate(prompts, mask, 12, generator=gen(5), use_cache=False)
    assert cached.shape == (3, 12) and torch.equal(cached, uncached)


def test_decoding_a_row_does_not_depend_on_the_rest_of_the_batch():
    model = tiny(positions="sequential")
    questions = ["sort: 3 1 2\n", "q\n", "a much longer question: [1 2 3 4]\n"]
    together = model.generate(*TOK.batch_prompts(questions), 10)
    for row, q in enumerate(questions):
        alone = model.generate(*TOK.batch_prompts([q]), 10)
        assert torch.equal(together[row, :alone.shape[1]], alone[0])
    # right-padded prompts (any layout works) decode the same as left-padded ones
    prompts, mask = TOK.batch_prompts(questions)
    right_prompts = torch.full_like(prompts, PAD)
    for row in range(3):
        ids = prompts[row][mask[row]]
        right_prompts[row, :len(ids)] = ids
    assert torch.equal(model.generate(right_prompts, right_prompts != PAD, 10), together)


def sort_examples() -> list[tuple[str, str]]:
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(8):
        n = int(torch.randint(2, 6, (1,), generator=g))
        xs = torch.randint(0, 10, (n,), generator=g).tolist()
        out.append((f"sort: {' '.join(map(str, xs))}\n", " ".join(map(str, sorted(xs))) + "\n"))
    return out


def train_on_sort(positions: str, steps: int) -> tuple[TextTransformer, list[tuple[str, str]], float]:
    torch.manual_seed(0)
    model = TextTransformer(TextTransformerConfig(layers=2, width=64, heads=4, context=64, max_position=64,
                                                  positions=positions))
    pairs = sort_examples()
    batch = TOK.batch_examples(pairs)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = gen(0)
    for _ in range(steps):
        pos = model.positions(batch.pad_mask, train=True, generator=g)
        loss = model.loss(batch.tokens, pos, batch.target_mask, batch.pad_mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval(), pairs, loss.item()


def test_a_tiny_model_overfits_a_tiny_sort_task_and_stops_at_eos():
    model, pairs, _ = train_on_sort("sequential", 200)
    out = model.generate(*TOK.batch_prompts([q for q, _ in pairs]), 16)
    assert TOK.decode_batch(out) == [a for _, a in pairs]
    for row, (_, answer) in enumerate(pairs):  # stopped at EOS, PAD after it
        ids = out[row].tolist()
        assert ids[len(answer)] == EOS and all(i == PAD for i in ids[len(answer) + 1:])
    assert out.shape[1] == max(len(a) for _, a in pairs) + 1  # decoding ended when the last row did


def test_randomized_positions_still_learn():
    # Fresh positions every step: the model cannot memorise positions, only the task; in the same
    # 200 steps the answer loss falls from ln(99) = 4.6 to about 0.05 (exact decoding takes longer).
    _, _, loss = train_on_sort("random", 200)
    assert loss < 0.25
