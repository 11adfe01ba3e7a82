"""What is a result and what is configuration: the one definition every comparison of runs uses.

A run's stored config (Config.to_dict(): {"model_name", "task", "recipe", section: {key: value}})
holds three kinds of entries:

- what the run computes (its protocol): every key except those below;
- incidental keys (INCIDENTAL_KEYS): where and how it computes, including which kernels compute the
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

# Keys a run may set without changing what it computes: where and how it runs, including which kernels
# compute the same maths (no change beyond float rounding), the NAR a TransNAR reads (an input of the run,
# which no recipe can name), the tracker its numbers also go to (train.log: a view of metrics.jsonl) and the
# shape-static step (train.static_step: finished samples masked, not dropped; equal to float rounding) and its
# capture as CUDA graphs (train.cuda_graph: the same kernels replayed).
INCIDENTAL_KEYS = ("train.device", "train.threads", "train.eval_batch_size", "data.data_dir", "model.nar",
                   "processor.chunk_mb", "processor.compiled_kernels", "train.log", "train.static_step",
                   "train.cuda_graph")
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


__all__ = ["INCIDENTAL_KEYS", "SEED_KEY", "LABEL_KEYS", "NOT_PROTOCOL_KEYS", "run_identity", "setting_identity"]
