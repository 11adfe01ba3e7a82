#!/usr/bin/env bash
# The test command: installs into .venv (see setup.sh), then runs the whole suite, slow
# learning tests included. Extra arguments go to pytest (e.g. `scripts/test.sh -m "not slow"`).
# Two worker processes (pytest-xdist): every test runs one torch thread (tests/conftest.py), so a single
# pytest process keeps one core busy. On this 2-core machine (2026-11-27) two workers ran the suite (3,514 tests)
# in 6 min 39 s, quiet; earlier, in one process, 2,980 tests took 13 min 37 s (two workers: 8 min 3 s).
# Later arguments win: `scripts/test.sh -n 0` runs in one process, `-n 4` suits a bigger machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -n 2 "$@"
