"""Tests of relreason/eval/evaluate.py: evaluation batches are cut in order of trajectory length,
which must not change any score (nor which random positions a sample gets)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relreason.data import generate
from relreason.eval.evaluate import evaluate_dataset
from relreason.models import ModelConfig, build_model, prepare_spec


@pytest.mark.parametrize("random_pos", [False, True])
def test_scores_do_not_depend_on_the_batch_size_or_the_order_of_samples(random_pos):
    ds = generate("bellman_ford", num=12, size=6, seed=5)
    assert len(set(ds.lengths.tolist())) > 1  # lengths differ, so sorting reorders the batches
    cfg = ModelConfig(hidden=8, random_pos=random_pos)
    spec = prepare_spec(ds.spec, cfg, "bellman_ford")
    torch.manual_seed(0)
    net = build_model(spec, cfg, "mpnn")

    def scores(data, batch_size):
        gen = torch.Generator().manual_seed(3) if random_pos else None
        res = evaluate_dataset(net, data, spec, cfg, torch.device("cpu"), batch_size, generator=gen).to_dict()
        # flat, to float rounding: the model's arithmetic depends on the batch size in the last bits
        return pytest.approx({f"{part}.{k}": v for part in ("outputs", "hints") for k, v in res[part].items()},
                             rel=1e-6)

    whole = scores(ds, len(ds))
    for batch_size in (1, 5):
        assert scores(ds, batch_size).expected == whole
    if not random_pos:  # with random positions a sample's draw follows its row in the split
        perm = np.random.default_rng(0).permutation(len(ds))
        assert scores(ds.take(perm), 5).expected == whole
