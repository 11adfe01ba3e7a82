"""What relreason knows about one model, declared once, where the model is written.

Every model registers one entry beside its class (`register_processor` for the NAR processors,
`register_text_model` for the text models): the class, its config dataclass (whose defaults are its
paper's), a one-line description, the paper it comes from, and the recipe that is the paper's
protocol on each kind of task. `relreason list models`, the default recipe of `relreason train` and
the model cards are all read from these entries (relreason.models.catalog):

    @register_processor("rt", RTConfig, "Relational Transformer: attention over nodes and edges",
                        paper="Diao & Loynd 2023", recipes={"clrs": "rt", "lobster": "lobster_rt"})
    class RelationalTransformer(Processor): ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

DEFAULT_RECIPE = "default"  # the CLRS v2 defaults (relreason/recipes/default.yaml): a model's recipe where its paper gives none


@dataclass(frozen=True)
class ModelEntry:
    name: str
    cls: type  # the nn.Module
    config: type  # its config dataclass; the defaults are the paper's settings
    description: str  # one line: what the model is
    paper: str = ""  # the paper it comes from, as lists cite it ("Gilmer et al. 2017"); "" for none
    # task kind ("clrs", "lobster", "text") -> the recipe that is the paper's protocol on tasks of that
    # kind; DEFAULT_RECIPE for a kind not named
    recipes: Mapping[str, str] = field(default_factory=dict)

    def paper_recipe(self, kind: str) -> str:
        """The recipe `relreason train` uses for this model on a task of `kind` when none is given."""
        return self.recipes.get(kind, DEFAULT_RECIPE)

    def summary(self) -> str:
        """The description with its citation, as `relreason list models` prints it."""
        return f"{self.description} ({self.paper})" if self.paper else self.description
