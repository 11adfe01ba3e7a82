#!/usr/bin/env bash
# The main job on a small budget: install, look at the data, train an MPNN on Bellman-Ford with the
# `quick` recipe for two seeds (a minute or two each on a 2-core CPU), evaluate the newest run out of
# distribution (n = 64, the canonical CLRS-30 test split), then list, compare and plot the runs, and
# list the published tables `relreason reproduce` knows.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
R=.venv/bin/relreason
OUT=runs/demo  # the demo's own runs, made afresh each time
rm -rf "$OUT"
$R generate bellman_ford --split test --force
$R show data/bellman_ford/test.safetensors
for seed in 1 2; do
  $R train mpnn bellman_ford --recipe quick --seed "$seed" --out "$OUT"
done
$R eval --ood 64 --runs "$OUT"
$R runs "$OUT"
$R compare --runs "$OUT"
$R plot --runs "$OUT" --out "$OUT/curves.png"
$R reproduce --list   # the published tables relreason runs at their papers' protocols, with measured costs
