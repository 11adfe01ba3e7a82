"""The `relreason` command: one Typer app, one module per group of commands."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from relreason.cli import ablate, data, runs, train
from relreason.cli.common import out, report_errors
from relreason.errors import RelreasonError

app = typer.Typer(
    name="relreason",
    help="Train and evaluate neural algorithmic reasoners on faithful CLRS-30 data.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

app.command("generate")(data.generate_cmd)
app.command("show")(data.show_cmd)
app.command("train")(train.train_cmd)
app.command("eval")(train.eval_cmd)
app.command("export")(train.export_cmd)
app.command("ablate")(ablate.ablate_cmd)
app.command("runs")(runs.runs_cmd)
app.command("compare")(runs.compare_cmd)
app.command("plot")(runs.plot_cmd)

def _models() -> Table:
    from relreason.config import paper_recipe
    from relreason.models.catalog import model_rows

    t = Table(title="models")
    for col in ("name", "family", "paper recipe", "description"):
        t.add_column(col)
    for name, family, description in model_rows():
        task = "text:insertion_sort" if family == "text" else "bellman_ford"
        t.add_row(name, family, paper_recipe(name, task), description)
    return t


def _tasks() -> Table:
    from relreason.tasks import TASKS, task_groups

    t = Table(title="tasks and groups (usable wherever a task list is accepted)")
    t.add_column("name")
    t.add_column("tasks")
    for name, members in task_groups().items():
        t.add_row(name, ", ".join(members))
    t.add_row("(single)", ", ".join(TASKS.names()))
    return t


def _recipes() -> Table:
    from relreason.config import RECIPE_DIR, recipe_names

    t = Table(title="recipes")
    t.add_column("name")
    t.add_column("command")
    for name in recipe_names():
        first = (RECIPE_DIR / f"{name}.yaml").read_text().splitlines()[:1]
        t.add_row(name, first[0].lstrip("# ") if first else "")
    return t


def _ablations() -> Table:
    from relreason.ablations import ABLATIONS

    t = Table(title="ablations")
    for col in ("name", "variants", "description"):
        t.add_column(col)
    for name, abl in ABLATIONS.items():
        t.add_row(name, " | ".join(v.label for v in abl.variants), abl.description)
    return t


LISTS = {
    "algorithms": data.list_algorithms_table,
    "models": _models,
    "tasks": _tasks,
    "recipes": _recipes,
    "ablations": _ablations,
}


@app.command("list")
@report_errors
def list_cmd(what: Annotated[str, typer.Argument(help="What to list: " + ", ".join(LISTS))] = "algorithms") -> None:
    """List what is registered: algorithms, models, tasks (and groups), recipes, ablations.

    Examples:\n
      relreason list algorithms\n
      relreason list models\n
      relreason list ablations
    """
    if what not in LISTS:
        raise RelreasonError(f"cannot list {what!r}", "use one of: " + ", ".join(LISTS))
    out.print(LISTS[what]())


def main() -> None:
    app()


if __name__ == "__main__":
    main()
