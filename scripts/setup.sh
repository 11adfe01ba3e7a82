#!/usr/bin/env bash
# Creates .venv (when missing) and installs relreason with its extras (dev, plot, tensorboard, hf, pyg, slurm, wandb)
# into it, so that the tests of every optional tracker, exporter and launcher run (CI runs this script).
# torch is installed first and pinned: a bare `pip install torch` pulls a multi-GB CUDA build,
# while torch==2.13.0 takes the CPU build. Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[dev,plot,tensorboard,hf,pyg,slurm,wandb]"
