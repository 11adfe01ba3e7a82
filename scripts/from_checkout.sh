#!/usr/bin/env bash
# Runs a Python script with the package of this checkout (PYTHONPATH), from its root, under $PYTHON, else the
# checkout's .venv, else `python`: what the GPU commands (gpu_check.sh, gpu_cells.sh) need on a stock PyTorch
# image without network access.
#   scripts/from_checkout.sh scripts/gpu_check.py --out /tmp/g --device cpu --quick
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python}"
[ -x "$here/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && PY="$here/.venv/bin/python"
cd "$here"
PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" "$@"
