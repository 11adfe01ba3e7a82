"""What is a result and what is configuration: the one definition every comparison of runs uses.

A run's stored config (Config.to_dict(): {"model_name", "task", "recipe", section: {key: value}})
holds three kinds of entries:

- what the run computes (its protocol): every key except those below;
- incidental keys (INCIDENTAL_KEYS, from KEY_RULES): where and how it computes, including which kernels compute the
  same maths (no change to the result beyond float rounding) and the NAR a TransNAR reads (an input
  of the run, which no recipe can name); and the recipe's label (LABEL_KEYS), the name of where the
  values came from, never a value itself;
- the seed (SEED_KEY): one draw of the protocol.

So two runs with the same `run_identity` are the same computation (one cell of a study, whichever
machine, thread count or kernel computed it), and runs with the same `setting_identity` are seeds of
one experiment (`relreason compare` pools them as mean ± std). The configuration (how a run departs
from its recipe: `relreason.config.run_deviation`), the study grids (cell identity and stale cells:
`relreason.studies`) and the run records (`relreason.runs.grouping`) all read it here.
"""

from __future__ import annotations

INCIDENTAL, MACHINE, RESUMABLE, LOWERABLE = "incidental", "machine", "resumable", "lowerable"
# Each config key's rules, declared once here and read by everything that needs them: the cell and run identities
# (below), `--set`'s deviation from a recipe (relreason.config), resume (relreason.train.resume), a study's NAR
# cells (relreason.studies.cells) and seed groups and packs (through the identities). Declared in the core, not on
# the config fields, because the identities are computed here and in relreason.runs, below every config class.
# - incidental: setting it does not change what the run computes: where and how it runs, which kernels compute
#   the same maths (no change beyond float rounding), the NAR a TransNAR reads (an input of the run, which no
#   recipe can name), the tracker its numbers also go to (train.log: a view of metrics.jsonl), the shape-static
#   step (train.static_step: finished samples masked, not dropped; equal to float rounding) and its capture as CUDA
#   graphs (train.cuda_graph: the same kernels replayed);
# - machine: where and how a run computes (a study's NAR cells run with the same machine settings as its cells);
# - resumable: a resumed run may change it (it does not alter what already ran: a longer budget continues it;
#   under a decaying train.lr_schedule it stretches the decay over the new budget from there on);
# - lowerable: a resumed run may lower it (a diverged run continues from its last checkpoint), recorded as a
#   deviation.
KEY_RULES: dict[str, frozenset[str]] = {
    "train.train_examples": frozenset({RESUMABLE}),
    "train.device": frozenset({INCIDENTAL, MACHINE, RESUMABLE}),
    "train.threads": frozenset({INCIDENTAL, MACHINE, RESUMABLE}),
    "train.eval_batch_size": frozenset({INCIDENTAL, MACHINE, RESUMABLE}),
    "data.data_dir": frozenset({INCIDENTAL, MACHINE}),
    "model.nar": frozenset({INCIDENTAL}),
    "processor.chunk_mb": frozenset({INCIDENTAL, MACHINE}),
    "processor.compiled_kernels": frozenset({INCIDENTAL, MACHINE}),
    "train.log": frozenset({INCIDENTAL, MACHINE, RESUMABLE}),
    "train.static_step": frozenset({INCIDENTAL, MACHINE, RESUMABLE}),
    "train.cuda_graph": frozenset({INCIDENTAL, MACHINE, RESUMABLE}),
    "train.lr": frozenset({LOWERABLE}),
}


def keys_with(rule: str) -> tuple[str, ...]:
    """The config keys ("section.key") that KEY_RULES gives `rule`, in its order."""
    return tuple(k for k, rules in KEY_RULES.items() if rule in rules)


INCIDENTAL_KEYS = keys_with(INCIDENTAL)
MACHINE_KEYS = keys_with(MACHINE)
RESUMABLE_KEYS = keys_with(RESUMABLE)
LOWERABLE_KEYS = keys_with(LOWERABLE)
SEED_KEY = "train.seed"
LABEL_KEYS = ("recipe",)  # top-level entries that name where a config came from

# Keys a run may set without departing from its recipe's protocol (a seed is one draw of it).
NOT_PROTOCOL_KEYS = INCIDENTAL_KEYS + (SEED_KEY,)


def _without(plain: dict, keys: tuple[str, ...]) -> dict:
    """`plain` without the dotted `keys` ("section.key", or a top-level name); nested dicts copied."""
    drop = {tuple(k.split(".")) for k in keys}

    def walk(tree: dict, prefix: tuple) -> dict:
        return {k: walk(v, prefix + (k,)) if isinstance(v, dict) else v for k, v in tree.items()
                if prefix + (k,) not in drop}

    return walk(plain, ())


def run_identity(plain: dict) -> dict:
    """What a run computes, from its stored config: the config without incidental keys and labels
    (the seed stays). Two runs with equal identities computed the same thing."""
    return _without(plain, INCIDENTAL_KEYS + LABEL_KEYS)


def setting_identity(plain: dict) -> dict:
    """The experiment a run is one seed of: its `run_identity` without the seed."""
    return _without(run_identity(plain), (SEED_KEY,))


__all__ = ["KEY_RULES", "INCIDENTAL", "MACHINE", "RESUMABLE", "LOWERABLE", "keys_with", "INCIDENTAL_KEYS",
           "MACHINE_KEYS", "RESUMABLE_KEYS", "LOWERABLE_KEYS", "SEED_KEY", "LABEL_KEYS", "NOT_PROTOCOL_KEYS", "run_identity", "setting_identity"]
