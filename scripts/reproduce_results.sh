#!/usr/bin/env bash
# The full-protocol cells of RESULTS.md, in two lanes (one torch thread each: a 2-core machine), resumable:
# run it again after an interruption and every cell continues from its last checkpoint (finished cells
# are read back, never retrained; so are the cells committed under results/, through --committed).
# Logs: reproduce/logs/. Then `relreason results` regenerates RESULTS.md.
# The order is issue 30's: first the cells its protocol changes made stale (the reference's data order
# for clrs30, the reference's validation for triplet_gmpnn), then Triplet-GMPNN on the RT paper's core 8,
# then the dijkstra cells, then the RT's 3 seeds; issue 31's three processors after Triplet-GMPNN's bellman_ford.
#   lane 1: MPNN (CLRS-30 paper, its sequential data order) on bellman_ford x 3, on dijkstra x 3; then the RT
#           (authors' protocol, fixed data order) on bellman_ford x 3 (~3.6 h of one core each)
#   lane 2: Triplet-GMPNN (Ibarz, resampled validation) on bellman_ford x 3; FloydNet, RNAR and G-ForgetNet
#           (issue 31, Triplet-GMPNN's protocol) on bellman_ford x 1; Triplet-GMPNN on the core 8 x 3, on dijkstra x 3
# Unfinished cells live in reproduce/ (not committed); scripts/park_cells.sh parks them under results/parked/
# at a session's end, and this script restores each parked cell that reproduce/ does not hold yet.
set -uo pipefail
cd "$(dirname "$0")/.."
R=${RELREASON:-.venv/bin/relreason}
mkdir -p reproduce/logs
for archive in results/parked/*.tar; do
  [ -f "$archive" ] || continue
  rel=$(basename "$archive" .tar | tr "~" /)
  [ -e "reproduce/cells/$rel/run" ] || { tar xf "$archive" -C reproduce && echo "restored $rel"; }
done
# --committed results: the cells finished in results/ (a fresh checkout has no reproduce/) are not trained again
one=(--set train.threads=1 --committed results)
(
  $R reproduce clrs30 --models mpnn --tasks bellman_ford --seeds 3 "${one[@]}"
  $R reproduce clrs30 --models mpnn --tasks dijkstra --seeds 3 "${one[@]}"
  $R reproduce rt-table19 --models rt --tasks bellman_ford --seeds 3 "${one[@]}"
) >> reproduce/logs/lane1.log 2>&1 &
(
  $R reproduce ibarz2022 --tasks bellman_ford --seeds 3 "${one[@]}"
  $R reproduce new-processors --tasks bellman_ford --seeds 1 "${one[@]}"
  $R reproduce ibarz2022 --tasks core8 --seeds 3 "${one[@]}"
  $R reproduce ibarz2022 --tasks dijkstra --seeds 3 "${one[@]}"
) >> reproduce/logs/lane2.log 2>&1 &
wait
$R results
