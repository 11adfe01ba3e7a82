"""The `relreason` command: one Typer app, one module per group of commands."""

from __future__ import annotations

from typing import Annotated

import typer

from relreason.cli import data
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

LISTS = {
    "algorithms": lambda: data.list_algorithms_table(),
}


@app.command("list")
@report_errors
def list_cmd(what: Annotated[str, typer.Argument(help="What to list: " + ", ".join(LISTS))] = "algorithms") -> None:
    """List registered algorithms (and, as they arrive, models, ablations, recipes).

    Examples:\n
      relreason list algorithms
    """
    if what not in LISTS:
        raise RelreasonError(f"cannot list {what!r}", "use one of: " + ", ".join(LISTS))
    out.print(LISTS[what]())


def main() -> None:
    app()


if __name__ == "__main__":
    main()
