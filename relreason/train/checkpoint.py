"""Checkpoints: a directory with `model.safetensors`, `config.json`, and for resuming
`optimizer.safetensors` + `trainer_state.json`.

config.json records, under `plugins`, which installed plugin (distribution and version) the model
and each algorithm came from, built-ins left out:

    "plugins": [{"kind": "model", "name": "max_gnn", "distribution": "relreason-example-plugin", "version": "0.1.0"}]

Loading a checkpoint whose plugin is not installed fails with one line naming that plugin.

Weights are never pickled. The whole directory is written under a temporary name and swapped in,
so a run killed at any moment leaves either the previous checkpoint or the new one, never a mix.
It gets the permissions the user's umask gives new directories and files. Loading is strict and
names missing or unexpected keys; an unreadable file is reported as such, never as corrupt.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from relreason import __version__
from relreason.config import Config, config_from_dict
from relreason.data.store import current_umask, owner_tag, remove_stale_temporaries
from relreason.errors import RelreasonError, write_error
from relreason.rundir import (CHECKPOINT_CONFIG, OPTIMIZER, OPTIMIZER_META, TRAINER_STATE, WEIGHTS, TrainerState,
                              old_checkpoint, read_object)
from relreason.plugins import Origin, plugin_version_changes, require_plugins

FORMAT = 1  # bump when the checkpoint layout changes incompatibly


def _state_for_safetensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Contiguous CPU copies; tensors sharing storage (tied layers) are cloned to separate ones."""
    return {k: v.detach().to("cpu").contiguous().clone() for k, v in state.items()}


def _flatten_optimizer(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    sd = opt.state_dict()
    tensors, scalars = {}, {}
    for pid, st in sd["state"].items():
        for key, val in st.items():
            if torch.is_tensor(val):
                tensors[f"{pid}.{key}"] = val.detach().to("cpu").contiguous().clone()
            else:
                scalars[f"{pid}.{key}"] = val
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state: dict[int, dict] = {}
    for name, val in tensors.items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = val
    for name, val in meta["scalars"].items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = val
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(path: Path, model: torch.nn.Module, cfg: Config, spec_hash: str, extra: dict | None = None,
                    optimizer: torch.optim.Optimizer | None = None, trainer_state: dict | None = None) -> Path:
    """Writes a checkpoint directory atomically (temp dir + rename).

    Raises:
        RelreasonError: it could not be written (a full disk, a read-only file system: the path and the
            cause); the previous checkpoint is left as it was and nothing half-written remains."""
    path = Path(path)
    try:
        return _save_checkpoint(path, model, cfg, spec_hash, extra, optimizer, trainer_state)
    except (OSError, SafetensorError) as e:
        raise write_error(path, e) from None


def _save_checkpoint(path: Path, model: torch.nn.Module, cfg: Config, spec_hash: str, extra: dict | None,
                     optimizer: torch.optim.Optimizer | None, trainer_state: dict | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)  # of a writer killed before its rename
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{owner_tag()}.", suffix=".tmp", dir=path.parent))
    try:
        save_file(_state_for_safetensors(model.state_dict()), tmp / WEIGHTS)
        meta = {"format": FORMAT, "relreason": __version__, "spec_hash": spec_hash, "config": cfg.to_dict(),
                "plugins": plugin_record(cfg), **(extra or {})}
        (tmp / CHECKPOINT_CONFIG).write_text(json.dumps(meta, indent=2))
        if optimizer is not None:
            tensors, opt_meta = _flatten_optimizer(optimizer)
            save_file(tensors, tmp / OPTIMIZER)
            (tmp / OPTIMIZER_META).write_text(json.dumps(opt_meta))
        if trainer_state is not None:
            (tmp / TRAINER_STATE).write_text(json.dumps(trainer_state, indent=2))
        umask = current_umask()  # mkdtemp makes 0700 and safetensors writes 0600: give the usual modes
        for f in tmp.iterdir():
            os.chmod(f, 0o666 & ~umask)
        os.chmod(tmp, 0o777 & ~umask)
        old = None
        if path.exists() or path.is_symlink():
            old = old_checkpoint(path)
            _remove(old)
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            _remove(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def _remove(path: Path, ignore_errors: bool = False) -> None:
    """Removes a checkpoint directory; a link in its place is unlinked, never followed."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=ignore_errors)


def recover(path: Path) -> None:
    """If a kill struck between the two renames of `save_checkpoint`, put the old checkpoint back."""
    path = Path(path)
    old = old_checkpoint(path)
    if not path.exists() and old.exists():
        os.replace(old, path)


def read_checkpoint_meta(path: Path) -> dict:
    path = Path(path)
    recover(path)
    cfg_file = path / CHECKPOINT_CONFIG
    try:
        text = cfg_file.read_text()
    except PermissionError:
        raise RelreasonError(f"cannot read {cfg_file}: permission denied",
                             "check the permissions of the checkpoint and its directories (ls -l)") from None
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise RelreasonError(f"{path} is not a checkpoint (no config.json)",
                             "give a run directory (runs/NAME) or a checkpoint directory (runs/NAME/best)") from None
    try:
        meta = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RelreasonError(f"{cfg_file} is corrupt", "use another checkpoint, e.g. best/ or last/") from None
    if not isinstance(meta, dict):
        raise RelreasonError(f"{cfg_file} is corrupt: not a JSON object", "use another checkpoint, e.g. best/ or last/")
    if meta.get("format") != FORMAT:
        raise RelreasonError(f"{path} has checkpoint format {meta.get('format')!r}, this relreason reads {FORMAT}",
                             f"evaluate it with the relreason version that wrote it ({meta.get('relreason')})")
    return meta


def load_config(path: Path, warn: bool = True) -> Config:
    """The config a checkpoint stores, once the plugins it needs are found installed; a plugin installed at
    another version than the one that made it is named in one warning line (`warn`), as it may compute
    otherwise (`plugin_changes` says it to callers that refuse instead)."""
    meta = read_checkpoint_meta(path)
    require_plugins(meta.get("plugins", []), str(path), _origin_here)
    changed = plugin_changes(meta.get("plugins"))
    if warn and changed:
        print(f"relreason: warning: {path} was made with the plugin {', '.join(changed)}; its results may not be "
              f"what the installed version computes", file=sys.stderr)
    stored, file = meta.get("config"), Path(path) / CHECKPOINT_CONFIG
    hint = "the checkpoint is damaged: use another one (best/ or last/), or train the run again"
    if not isinstance(stored, dict) or not all(isinstance(stored.get(k), str) for k in ("model_name", "task")):
        raise RelreasonError(f"{file}: field 'config' must be a JSON object naming model_name and task", hint)
    try:
        return config_from_dict(stored)
    except RelreasonError as e:
        raise RelreasonError(f"{file}: {e.message}", hint) from None


def plugin_changes(record: list[dict] | None) -> list[str]:
    """The plugins of a run's record installed here at another version (relreason.plugins.plugin_version_changes)."""
    return plugin_version_changes(record, _origin_here)


def plugin_record(cfg: Config) -> list[dict]:
    """The plugins that a run's model (and a TransNAR's NAR) and its tasks' algorithms come from:
    [{"kind": "model" | "algorithm", "name", "distribution", "version"}], built-ins left out."""
    from relreason.data.algorithms import ALGORITHMS
    from relreason.models.catalog import model_origin
    from relreason.tasks import task_entries

    models = [cfg.model_name]
    nar = getattr(cfg.model, "nar_config", None)
    if nar is not None:
        models.append(nar["config"]["model_name"])
    algorithms = dict.fromkeys(t.algorithm for t in task_entries(cfg.task) if t.algorithm is not None)
    named = [("model", m, model_origin(m)) for m in models] + [("algorithm", a, ALGORITHMS.origin(a))
                                                                for a in algorithms]
    return [{"kind": kind, "name": name, **origin.record()} for kind, name, origin in named if not origin.built_in]


def _origin_here(kind: str, name: str) -> Origin | None:
    """Where the model or algorithm `name` comes from in this installation; None when it is unknown."""
    from relreason.data.algorithms import ALGORITHMS
    from relreason.models.catalog import model_names, model_origin

    if kind == "model":
        return model_origin(name) if name in model_names() else None
    return ALGORITHMS.origin(name) if name in ALGORITHMS else None


def load_weights(path: Path, model: torch.nn.Module) -> None:
    """Loads model.safetensors strictly into `model`, naming missing/unexpected keys."""
    file = Path(path) / WEIGHTS
    state = read_weights(path)
    own = model.state_dict()
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise RelreasonError(f"{file} does not fit this model: missing {missing[:5]}, unexpected {unexpected[:5]}",
                             "was it written for another model or task?")
    bad = [k for k in own if own[k].shape != state[k].shape]
    if bad:
        raise RelreasonError(f"{file} does not fit this model: shape mismatch in {bad[:5]}",
                             "was it written with another configuration?")
    model.load_state_dict(state, strict=True)


def init_source(target: str | Path) -> Path:
    """The checkpoint directory `train.init` names: a run directory's best/, else the directory itself (a
    checkpoint, an `export` bundle or an `export --hub` folder). Raises RelreasonError when there is none."""
    from relreason.rundir import RunDir

    path = Path(target)
    if not path.is_dir():
        raise RelreasonError(f"--init {target}: {'no such directory' if not path.exists() else 'not a directory'}",
                             "give a run directory (runs/NAME), a checkpoint or an exported folder")
    best = RunDir(path).best
    return best.path if best.config.is_file() else path


def load_init(target: str | Path, cfg: Config, model: torch.nn.Module) -> Path:
    """Loads the weights of the checkpoint `target` (init_source) strictly into `model`, a new run of `cfg`:
    the source must be the same model on tasks of the same shape (its stored config names them; its
    plugins must be installed), and every tensor must fit. Returns the checkpoint read.

    Raises:
        RelreasonError: one line naming --init and what does not fit (model, tasks, keys or shapes)."""
    path = init_source(target)
    try:
        stored = load_config(path)
        if stored.model_name != cfg.model_name:
            raise RelreasonError(f"it holds a {stored.model_name} model, this run trains {cfg.model_name}",
                                 f"fine-tune it as {stored.model_name}, or give a {cfg.model_name} checkpoint")
        load_weights(path, model)
    except RelreasonError as e:
        raise RelreasonError(f"--init {target}: {e.message}", e.hint) from None
    return path


def check_finite(tensors: dict[str, torch.Tensor], file: Path) -> None:
    """Refuses weights (or optimizer moments) holding NaN or infinity: training never saves such a
    tensor (a non-finite loss stops it before the update), so the file is damaged."""
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise RelreasonError(f"{file} is damaged: tensor {bad[0]} holds NaN or infinite values"
                             + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""),
                             "use another checkpoint (best/ or last/), or train the run again")


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint's model.safetensors, checked readable and finite (RelreasonError)."""
    file = Path(path) / WEIGHTS
    _check_readable(file, "the checkpoint is incomplete; use another one")
    try:
        state = load_file(str(file))
    except (SafetensorError, OSError) as e:
        raise RelreasonError(f"{file} is corrupt: {e}", "use another checkpoint (best/ or last/)") from None
    check_finite(state, file)
    return state


def verify_checkpoint(path: Path) -> Config:
    """A checkpoint directory whose config.json reads back as a valid config and whose weights load and
    are finite (what `export` checks before copying); returns the config. Raises RelreasonError."""
    cfg = load_config(path)
    read_weights(path)
    return cfg


def _check_readable(file: Path, hint_missing: str) -> None:
    """Raises a RelreasonError naming the problem when `file` cannot be opened for reading, so that
    the safetensors reader's failures afterwards really mean a damaged file."""
    try:
        with open(file, "rb"):
            pass
    except PermissionError:
        raise RelreasonError(f"cannot read {file}: permission denied",
                             "check the permissions of the checkpoint and its directories (ls -l)") from None
    except (FileNotFoundError, NotADirectoryError):
        raise RelreasonError(f"{file} does not exist", hint_missing) from None
    except IsADirectoryError:
        raise RelreasonError(f"{file} is a directory, not a weights file", hint_missing) from None


def load_optimizer(path: Path, optimizer: torch.optim.Optimizer) -> None:
    """Loads optimizer.safetensors + optimizer.json into `optimizer`; a file that does not read back as
    this optimizer's state (its parameter groups, finite moments) is a one-line RelreasonError."""
    path = Path(path)
    for name in (OPTIMIZER, OPTIMIZER_META):
        _check_readable(path / name, "start a new run without --resume")
    try:
        tensors = load_file(str(path / OPTIMIZER))
        meta = json.loads((path / OPTIMIZER_META).read_text())
    except (SafetensorError, OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RelreasonError(f"cannot resume from {path}: optimizer state unreadable ({e})",
                             "start a new run without --resume") from None
    meta_file = path / OPTIMIZER_META
    hint = "the checkpoint is damaged: start a new run without --resume"
    if not isinstance(meta, dict) or not isinstance(meta.get("scalars"), dict):
        raise RelreasonError(f"{meta_file}: field 'scalars' must be a JSON object", hint)
    groups = meta.get("param_groups")
    want = len(optimizer.param_groups)
    if not isinstance(groups, list) or len(groups) != want or not all(isinstance(g, dict) for g in groups):
        raise RelreasonError(f"{meta_file}: field 'param_groups' must be a list of {want} parameter group(s), "
                             f"not {json.dumps(groups)[:40]}", hint)
    check_finite(tensors, path / OPTIMIZER)
    try:
        optimizer.load_state_dict(_unflatten_optimizer(tensors, meta))
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise RelreasonError(f"{meta_file} does not fit this model's optimizer: {e}", hint) from None


def load_trainer_state(path: Path) -> dict:
    """The loop's counters in the checkpoint `path`, validated (relreason.rundir.TrainerState): a
    missing, ill-typed or out-of-range field is a one-line RelreasonError naming the file and field."""
    file = Path(path) / TRAINER_STATE
    _check_readable(file, "start a new run without --resume")
    hint = "the checkpoint is damaged: restore it, or start a new run without --resume"
    return TrainerState.from_dict(read_object(file, hint), str(file)).to_dict()
