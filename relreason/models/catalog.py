"""Every model a user can name, in two families, one registry each:

- `nar`: neural algorithmic reasoners, i.e. a processor (relreason.models.processors.PROCESSORS) inside
  the encode-process-decode network; their config has a `model:` section (`ModelConfig`) and a
  `processor:` section (the processor's own dataclass); they train on graph tasks.
- `text`: language models over CLRS-Text (`relreason.models.text.TEXT_MODELS`, named here too); their
  `model:` section is the model's own config dataclass; they train on `text:` tasks.

A name lives in exactly one family (the two registries share one namespace), so `relreason train
NAME ...` needs no family flag. Each entry holds its model's facts (relreason.models.entry), declared
beside the model's class; everything here is read from them:

    family, entry = find_model("rt")          # ("nar", ProcessorEntry)
    canonical_model("G-ForgetNet")            # "g_forgetnet": how a user may spell a registered name
    paper_recipe("rt", "lobster")             # "lobster_rt"
"""

from __future__ import annotations

import difflib
import enum

from relreason.errors import RelreasonError
from relreason.models.entry import ModelEntry
from relreason.models.processors import PROCESSORS
from relreason.models.text import TEXT_MODELS, TextModelEntry, register_text_model  # the text family's registry
from relreason.plugins import Origin


class Family(str, enum.Enum):
    NAR = "nar"
    TEXT = "text"


def find_model(name: str) -> tuple[Family, ModelEntry]:
    """(family, registry entry) of a model name; a did-you-mean error over both families."""
    if name in PROCESSORS:
        return Family.NAR, PROCESSORS.get(name)
    if name in TEXT_MODELS:
        return Family.TEXT, TEXT_MODELS.get(name)
    close = difflib.get_close_matches(name, model_names(), n=3, cutoff=0.5)
    hint = ("did you mean " + " or ".join(repr(c) for c in close) + "? " if close else "") + "see `relreason list models`"
    raise RelreasonError(f"unknown model {name!r}", hint)


def _spelling(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def canonical_model(name: str) -> str:
    """The registered name that `name` spells: itself when registered, else the one model whose name equals it
    up to case, '-' and '_' (`gforgetnet`, `G-ForgetNet` -> `g_forgetnet`; `triplet-gmpnn` -> `triplet_gmpnn`).
    A name that spells none, or more than one, comes back as given, for find_model's did-you-mean error."""
    names = model_names()
    if name in names:
        return name
    same = [n for n in names if _spelling(n) == _spelling(name)]
    return same[0] if len(same) == 1 else name


def model_names() -> list[str]:
    return PROCESSORS.names() + TEXT_MODELS.names()


def model_rows() -> list[dict]:
    """One row per model, for `relreason list models`: name, family, paper recipe (on its family's
    task kind), description with citation, paper, origin (built-in or the plugin's distribution)."""
    rows = []
    for family, registry, kind in ((Family.NAR, PROCESSORS, "clrs"), (Family.TEXT, TEXT_MODELS, "text")):
        for name, entry in registry.items():
            rows.append({"name": name, "family": family.value, "paper_recipe": entry.paper_recipe(kind),
                         "description": entry.summary(), "paper": entry.paper, "origin": str(registry.origin(name))})
    return rows


def paper_recipe(model: str, kind: str) -> str:
    """The recipe that is `model`'s paper protocol on tasks of `kind` (its entry's `recipes`)."""
    return find_model(model)[1].paper_recipe(kind)


def model_origin(name: str) -> Origin:
    """Where a model comes from: built in, or a plugin's distribution."""
    family, _ = find_model(name)
    return (TEXT_MODELS if family is Family.TEXT else PROCESSORS).origin(name)


def model_label(model_name: str, model_cfg: object) -> str:
    """How result titles name a configured model: its name, and what its configuration takes away
    (a `transnar` with `use_nar: false` is the text transformer alone: transnar-vs-text)."""
    if getattr(model_cfg, "use_nar", True) is False:
        return f"{model_name} without the NAR"
    return model_name
