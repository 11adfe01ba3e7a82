#!/usr/bin/env bash
# The full-protocol cells of RESULTS.md, in two lanes (one torch thread each: a 2-core machine), resumable:
# run it again after an interruption and every cell continues from its last checkpoint (finished cells
# are read back, never retrained). Logs: reproduce/logs/. Then `relreason results` regenerates RESULTS.md.
#   lane 1: the RT at its authors' protocol on bellman_ford (~3.6 h of one core), then MPNN (CLRS-30 paper)
#           on dijkstra x 3 seeds (beside Triplet-GMPNN's dijkstra)
#   lane 2: Triplet-GMPNN (Ibarz) x 3 seeds, MPNN (CLRS-30 paper) x 3 seeds, the ET (Mueller) x 1 seed, then
#           Triplet-GMPNN on dijkstra x 3 seeds (a second task)
set -uo pipefail
cd "$(dirname "$0")/.."
R=.venv/bin/relreason
mkdir -p reproduce/logs
one=(--set train.threads=1)
(
  $R reproduce rt-table19 --models rt --tasks bellman_ford --seeds 1 "${one[@]}"
  $R reproduce clrs30 --models mpnn --tasks dijkstra --seeds 3 "${one[@]}"
) >> reproduce/logs/lane1.log 2>&1 &
(
  $R reproduce ibarz2022 --tasks bellman_ford --seeds 3 "${one[@]}"
  $R reproduce clrs30 --models mpnn --tasks bellman_ford --seeds 3 "${one[@]}"
  $R reproduce mueller2024 --tasks bellman_ford --seeds 1 "${one[@]}"
  $R reproduce ibarz2022 --tasks dijkstra --seeds 3 "${one[@]}"
) >> reproduce/logs/lane2.log 2>&1 &
wait
$R results
