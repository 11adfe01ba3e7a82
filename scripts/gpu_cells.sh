#!/usr/bin/env bash
# Minutes of GPU turned into finished cells (issue 38): the next unfinished cells of results/plan.txt trained one
# at a time (--pack-size K packs them; a pack stalled on the H200, docs/gpu.md) for at most --minutes, every
# unfinished cell parked, and at most 8 files of at most 16 MB written to OUT
# (results.tar to extract into results/, gpu_cells.json / .md / .log). --measure first measures packing (K packed
# cells against one captured cell, TF32 off and on). Needs a stock PyTorch + CUDA image and this checkout, no
# network; runs the package from the checkout (PYTHONPATH).
# The training runs in a watched child process: one stuck past --minutes + --grace (60 s), or for --stall seconds,
# is stopped, its threads' stacks written to gpu_cells.log; after a stall the next --fallback rung trains the same
# cells for the minutes left, and what was trained is parked all the same.
#   scripts/gpu_cells.sh /tmp/gc --minutes 7.5            # on a CUDA machine: 9 minutes at most, inside a 10-minute run
#   tar xf /tmp/gc/results.tar -C results                 # then commit results/ (and delete the finished parked tars)
#   scripts/gpu_cells.sh /tmp/gc --device cpu --quick     # the CPU smoke test (tests/test_gpu_cells.py)
set -euo pipefail
out="${1:?usage: scripts/gpu_cells.sh OUT_DIR [--minutes M] [--measure] [--device cpu] [--quick]}"
shift
mkdir -p "$out"
out="$(cd "$out" && pwd)"  # the script runs from the checkout's root
exec "$(dirname "$0")/from_checkout.sh" scripts/gpu_cells.py --out "$out" "$@"
