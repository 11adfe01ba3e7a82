#!/usr/bin/env bash
# A virtualenv with another torch release, for `reproduce --verify` of cells made under it: torch 2.11.0 and
# 2.13.0 draw other initial weights from one seed (docs/reproducing.md), so a cell made under the GPU image's
# 2.11.0 re-trains only under 2.11.0. Installs that release (from the package index: a CUDA build, several GB;
# it computes on the CPU all the same) and relreason's other dependencies, never relreason itself: run the
# checkout with PYTHONPATH, as the printed command does. Not the setup (scripts/setup.sh pins 2.13.0, the CPU build).
#   scripts/torch_release_venv.sh 2.11.0              # into /tmp/torch-2.11.0
#   PYTHONPATH=. /tmp/torch-2.11.0/bin/python -m relreason reproduce ibarz2022 --models triplet_gmpnn \
#       --tasks insertion_sort --seeds 1 --verify --verify-validations 2
set -euo pipefail
version="${1:?usage: scripts/torch_release_venv.sh TORCH_VERSION [DIR]  (e.g. 2.11.0)}"
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]]; then
  echo "Error: $version is not a torch release (e.g. 2.11.0)" >&2
  exit 2
fi
dir="${2:-/tmp/torch-$version}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x "$dir/bin/python" ] || "$PY" -m venv "$dir"
"$dir/bin/python" -m pip install --quiet "torch==$version"
# relreason's dependencies as pyproject.toml lists them, torch left out (installed above)
mapfile -t deps < <("$dir/bin/python" - <<'EOF'
import re, tomllib
for dep in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    if re.split(r"[<>=!~ ;\[]", dep, maxsplit=1)[0].strip().lower() != "torch":
        print(dep)
EOF
)
"$dir/bin/python" -m pip install --quiet "${deps[@]}"
echo "torch $("$dir/bin/python" -c 'import torch; print(torch.__version__)') in $dir; run the checkout with:"
echo "  PYTHONPATH=$(pwd) $dir/bin/python -m relreason reproduce TABLE ... --verify"
