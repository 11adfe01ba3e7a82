#!/usr/bin/env bash
# "Nothing changes for users": runs a fixed set of CLI commands (help of every command, `list`, data
# generation, a tiny training, eval, runs, compare, export, ablate/reproduce listings) in a scratch
# directory and writes their stdout+stderr and exit codes to OUT, with wall times and paths masked.
# Run it on two checkouts and diff the two OUT folders:
#   scripts/cli_snapshot.sh /tmp/before     # on the old checkout (its own .venv)
#   scripts/cli_snapshot.sh /tmp/after      # on the new one
#   diff -r /tmp/before /tmp/after
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"
R="$ROOT/.venv/bin/relreason"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export RELREASON_DATA="$WORK/data" COLUMNS=120 NO_COLOR=1
i=0
run() {  # run NAME ARGS...: one command's output, masked, into OUT/NN-NAME.txt
  local name=$1; shift
  i=$((i + 1))
  local f; f=$(printf "%s/%02d-%s.txt" "$OUT" "$i" "$name")
  { "$R" "$@" 2>&1; echo "exit $?"; } | sed -E \
    -e "s#$WORK#WORK#g" -e "s#$ROOT#ROOT#g" \
    -e 's/[0-9]+(\.[0-9]+)? ?(s|ms|min|h)\b/T/g' -e 's/[0-9]+:[0-9]{2}(:[0-9]{2})?/T/g' \
    -e 's/[0-9.]+ ?(it|ex|examples)\/s/R/g' -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+/DATE/g' \
    -e 's/ [0-9]+ ?(s|min|h|d) ago/ AGO/g' >"$f"
}
run help --help
for c in generate show train eval export ablate reproduce results runs compare plot list; do
  run "help-$c" "$c" --help
done
run list list
for k in algorithms models recipes ablations tasks; do run "list-$k" list "$k"; done
run print-config train rt bellman_ford --print-config
run print-config-mpnn train mpnn bfs --recipe clrs30 --print-config
run generate generate bfs --split test --num 4 --out "$WORK/bfs_test"
run train train mpnn bfs --recipe quick --set train.train_examples=64 --set train.eval_every_examples=32 \
  --set data.val_num=4 --set data.test_num=4 --set train.threads=1 --out "$WORK/runs" --name r
run eval eval "$WORK/runs/r" --json
run eval-ood eval "$WORK/runs/r" --ood 20
run runs runs "$WORK/runs"
run compare compare "$WORK/runs/r"
run ablate-list ablate --help
run list-json list models --json
run reproduce-list reproduce --list
run bad-size generate bfs --split test --size 0
echo "wrote $i outputs to $OUT"
