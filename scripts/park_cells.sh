#!/usr/bin/env bash
# Parks the unfinished cells of reproduce/ in the repository, so that a later session (whose work tree is laid
# anew, without reproduce/) resumes them instead of starting over: each cell with a checkpoint but no
# results.json becomes results/parked/<model>~<setting>~<task>~<seed>.tar (its run directory without the
# lock); a parked cell that has finished since is removed. scripts/reproduce_results.sh restores the parked
# cells before it resumes. Run it after stopping the lanes (SIGTERM checkpoints them), then commit results/.
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE=${1:-reproduce}
mkdir -p results/parked
for run in "$SOURCE"/cells/*/*/*/seed*/run; do
  [ -d "$run" ] || continue
  rel=${run#"$SOURCE"/cells/}; rel=${rel%/run}
  archive="results/parked/$(echo "$rel" | tr / "~").tar"
  if [ -f "$run/results.json" ]; then
    rm -f "$archive"
  elif [ -f "$run/last/trainer_state.json" ]; then
    tar cf "$archive.tmp" --exclude=.lock -C "$SOURCE" "cells/$rel/run" && mv "$archive.tmp" "$archive"
    echo "parked $rel ($(du -h "$archive" | cut -f1))"
  fi
done
