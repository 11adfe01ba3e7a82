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
# A headless Chromium for tests/test_report_page.py (`relreason report`'s page rendered in a real browser; the
# test skips, naming why, where there is none): installed where it is missing and apt-get exists (CI's machine
# included). Never a reason for this script to fail (no apt-get, no root, no network: a note, and the test skips).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then SUDO="sudo -n"; else SUDO="none"; fi
  fi
  if [ "$SUDO" = "none" ]; then
    echo "setup.sh: chromium not installed (apt-get needs root); the browser test will skip" >&2
  elif ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } \
      >/dev/null 2>&1; then
    echo "setup.sh: chromium not installed (apt-get unavailable or failed); the browser test will skip" >&2
  fi
fi
