"""What every command shares: error reporting, consoles, progress bars, option aliases.

Results go to stdout (`out`), logs, progress and errors to stderr (`err`). Exit codes:
- 0: done;
- 1: the command failed: a known error (`RelreasonError`), a file-system error (`OSError`: not a
  directory, permission denied, read-only, disk full, ...) or an unexpected one; each prints one
  `Error: ...` line and one `Hint: ...` line, with the traceback only when RELREASON_DEBUG=1;
- 2: the command line is wrong (unknown command or option, missing argument, a value of the wrong
  type): `Error: ...` and `Hint: ...` too, nothing ran (see `relreason.cli.main.main`);
- 130: interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import errno
import functools
import json as _json
import math
import os
import sys
from typing import Annotated, Any, Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape

from relreason.errors import RelreasonError
from relreason.files import escape_markup
from relreason.runtime import progress  # noqa: F401  (re-exported for the commands)

EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130
# Piped or redirected stdout has no width to respect: tables take their natural width, so no name is
# folded or cut (rich would otherwise assume 80 columns). On a terminal rich follows its width.
PIPE_WIDTH = 100_000


class _Stdout(Console):
    """The results console. rich answers a closed pipe by exiting with status 1 itself
    (Console.on_broken_pipe); raising BrokenPipeError instead lets `report_errors` end the command
    quietly with status 0, as `relreason show FILE | head -1` should."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    def print_json(self, json: Optional[str] = None, *, data: Any = None, **options) -> None:
        """Prints JSON that is JSON: NaN and infinities (which Python's encoder writes as NaN, Infinity)
        become null, so every `--json` output parses with any reader."""
        if json is not None:
            data = _json.loads(json)
        super().print_json(data=finite_json(data), **{**options, "allow_nan": False})


def finite_json(value: Any) -> Any:
    """`value` (JSON data) with every NaN or infinite float replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


out = _Stdout(soft_wrap=True, width=None if sys.stdout.isatty() else PIPE_WIDTH)
err = Console(stderr=True, soft_wrap=True)


def debug() -> bool:
    return os.environ.get("RELREASON_DEBUG", "") not in ("", "0")


def print_error(message: str, hint: str | None) -> None:
    """The one format of every error: `Error: message` and, when there is one, `Hint: hint`."""
    err.print(f"[bold red]Error:[/] {escape_markup(message)}", highlight=False)  # control characters too
    if hint:
        err.print(f"[bold]Hint:[/] {escape_markup(hint)}", highlight=False)


# What to do about a file-system error, by errno (the message comes from the OS).
_OS_HINTS = {
    errno.EACCES: "check the permissions of the path and its directories (ls -l), or choose another location",
    errno.EPERM: "check the permissions of the path and its directories (ls -l), or choose another location",
    errno.EROFS: "the file system is read-only: choose a writable location (e.g. --out DIR)",
    errno.ENOSPC: "the disk is full: free some space or choose another location (e.g. --out DIR)",
    errno.EDQUOT: "the disk quota is exhausted: free some space or choose another location (e.g. --out DIR)",
    errno.ENOTDIR: "a part of the path is a file, not a directory: choose another path",
    errno.EISDIR: "the path is a directory: give a file",
    errno.ENOENT: "check the path",
    errno.EEXIST: "remove it or choose another path",
}


def describe_os_error(e: OSError) -> tuple[str, str]:
    """(message, hint) for a file-system error: what failed on which path, and what would help."""
    what = (e.strerror or str(e) or type(e).__name__).rstrip(".")
    what = what[:1].lower() + what[1:]
    paths = [str(p) for p in (e.filename, e.filename2) if p is not None]
    message = f"{what}: {' -> '.join(paths)}" if paths else what
    return message, _OS_HINTS.get(e.errno, "check the path, its permissions and the free disk space")


def report_errors(fn: Callable) -> Callable:
    """Decorator for commands: errors become one line + hint and an exit code (module docstring)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except RelreasonError as e:
            if debug():
                raise
            print_error(e.message, e.hint)
            raise typer.Exit(EXIT_ERROR) from None
        except KeyboardInterrupt:
            err.print("Interrupted.")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:  # `relreason show ... | head`: the reader left; stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except OSError as e:
            if debug():
                raise
            print_error(*describe_os_error(e))
            raise typer.Exit(EXIT_ERROR) from None
        except Exception as e:  # noqa: BLE001 - last line of defence: one line, no traceback
            if debug():
                raise
            print_error(f"unexpected {type(e).__name__}: {e}",
                        "rerun with RELREASON_DEBUG=1 for the traceback, and please report it")
            raise typer.Exit(EXIT_ERROR) from None

    return wrapper


# Shared option aliases (one definition, used by every command that takes them).
SeedOpt = Annotated[Optional[int], typer.Option("--seed", help="Training seed (train.seed: initialization, batch "
                                                "order, every noise draw).", show_default="the config's")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite existing output.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object to stdout instead of tables.")]
MarginOpt = Annotated[Optional[float], typer.Option(
    "--margin", help="Equivalence margin of the verdicts, in the table's unit (percentage points for scores): "
                     "agrees when Welch's 95% interval of the difference lies inside ± it.",
    show_default="the table's own, else 1.0")]
