"""What every command shares: error reporting, consoles, progress bars, option aliases.

Results go to stdout (`out`), logs, progress and errors to stderr (`err`). A known error
(`RelreasonError`) prints `Error: ...` and `Hint: ...` and exits 1; anything unexpected prints one
line and exits 2, with the traceback only when RELREASON_DEBUG=1.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape

from relreason.errors import RelreasonError
from relreason.runtime import progress  # noqa: F401  (re-exported for the commands)

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def debug() -> bool:
    return os.environ.get("RELREASON_DEBUG", "") not in ("", "0")


def report_errors(fn: Callable) -> Callable:
    """Decorator for commands: known errors become one line + hint and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except RelreasonError as e:
            if debug():
                raise
            err.print(f"[bold red]Error:[/] {escape(e.message)}", highlight=False, markup=True)
            if e.hint:
                err.print(f"[bold]Hint:[/] {escape(e.hint)}", highlight=False)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("Interrupted.")
            raise typer.Exit(130) from None
        except BrokenPipeError:  # `relreason show ... | head`: the reader left; stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except Exception as e:  # noqa: BLE001 - last line of defence: one line, no traceback
            if debug():
                raise
            err.print(f"[bold red]Error:[/] unexpected {type(e).__name__}: {e}", highlight=False, markup=True)
            err.print("[bold]Hint:[/] rerun with RELREASON_DEBUG=1 for the traceback, and please report it")
            raise typer.Exit(2) from None

    return wrapper


# Shared option aliases (one definition, used by every command that takes them).
SeedOpt = Annotated[Optional[int], typer.Option("--seed", help="Random seed.", show_default=False)]
OutDirOpt = Annotated[Path, typer.Option("--out", help="Output directory.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite existing output.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object to stdout instead of tables.")]
