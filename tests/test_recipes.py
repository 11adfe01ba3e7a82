"""The paper recipes hold the papers' values: a drifting recipe fails CI.

The table below is written from the papers and the authors' code (not from our recipes): the RT from
its authors' CLRS-v1 fork (CameronDiao/relational-transformer 09f6469, clrs/examples/run.py,
baselines.py, nets.py); Triplet-GMPNN from google-deepmind/clrs 2.0.3 clrs/examples/run.py (Ibarz et al.
2022); the Edge Transformer from Mueller et al. 2024's CLRS fork (ksmdnl/clrs 42a5de5, clrs/examples/run.py,
clrs/_src/processors.py ET_Processor, nets.py); the Dual Attention
Transformer from Altabaa & Lafferty 2024 (the authors' package README); lobsters from the RT paper's
Table 6; the CLRS-30 paper's baselines from google-deepmind/clrs a4f8ed4 (the run.py defaults "aligned
with paper") and Ibarz et al. 2022 §3.2; the RT paper's tuned baselines from its Table 2; the CLRS v2
defaults from google-deepmind/clrs 2.0.3 clrs/examples/run.py.

Every recipe also says which protocol it is (a paper's, an authors' code, or the CLRS v2 defaults), and
the baseline recipes say it in what every run prints (`deviation:`) as well.
"""

from __future__ import annotations

import pytest

from relreason.config import build_config, field_comments

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
ET = {  # Mueller et al. 2024: their fork's run.py defaults and ET_Processor
    "data.stream": "ibarz", "data.stream_sizes": [16], "data.val_size": 16, "data.test_size": 64,
    "model.hidden": 192, "model.hint_mode": "encoded_decoded", "model.hint_repred": "soft",
    "model.teacher_forcing": 0.0, "model.random_pos": True, "model.enforce_permutations": True,
    "model.pred_as_input": True, "model.encoder_init": "xavier_on_scalars", "model.pointer_decoding": "node",
    "processor.width": 0, "processor.heads": 12, "processor.layers": 3, "processor.tied": False,
    "processor.ff_factor": 2, "processor.norm": "pre_and_post", "processor.carry_state": False,
    "processor.edge_projection": False, "processor.graph_input": "nodes", "processor.init": "haiku",
    "processor.dropout": 0.0,
    "train.batch_size": 4, "train.lr": 2.5e-4, "train.grad_clip": 1.0, "train.train_examples": 10_000 * 4,
    "train.eval_every_examples": 50 * 4,
}
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


RT_CODE = ("run.py", "baselines.py", "nets.py", "processors.py", "CLRS v1")  # the authors' fork, as the sources cite it


def test_every_rt_protocol_value_says_where_it_comes_from():
    # The protocol's processor values are `rt`'s dataclass defaults: their source is the comment beside
    # the default (what --print-config shows as "default: ..."). Every value must cite the authors' code.
    cfg = build_config("rt", "bellman_ford")
    notes = field_comments(type(cfg.processor))
    for key in RT:
        section, name = key.split(".")
        if key in cfg.sources:
            source = cfg.sources[key]
            assert source.startswith(("recipe rt: ", "model rt")), (key, source)
        else:
            assert section == "processor", f"{key}: neither the rt recipe nor the rt model sets it"
            source = notes.get(name, "")
        assert any(ref in source for ref in RT_CODE), f"{key} = {RT[key]!r} cites no source: {source!r}"
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


# -- baseline protocols: the CLRS-30 paper, the RT paper (tuned and untuned), the CLRS v2 defaults ---------

BASELINES = ["mpnn", "pgn", "pgn_masked", "deepsets", "gat", "gatv2"]

CLRS30 = {  # google-deepmind/clrs a4f8ed4 run.py (defaults "aligned with paper"), baselines.py; Ibarz et al. §3.2
    "data.train_num": 1000, "data.stream": "canonical",
    "model.hidden": 128, "model.hint_mode": "encoded_decoded", "model.hint_repred": "hard_scalar_grad",
    "model.teacher_forcing": 0.5, "model.random_pos": False, "model.enforce_permutations": False,
    "model.pred_as_input": False, "model.pointer_decoding": "node", "model.processor_steps": 1,
    "model.encoder_init": "default", "model.dropout": 0.0, "processor.use_ln": True, "processor.layers": 1,
    "train.batch_size": 32, "train.lr": 1e-3, "train.grad_clip": None, "train.train_examples": 10_000 * 32,
    "train.eval_every_examples": 320,
}
CLRS_V2 = {  # google-deepmind/clrs 2.0.3 clrs/examples/run.py defaults (on the fixed CLRS-30 train split)
    "data.train_num": 1000, "data.stream": "canonical",
    "model.hidden": 128, "model.hint_mode": "encoded_decoded", "model.hint_repred": "soft",
    "model.teacher_forcing": 0.0, "model.random_pos": True, "model.enforce_permutations": True,
    "model.pred_as_input": True, "model.pointer_decoding": "node", "model.processor_steps": 1,
    "model.encoder_init": "xavier_on_scalars", "processor.use_ln": True, "processor.layers": 1,
    "train.batch_size": 32, "train.lr": 1e-3, "train.grad_clip": 1.0, "train.train_examples": 10_000 * 32,
    "train.eval_every_examples": 50 * 32,
}
# RT paper, Table 2 (tuned hyperparameters for CLRS-30, batch_size 4 for every model):
# model: (num_layers, learning_rate, d_n = d_e = d_g or None, nb_heads or None, head_size or None)
TABLE2 = {
    "deepsets": (2, 2.5e-4, 512, None, None),  # Deep Sets
    "gat": (2, 6.3e-4, None, 10, 64),  # GAT-v1
    "gatv2": (2, 2.5e-4, None, 12, 64),  # GAT-v2
    "mpnn": (1, 1.6e-3, 512, None, None),  # MPNN
    "pgn": (1, 1.6e-3, 180, None, None),  # PGN-u
    "pgn_masked": (3, 1e-3, 512, None, None),  # PGN-m
    "rt": (3, 2.5e-4, None, 12, 16),  # RT (d_nh 32, d_eh1 16, d_eh2 8, ptr_from_edges, graph_vec cat)
}
RT_PROTOCOL = {k: v for k, v in RT.items() if k.startswith(("data.", "train.", "model.")) and k not in
               ("model.hidden", "model.pointer_decoding", "train.lr")}  # the authors' run.py, every model


def values(cfg, keys) -> dict:
    plain = cfg.to_dict()
    return {key: plain[key.split(".")[0]][key.split(".")[1]] for key in keys}


@pytest.mark.parametrize("model", BASELINES)
def test_clrs30_recipe_is_the_clrs30_papers_protocol(model):
    cfg = build_config(model, "bellman_ford", "clrs30")
    assert values(cfg, CLRS30) == CLRS30
    if model.startswith("gat"):
        assert cfg.processor.heads == 1  # run.py --nb_heads 1
    else:
        assert cfg.processor.msg_mlp_layers == 2  # processors.py msgs_mlp_sizes=[out_size, out_size]


@pytest.mark.parametrize("model", list(TABLE2))
def test_rt_table2_recipe_holds_table_2_for_every_model(model):
    layers, lr, width, heads, head_size = TABLE2[model]
    cfg = build_config(model, "bellman_ford", "rt_table2")
    assert cfg.train.batch_size == 4
    assert cfg.processor.layers == layers
    assert cfg.train.lr == pytest.approx(lr, rel=0, abs=1e-12)
    assert cfg.model.hidden == (width if width is not None else heads * head_size)  # run.py: heads x head size
    if heads is not None:
        assert cfg.processor.heads == heads
    if model == "rt":
        assert (cfg.processor.head_dim, cfg.processor.node_hidden, cfg.processor.edge_hidden_1,
                cfg.processor.edge_hidden_2, cfg.processor.global_vector.value) == (16, 32, 16, 8, "cat")
    assert cfg.model.pointer_decoding.value == ("edge" if model == "rt" else "node")  # ptr_from_edges: RT only
    assert values(cfg, RT_PROTOCOL) == RT_PROTOCOL  # the authors' training protocol, inherited from rt


@pytest.mark.parametrize("model", BASELINES)
def test_rt_untuned_recipe_is_the_clrs30_hyperparameters_at_both_table_9_sizes(model):
    cfg = build_config(model, "bellman_ford", "rt_untuned")
    assert values(cfg, CLRS30) == CLRS30  # data.train_num 1000: Table 9's first column
    other = build_config(model, "bellman_ford", "rt_untuned", ["data.train_num=10000"])
    assert other.data.train_num == 10_000 and values(other, CLRS30) == {**CLRS30, "data.train_num": 10_000}


# The maximum of PGN, PGN-masked and Deep Sets per protocol: the CLRS-30 release multiplied messages by the adjacency
# (clrs eddd94e processors.py L362); the RT authors' fork (Basic_MPNN_jax.py L79-81), clrs v2 and rt_table2's
# inherited rt protocol mask non-neighbours out.
REDUCTIONS = {"clrs30": "adjacency_product_max", "rt_untuned": "masked_max", "rt_table2": "masked_max",
              "default": "masked_max"}


@pytest.mark.parametrize("recipe", list(REDUCTIONS))
@pytest.mark.parametrize("model", ["deepsets", "pgn", "pgn_masked"])
def test_each_protocol_takes_its_codes_maximum_over_senders(model, recipe):
    assert build_config(model, "bellman_ford", recipe).processor.reduction.value == REDUCTIONS[recipe]


def test_a_pgn_cell_stored_before_the_reduction_existed_is_another_configuration_than_clrs30s():
    """A stored config without processor.reduction ran the masked maximum: it resolves so, and so differs from
    the clrs30 protocol's PGN (the committed cell is reported as made under another configuration)."""
    from relreason.studies.cells import config_differences, result_identity

    now = build_config("pgn", "bellman_ford", "clrs30").to_dict()
    old = {**now, "processor": {k: v for k, v in now["processor"].items() if k != "reduction"}}
    assert config_differences(result_identity(old), result_identity(now)) == ["processor.reduction"]


@pytest.mark.parametrize("model, recipe", [("mpnn", "default"), ("pgn_masked", "default"), ("deepsets", "deepsets"),
                                           ("pgn", "pgn"), ("gat", "gat"), ("gatv2", "gatv2")])
def test_the_v2_default_recipes_are_the_clrs_v2_defaults(model, recipe):
    """They claim "CLRS v2 defaults": if a default moves, this fails and the claim must be revisited."""
    assert values(build_config(model, "bellman_ford", recipe), CLRS_V2) == CLRS_V2


@pytest.mark.parametrize("recipe", ["clrs30", "rt_table2", "rt_untuned"])
def test_every_value_of_the_protocol_recipes_names_its_source(recipe):
    for model in TABLE2 if recipe == "rt_table2" else BASELINES:
        cfg = build_config(model, "bellman_ford", recipe)
        for key, source in cfg.sources.items():
            if source.startswith("recipe "):
                assert ": " in source and len(source.split(": ", 1)[1]) > 5, (model, key, source)


# The protocol each recipe says it is, in its header (and, for the baseline recipes, in its `deviation:`,
# which every run prints). A new recipe must be added here: saying its protocol is not optional.
BASELINE_PROTOCOLS = {
    "default": "CLRS v2 defaults", "deepsets": "CLRS v2 defaults", "pgn": "CLRS v2 defaults",
    "gat": "CLRS v2 defaults", "gatv2": "CLRS v2 defaults",
    "clrs30": "the CLRS-30 paper's", "rt_table2": "the RT paper's tuned", "rt_untuned": "the RT paper's untuned",
}
OTHER_PROTOCOLS = {  # the phrase of each other recipe's header that names its protocol
    "rt": "the authors' protocol", "transformer": "the RT paper's \"standard transformer\"",
    "triplet_gmpnn": "the protocol of the reference's clrs/examples/run.py (clrs 2.0.3)",
    "generalist": "the training loop of the reference's clrs/examples/run.py (clrs 2.0.3)",
    "et": "the protocol of Mueller, Kusuma, Bonet & Morris", "et_cpu": "the benchmark defaults",
    "dat": "the benchmark defaults", "quick": "the protocol of the model's paper recipe",
    "lobster_rt": "The RT paper's end-to-end benchmark", "lobster_gat": "The RT paper's GAT baseline",
    "lobster_gcn": "The RT paper's GCN baseline", "text_paper": "at the paper's scale (Bounsi et al. 2024",
    "text_transformer": "sized for this 2-core CPU", "transnar": "TransNAR (Bounsi et al. 2024) on this CPU",
    "transnar_paper": "TransNAR at the paper's scale (Bounsi et al. 2024)",
    "transnar_ood": "a REDUCED-SCALE study of the claim, not the paper's protocol",
    "transnar_ood_nar": "The frozen NAR of the reduced-scale TransNAR study",
    "floydnet": "the Ibarz et al. protocol of Triplet-GMPNN", "rnar": "the protocol Triplet-GMPNN's Ibarz et al. one",
    "g_forgetnet": "the protocol is Triplet-GMPNN's Ibarz et al. one",
}


def header(recipe: str) -> str:
    """The opening comment block of a recipe, as one line of text."""
    from relreason.config import RECIPE_DIR

    lines = []
    for line in (RECIPE_DIR / f"{recipe}.yaml").read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return " ".join(" ".join(lines).split())


def test_every_recipe_says_which_protocol_it_is():
    from relreason.config import recipe_names

    assert set(BASELINE_PROTOCOLS) | set(OTHER_PROTOCOLS) == set(recipe_names())
    for recipe, phrase in {**BASELINE_PROTOCOLS, **OTHER_PROTOCOLS}.items():
        assert phrase.lower() in header(recipe).lower(), (recipe, phrase)


@pytest.mark.parametrize("recipe", list(BASELINE_PROTOCOLS))
def test_every_baseline_run_prints_its_protocol(recipe):
    from relreason.config import recipe_deviation, run_deviation

    phrase = BASELINE_PROTOCOLS[recipe]
    assert phrase.lower() in recipe_deviation(recipe).lower()
    model = "mpnn" if recipe in ("default", "clrs30", "rt_table2", "rt_untuned") else recipe
    assert phrase.lower() in run_deviation(build_config(model, "bellman_ford", recipe)).lower()
    if recipe != "clrs30":  # only clrs30 may present itself as the CLRS-30 paper's protocol
        assert not header(recipe).lower().startswith("protocol: the clrs-30 paper")
