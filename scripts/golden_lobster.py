"""Digests of the lobster splits, for tests/data/test_lobster.py.

Lobsters have no reference implementation to compare with (the RT paper describes the graphs, its
code does not ship a generator), so these digests pin our own generator: a change to the trees, the
weights, the source/target choice, the padding or a split's seed changes a digest and fails the test,
where comparing two calls of the same generator could not. When such a change is intended, re-run
this script and say why in the commit.

Writes tests/data/golden_lobster_digests.json: {"settings": ..., "digests": {task: {case: digest}}},
the digest being relreason.data.store.fingerprint of the split's arrays (sha256 over every array's
name, shape and float64 values), for each task's canonical splits and one custom split.

Re-run (from the repository root):

    .venv/bin/python scripts/golden_lobster.py
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "golden_lobster_digests.json"
TASKS = {"lobster": False, "lobster_weighted": True}  # task -> weighted
CUSTOM = {"size": 50, "num": 5, "seed": 9}  # a custom split: a fixed backbone, its own seed and count


def cases() -> dict[str, dict]:
    """Case name -> lobster_split keyword arguments (tests/data/test_lobster.py reads the same table)."""
    out = {split: {"split": split} for split in ("train", "val", "test")}
    out["custom_n{size}_s{seed}_k{num}".format(**CUSTOM)] = {"split": None, **CUSTOM}
    return out


def digests() -> dict[str, dict[str, str]]:
    from relreason.data.lobster import lobster_split
    from relreason.data.store import fingerprint

    return {task: {case: fingerprint(lobster_split(task, weighted, **kwargs).arrays())
                   for case, kwargs in cases().items()}
            for task, weighted in TASKS.items()}


def main() -> None:
    settings = {"script": "scripts/golden_lobster.py", "digest": "relreason.data.store.fingerprint"}
    OUT.write_text(json.dumps({"settings": settings, "digests": digests()}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
