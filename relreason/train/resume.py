"""Resuming a run: which configuration it continues with, and which changes a resume may make.

    cfg = resume_config(Path("runs/demo"), ["train.train_examples=2000"])   # --resume --set ...
    run(cfg, out=Path("runs"), name="demo", resume=True)

A run's stored configuration (its last checkpoint's) is the truth; what the command asks is layered over
it (relreason.config's layers) only where a resume may change it (RESUMABLE_KEYS, and LOWERABLE_KEYS
lowered), and every other change is refused with the keys named. The session (relreason.train.session)
checks the same rules again when it opens the run directory.
"""

from __future__ import annotations

from pathlib import Path

from relreason.config import (PAPER, Config, Layer, build_config, paper_recipe, parse_overrides, recipe_deviation,
                              recipe_names, resolve)
from relreason.errors import RelreasonError
from relreason.protocol import LOWERABLE_KEYS, RESUMABLE_KEYS  # each key's rules: relreason.protocol.KEY_RULES
from relreason.rundir import RunDir, RunRecord, read_run_record
from relreason.train import checkpoint as ckpt



def resume_refusals(changed: dict[str, tuple]) -> dict[str, tuple]:
    """The changes of `changed` ({key: (old, new)}) that a resume may not make."""
    return {k: (old, new) for k, (old, new) in changed.items() if k not in RESUMABLE_KEYS
            and not (k in LOWERABLE_KEYS and isinstance(old, (int, float)) and isinstance(new, (int, float))
                     and new < old)}


def lowered_deviation(changed: dict[str, tuple], examples: int) -> list[str]:
    """The deviation a resume's lowered keys make: "train.lr lowered from 0.1 to 0.001 at 320 examples"."""
    return [f"{k} lowered from {old} to {new} at {examples} examples (on resume)"
            for k, (old, new) in sorted(changed.items()) if k in LOWERABLE_KEYS]


def config_diff(a: Config, b: Config) -> dict[str, tuple]:
    """{"section.key": (a's value, b's value)} for every key that differs."""
    da, db = a.to_dict(), b.to_dict()
    out = {}
    for key in ("model_name", "task"):
        if da[key] != db[key]:
            out[key] = (da[key], db[key])
    for section in set(da) | set(db):
        if not isinstance(da.get(section), dict) and not isinstance(db.get(section), dict):
            continue
        sa, sb = da.get(section) or {}, db.get(section) or {}
        for k in set(sa) | set(sb):
            if sa.get(k) != sb.get(k):
                out[f"{section}.{k}"] = (sa.get(k), sb.get(k))
    return out


def stored_config(run_dir: Path, warn: bool = True) -> Config:
    """The configuration a run was started with (from its last checkpoint); `warn`: name a plugin installed
    at another version than the run's (checkpoint.load_config)."""
    last = RunDir(run_dir).last
    ckpt.recover(last.path)
    if not last.trainer_state.exists():
        raise RelreasonError(f"nothing to resume in {run_dir}", "start it without --resume")
    return ckpt.load_config(last.path, warn)


def resume_config(run_dir: Path, overrides: list[str], recipe: str | None = None) -> Config:
    """The config to resume a run with: its stored config (the truth: the run's recipe is never looked
    up again by its label, so a recipe file moved or deleted since does not matter), with what the
    command asks applied only where it may change on resume (RESUMABLE_KEYS).

    Without `recipe`, `overrides` (`--set` items) apply over the stored config. With `recipe` (a name
    or a YAML path), the command's configuration is resolved afresh (recipe, then `overrides`) and
    compared with the stored one, so re-running a run's own command with --resume is accepted.

    Raises:
        RelreasonError: the command asks for another value of a key outside RESUMABLE_KEYS (all such
            keys named), or there is nothing to resume.
    """
    stored = stored_config(run_dir)
    plain = stored.to_dict()
    base = [Layer("stored", {s: plain[s] for s in stored.sections()})]
    if recipe is None:
        asked = resolve(stored.model_name, stored.task, base + [Layer("--set", parse_overrides(overrides))],
                        stored.recipe)
    else:
        asked = build_config(stored.model_name, stored.task, recipe, overrides)
    changed = config_diff(stored, asked)
    bad = resume_refusals(changed)
    if bad:
        shown = ", ".join(f"{k}={new!r} (the run has {old!r})" for k, (old, new) in sorted(bad.items()))
        what = "drop --recipe (the run keeps its own) or those --set options" if recipe is not None else \
            "drop those options"
        raise RelreasonError(f"--resume continues the run as it was configured; it cannot change {shown}",
                             f"{what}, or start a new run; only {', '.join(RESUMABLE_KEYS)} may change, and "
                             f"{', '.join(LOWERABLE_KEYS)} may be lowered")
    delta: dict = {}
    for key, (_, new) in changed.items():
        section, name = key.split(".")
        delta.setdefault(section, {})[name] = new
    cfg = resolve(stored.model_name, stored.task, base + [Layer("on resume", delta)], stored.recipe)
    record = _stored_record(run_dir)
    cfg.sources = dict(record.sources) if record is not None and record.sources is not None else stored.sources
    for key in changed:
        cfg.sources[key] = f"{asked.sources.get(key, 'default')} (on resume)"
    recorded = record is not None and "deviation" in record.recorded
    cfg.deviation = record.deviation if recorded else _legacy_deviation(stored)
    return cfg


def _stored_record(run_dir: Path) -> RunRecord | None:
    """The run's config.json as written when it started (sources, recipe deviation, command); None if
    unreadable (the checkpoint's config is the truth; this adds only what it lacks)."""
    try:
        return read_run_record(run_dir)
    except RelreasonError:
        return None


def _legacy_deviation(stored: Config) -> str | None:
    """The recipe's deviation for a run whose config.json predates recording it: read from the recipe
    its label names, when that is still a recipe of this installation (such runs could only have
    trained with a recipe name); None otherwise."""
    name = paper_recipe(stored.model_name, stored.task) if stored.recipe == PAPER else stored.recipe
    return recipe_deviation(name) if name in recipe_names() else None


__all__ = ["RESUMABLE_KEYS", "LOWERABLE_KEYS", "resume_refusals", "lowered_deviation", "config_diff",
           "stored_config", "resume_config"]
