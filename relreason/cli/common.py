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
import re
import sys
from typing import Annotated, Any, Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape

from relreason.errors import RelreasonError
from relreason.files import escape_markup
from relreason.runtime import progress  # noqa: F401  (re-exported for the commands)
from relreason.runtime import terminate_as_interrupt

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
            with terminate_as_interrupt():  # SIGTERM too ends in "Interrupted." and 130, after the cleanup
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


def refuse_unread(ctx: typer.Context, mode: str, reads: set[str], usage: str) -> None:
    """Raises where the command line gave an option that `mode` (a mode of the command, e.g. "--verify") does
    not read: it would be dropped, silently. `reads`: the flags it reads (as `--name`); `usage`: the mode's
    command line, for the hint. An option given with its default value counts as given."""
    given = [p.opts[0] for p in ctx.command.params if p.opts[0].startswith("--") and p.opts[0] not in reads
             and getattr(ctx.get_parameter_source(p.name), "name", None) in ("COMMANDLINE", "ENVIRONMENT")]
    if given:
        raise RelreasonError(f"{mode} does not read {', '.join(given)}: {'it' if len(given) == 1 else 'they'} "
                             "would be ignored", f"leave {'it' if len(given) == 1 else 'them'} out: {usage}")


# Shared option aliases (one definition, used by every command that takes them).
SeedOpt = Annotated[Optional[int], typer.Option("--seed", help="Training seed (train.seed: initialization, batch "
                                                "order, every noise draw).", show_default="the config's")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite existing output.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object to stdout instead of tables.")]
SEEDS_GRAMMAR = "a count or a list: 3 is seeds 0, 1, 2; 0,4,7 are those seeds; 4-7 a range of them"
SEED_LIMIT = 2**32  # every sampler's RandomState takes 32-bit seeds


def seeds_option(what: str, show_default: str | bool) -> Any:
    """The `--seeds` option of a command (train, ablate, reproduce): text that `parse_seeds` reads, so that
    it means the same everywhere; `what` says what the seeds are for in that command."""
    return Annotated[Optional[str], typer.Option("--seeds", help=f"{what}: {SEEDS_GRAMMAR}.",
                                                 show_default=show_default)]


def parse_seeds(text: str) -> tuple[int, ...]:
    """`--seeds` -> the seeds, in the order given: a count N (a whole number of at least 1) is seeds 0..N-1
    ("3" -> (0, 1, 2)); a comma list of seeds and ranges lo-hi is those seeds ("0,4,7" -> (0, 4, 7),
    "4-6" -> (4, 5, 6)). A one-line error for anything else: a count of 0, a negative seed, a seed listed
    twice, a word."""
    def bad(why: str) -> RelreasonError:
        return RelreasonError(f"--seeds {text!r} {why}", f"give {SEEDS_GRAMMAR}")

    text = text.strip()
    if re.fullmatch(r"-?[0-9]+", text):
        n = int(text)
        if n < 1:
            raise bad("is not a count of seeds: a count is at least 1 (--seeds 1 is seed 0)")
        return tuple(range(n))
    seeds: list[int] = []
    for item in (x.strip() for x in text.split(",")):
        lo, dash, hi = item.partition("-")
        if not re.fullmatch(r"[0-9]+", lo) or (dash and not re.fullmatch(r"[0-9]+", hi)):
            what = "a range lo-hi of seeds" if dash else "a seed (a whole number >= 0)"
            raise bad(f"is not a count or a list of seeds: {item!r} is not {what}")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise bad(f"has a range that ends before it starts ({item!r})")
        seeds.extend(range(first, last + 1))
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise bad(f"lists seed {twice[0]} more than once")
    if max(seeds) >= SEED_LIMIT:
        raise bad(f"has seed {max(seeds)}, above the largest seed {SEED_LIMIT - 1}")
    return tuple(seeds)


MarginOpt = Annotated[Optional[float], typer.Option(
    "--margin", help="Equivalence margin of the verdicts, in the table's unit (percentage points for scores): "
                     "agrees when Welch's 95% interval of the difference lies inside ± it.",
    show_default="the table's own, else 1.0")]
# The sweep options `ablate` and `reproduce` share (one machinery: relreason.studies.sweep.SweepOptions).
RerunStaleOpt = Annotated[bool, typer.Option("--rerun-stale", help="Move cells computed under another "
                                             "configuration aside and train them again.")]
JobsOpt = Annotated[int, typer.Option("--jobs", help="Train this many cells (or seed groups) at once, in worker "
                                      "processes (torch threads: cores / jobs unless train.threads is set).")]
ShardOpt = Annotated[Optional[str], typer.Option("--shard", help="I/K: train only seed groups I, I+K, I+2K, ... "
                                                 "(1-based, group index % K == I-1; with --seed-batch 1 the groups "
                                                 "are the cells), for K machines sharing --out; give every shard the "
                                                 "same --seeds and --seed-batch.", show_default="every cell")]
SeedBatchOpt = Annotated[str, typer.Option("--seed-batch", help="Train the cells of one column and task that differ "
                                           "only in seed as seed groups of up to K seeds, one process each, every cell "
                                           "its own run directory as if trained alone; 1: each cell alone. auto: the "
                                           "seed count up to 4 on a GPU (one vmapped step for the group; expected "
                                           "faster, not yet measured), 1 on CPU (a group buys one process for K cells "
                                           "but measured no faster: reproduce --list).")]
SeedStrategyOpt = Annotated[str, typer.Option("--seed-strategy", help="How a seed group shares its step: auto (vmap "
                                              "where it applies on a GPU, else loop), vmap, loop (each seed's own "
                                              "step, bit for bit its single run).")]
PackOpt = Annotated[str, typer.Option("--pack", help="Train the cells in packs of up to 8 (any columns and tasks) in "
                                      "one process, each its own run directory as if trained alone, their captured "
                                      "steps on separate CUDA streams: on, off, auto (no packs yet: a pack of captured "
                                      "cells stalled on an H200, docs/gpu.md).")]
LauncherOpt = Annotated[str, typer.Option("--launcher", help="Where the cells train: local (here), slurm (one job "
                                          "array through submitit, a seed group per job) or local-submitit (the "
                                          "same jobs as processes here).")]
SlurmOpt = Annotated[Optional[str], typer.Option("--slurm", help="KEY=VALUE,... of each job: partition, time "
                                                 "(minutes or [D-]HH:MM:SS; required for slurm), gpus_per_node, "
                                                 "cpus_per_task, mem_gb, account, qos, constraint, array_parallelism.",
                                                 show_default="the cluster's")]
WaitOpt = Annotated[bool, typer.Option("--wait", help="With a submitit launcher: wait for the jobs to end, then "
                                       "print the tables (fails naming a failed job).")]
StatusOpt = Annotated[bool, typer.Option("--status", help="Train nothing: each cell's status (done, running with "
                                         "its job, partial, missing, stale).")]
