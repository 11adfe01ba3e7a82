"""What a study declares: its columns (`Variant`), the published figures (`Published`: mean, "±" and what
the paper says that ± is, seeds), and the `Study` (with the equivalence margin of its verdicts).

A study is pure data: `relreason.studies.ablations` and `relreason.studies.tables` register them,
`relreason.studies.cells` plans their cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from relreason.config import keys_of
from relreason.runs.stats import Figure


@dataclass(frozen=True)
class Variant:
    """One column of a study."""

    label: str
    model: str  # model name
    delta: dict = field(default_factory=dict)  # config tree {section: {key: value}} applied over the recipe
    recipe: str | None = None  # the column's protocol; None: the model's paper recipe for each task
    caveat: str = ""  # non-empty: this column is knowingly not the paper's protocol (printed, never compared)
    # a text column that reads a frozen NAR (TransNAR): the NAR column whose cell of the same algorithm and seed
    # the study pre-trains first and names as this column's model.nar (relreason.studies.cells.plan_cells)
    nar: "Variant | None" = None


# A published figure: mean (in percent, or the paper's unit), its printed "±" with what the paper says it is
# (std, standard error, or undefined: then read the way that is harder to agree with), and its seed count.
Published = Figure


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    variants: tuple[Variant, ...]  # the first is the reference the others are compared with
    tasks: str = "core8"  # the default task list (a group or comma list)
    source: str = ""  # where the published figures are printed
    figures: Mapping[tuple[str, str], Published] = field(default_factory=dict)  # (variant, task) -> figure
    averages: Mapping[str, Published] = field(default_factory=dict)  # variant -> published average
    paper_scope: str = ""  # what `averages` average over
    not_comparable: Mapping[str, str] = field(default_factory=dict)  # task -> why no cell of it compares
    note: str = ""  # printed under the table (e.g. how the published ± is defined)
    layout: str = "study"  # "study": OUT/<name>/<variant>/...; "protocol": OUT/cells/<model>/<recipe>[+delta]/...
    margin: float | None = None  # equivalence margin of the verdicts, in the table's unit; None: 1.0 for scores in %
    seeds: int | None = None  # the seed count of a study whose paper gives none to follow (its cost in --list)

    @property
    def varied_keys(self) -> set[str]:
        """The config keys some variant sets (`--set` may not override them)."""
        return set().union(*(keys_of(v.delta) for v in self.variants))

    def column_seeds(self, label: str) -> int | None:
        """The seed count the paper ran column `label` with (the largest of its figures'), else its published
        average's, else the study's own (a study whose paper gives none), or None."""
        return max((p.seeds for (v, _), p in self.figures.items() if v == label and p.seeds),
                   default=self.averages[label].seeds if label in self.averages else self.seeds)

    def paper_line(self) -> str:
        """The published averages in one line ("" when the paper printed none)."""
        if not self.averages:
            return ""
        parts = ", ".join(f"{v} {p.mean:.2f}" for v, p in self.averages.items())
        return f"paper ({self.source}), {self.paper_scope}: {parts}"
