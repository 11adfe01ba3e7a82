#!/usr/bin/env bash
# The full-protocol cells of RESULTS.md, as results/plan.txt plans them: each lane's lines one after another,
# the lanes side by side (one torch thread each: a 2-core machine), resumable: run it again after an
# interruption and every cell continues from its last checkpoint (finished cells are read back, never
# retrained; so are the cells committed under results/, through --committed). A line of two lanes is trained
# by both: each skips the cells whose run lock the other holds. Logs: reproduce/logs/lane<L>.log. Then
# `relreason results` regenerates RESULTS.md, whose "Planned" section says how far each line got.
# Unfinished cells live in reproduce/ (not committed); scripts/park_cells.sh parks them under results/parked/
# at a session's end, and this script restores each parked cell that reproduce/ does not hold yet.
set -uo pipefail
cd "$(dirname "$0")/.."
R=${RELREASON:-.venv/bin/relreason}
PY=${PYTHON:-.venv/bin/python}
PLAN=results/plan.txt
# CPU kernels pinned to AVX2, the level every x86-64 machine seen here has (some have AVX512, one had not): torch's
# results differ in the last bits between kernel levels (scripts/cpu_kernels.py; MKL's level is set too, as a
# precaution), so a cell re-trains bit-exactly (reproduce --verify) only under the kernels that made it, recorded
# in its hardware line. A value set by the caller is kept.
export ATEN_CPU_CAPABILITY=${ATEN_CPU_CAPABILITY-avx2} MKL_ENABLE_INSTRUCTIONS=${MKL_ENABLE_INSTRUCTIONS-AVX2}
mkdir -p reproduce/logs
lanes=$("$PY" -m relreason.studies.plan "$PLAN") || exit 1  # the plan is read (and checked) by relreason itself
for archive in results/parked/*.tar; do
  [ -f "$archive" ] || continue
  rel=$(basename "$archive" .tar | tr "~" /)
  [ -e "reproduce/cells/$rel/run" ] || { tar xf "$archive" -C reproduce && echo "restored $rel"; }
done
# --committed results: the cells finished in results/ (a fresh checkout has no reproduce/) are not trained again
one=(--set train.threads=1 --committed results)
for lane in $lanes; do
  (
    set -f  # no globbing of the plan's words
    "$PY" -m relreason.studies.plan "$PLAN" "$lane" | while read -r line; do
      # shellcheck disable=SC2086  # the plan line's words, as relreason.studies.plan checked them
      $R reproduce $line "${one[@]}" < /dev/null
    done
  ) >> "reproduce/logs/lane$lane.log" 2>&1 &
done
wait
$R results
