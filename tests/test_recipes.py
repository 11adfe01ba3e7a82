"""The paper recipes hold the papers' values: a drifting recipe fails CI.

The table below is written from the papers and the authors' code (not from our recipes): the RT from
its authors' CLRS-v1 fork (CameronDiao/relational-transformer 09f6469, clrs/examples/run.py,
baselines.py, nets.py); Triplet-GMPNN from google-deepmind/clrs 2.0.3 clrs/examples/run.py (Ibarz et al.
2022); the Edge Transformer from Bergen et al. 2021 (authors' CLUTRR train.py); the Dual Attention
Transformer from Altabaa & Lafferty 2024 (the authors' package README); lobsters from the RT paper's
Table 6.
"""

from __future__ import annotations

import pytest

from relreason.config import build_config

RT = {  # authors' run.py / baselines.py / nets.py
    "data.train_num": 10_000, "data.stream": "canonical",
    "model.hidden": 192, "model.hint_mode": "encoded_decoded", "model.hint_repred": "hard_scalar_grad",
    "model.teacher_forcing": 0.5, "model.random_pos": False, "model.enforce_permutations": False,
    "model.pred_as_input": False, "model.pointer_decoding": "edge", "model.encoder_init": "default",
    "processor.heads": 12, "processor.head_dim": 16, "processor.edge_dim": 192, "processor.node_hidden": 32,
    "processor.edge_hidden_1": 16, "processor.edge_hidden_2": 8, "processor.layers": 3,
    "processor.global_vector": "cat", "processor.edge_updates": True,
    "train.batch_size": 4, "train.lr": 2.5e-4, "train.grad_clip": None, "train.train_examples": 320_000,
    "train.eval_every_examples": 320,
}
TRIPLET_GMPNN = {  # clrs 2.0.3 run.py defaults (the Ibarz et al. protocol)
    "data.stream": "ibarz", "data.stream_sizes": [4, 7, 11, 13, 16],
    "model.hidden": 128, "model.hint_mode": "encoded_decoded", "model.hint_repred": "soft",
    "model.teacher_forcing": 0.0, "model.random_pos": True, "model.enforce_permutations": True,
    "model.pred_as_input": True, "model.encoder_init": "xavier_on_scalars", "model.processor_steps": 1,
    "processor.triplet_features": 8, "processor.gated": True, "processor.use_ln": True,
    "train.batch_size": 32, "train.lr": 1e-3, "train.grad_clip": 1.0, "train.train_examples": 10_000 * 32,
    "train.eval_every_examples": 50 * 32,
}
ET = {"processor.heads": 4, "processor.tied": True, "processor.ff_factor": 4}  # Bergen et al. 2021
DAT = {"processor.n_heads_sa": 4, "processor.n_heads_ra": 4, "processor.symbols": "symbolic_attention",
       "processor.norm_first": True, "processor.ff_factor": 4}  # Altabaa & Lafferty 2024
LOBSTER_RT = {  # RT paper, Table 6
    "train.lr": 6.3e-5, "train.grad_clip": 128.0, "processor.heads": 8, "processor.head_dim": 28,
    "processor.edge_dim": 128, "processor.node_hidden": 12, "processor.edge_hidden_1": 32,
    "processor.edge_hidden_2": 8, "processor.layers": 30, "model.processor_steps": 1, "model.hint_mode": "none",
    "model.scalar_loss": "relative",
}
LOBSTER_GNN = {"model.processor_steps": 30, "model.hint_mode": "none", "model.scalar_loss": "relative"}

PAPERS = [
    ("rt", "bellman_ford", RT), ("rt", "insertion_sort", RT), ("triplet_gmpnn", "bellman_ford", TRIPLET_GMPNN),
    ("triplet_gmpnn", "insertion_sort", TRIPLET_GMPNN), ("et", "bellman_ford", ET), ("dat", "bellman_ford", DAT),
    ("rt", "lobster", LOBSTER_RT), ("gat", "lobster", LOBSTER_GNN), ("gcn", "lobster", LOBSTER_GNN),
]


@pytest.mark.parametrize("model, task, paper", PAPERS, ids=[f"{m}-{t}" for m, t, _ in PAPERS])
def test_paper_recipe_holds_the_papers_values(model, task, paper):
    cfg = build_config(model, task)  # no --recipe: the model's paper recipe
    plain = cfg.to_dict()
    got = {key: plain[key.split(".")[0]][key.split(".")[1]] for key in paper}
    assert got == paper


def test_every_rt_protocol_value_says_where_it_comes_from():
    cfg = build_config("rt", "bellman_ford")
    for key in RT:
        source = cfg.sources.get(key, "")
        assert source.startswith(("recipe rt: ", "model rt")) or key.startswith("processor."), (key, source)
    for key in ("train.lr", "train.batch_size", "train.grad_clip", "model.teacher_forcing", "model.hint_repred"):
        assert "run.py" in cfg.sources[key] or "baselines.py" in cfg.sources[key] or "nets.py" in cfg.sources[key]


def test_every_scoped_diff_names_something_that_exists():
    """A scope key that names no model, task, task kind, group or `multitask` would never apply."""
    import yaml

    from relreason.config import MULTITASK, RECIPE_DIR, recipe_names
    from relreason.models.catalog import model_names
    from relreason.tasks import TASKS, task_groups

    kinds = {TASKS.get(name).kind for name in TASKS.names()}
    known = {"models": set(model_names()),
             "tasks": set(TASKS.names()) | set(task_groups()) | kinds | {MULTITASK}}
    for name in recipe_names():
        data = yaml.safe_load((RECIPE_DIR / f"{name}.yaml").read_text()) or {}
        for scope, names in known.items():
            unknown = set(data.get(scope) or {}) - names
            assert not unknown, (name, scope, unknown)


def test_quick_multitask_scope_applies_to_groups_and_lists_only():
    group = build_config("triplet_gmpnn", "core8", recipe="quick")
    listed = build_config("mpnn", "bellman_ford,insertion_sort", recipe="quick")
    single = build_config("mpnn", "bellman_ford", recipe="quick")
    assert group.train.train_examples == listed.train.train_examples == 960
    assert "(multitask)" in group.sources["train.train_examples"]
    assert single.train.train_examples == 9600
