#!/usr/bin/env bash
# The test command: installs into .venv (see setup.sh), then runs the whole suite, slow
# learning tests included. Extra arguments go to pytest (e.g. `scripts/test.sh -m "not slow"`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
