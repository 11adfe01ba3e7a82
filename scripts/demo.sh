#!/usr/bin/env bash
# The main job on a small budget: install, look at the data, train an MPNN on Bellman-Ford with
# the `quick` recipe (a minute or two on a 2-core CPU), then evaluate the newest run out of
# distribution (n = 64, the canonical CLRS-30 test split).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
R=.venv/bin/relreason
$R generate bellman_ford --split test --force
$R show data/bellman_ford/test.safetensors
$R train mpnn bellman_ford --recipe quick
$R eval --ood 64
