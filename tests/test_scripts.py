"""Every script under scripts/ still loads against today's package: a module that moved (train/loop's split)
must not leave a benchmark that fails at its first line. Each is imported in this process (its `main` guarded
by `__name__`), which runs its imports; only the scripts that read the reference (JAX, for golden figures
computed once) may lack it here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
REFERENCE_ONLY = {"jax", "tensorflow", "clrs", "haiku"}  # what only the golden-figure scripts import


@pytest.mark.parametrize("path", sorted(SCRIPTS.glob("*.py")), ids=lambda p: p.name)
def test_the_script_loads(path, monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # the scripts import their siblings so
    spec = importlib.util.spec_from_file_location(f"_script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as a script's own __main__ is (dataclasses look their module up)
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as e:
        if e.name.split(".")[0] not in REFERENCE_ONLY:
            raise
        pytest.skip(f"{path.name} reads the reference ({e.name}), not installed here")
    finally:
        sys.modules.pop(spec.name, None)


def test_the_torch_release_venv_refuses_what_is_not_a_release_before_making_anything(tmp_path):
    """scripts/torch_release_venv.sh (a virtualenv with another torch release, for --verify): a version that is not
    a release is a one-line error, exit 2, and no virtualenv is made (its install needs the package index)."""
    import subprocess

    res = subprocess.run([str(SCRIPTS / "torch_release_venv.sh"), "2.11.0; rm -rf /", str(tmp_path / "venv")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip() == "Error: 2.11.0; rm -rf / is not a torch release (e.g. 2.11.0)"
    assert not (tmp_path / "venv").exists()
