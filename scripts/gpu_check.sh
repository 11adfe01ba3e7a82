#!/usr/bin/env bash
# The GPU path in one command (issue 29): CUDA against CPU for every processor, train.cuda_graph against the
# uncaptured step, seed groups K = 1, 4, 16 at the RT protocol and MPNN batch 32, bf16 autocast, a run end to end. Needs a stock
# PyTorch + CUDA image and this checkout, no network; runs the package from the checkout (PYTHONPATH).
#   scripts/gpu_check.sh results/gpu                 # on a CUDA machine (184 s on one H200, results/gpu/)
#   scripts/gpu_check.sh /tmp/g --device cpu --quick # the CPU smoke test (tests/test_gpu_check.py)
set -euo pipefail
out="${1:?usage: scripts/gpu_check.sh OUT_DIR [--device cpu] [--quick] [--steps N]}"
shift
mkdir -p "$out"
exec "$(dirname "$0")/from_checkout.sh" scripts/gpu_check.py --out "$out" --data-dir "$out/data" "$@"
