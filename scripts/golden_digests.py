"""Digests of the REFERENCE implementation's CLRS-30 splits, for tests/data/test_faithfulness.py.

Runs google-deepmind/clrs 2.0.3 (never our code) and writes tests/data/golden_digests.json:
{algorithm: {split: digest}} for the 30 algorithms and the train, val and test splits, each split
made exactly as the reference's dataset builder makes it (clrs/_src/dataset.py, CLRSDataset._create_data):

    sampler, _ = samplers.build_sampler(name, seed=CLRS30[split]["seed"], num_samples=num,
                                        length=CLRS30[split]["length"])
    feedback = sampler.next(batch_size=None)     # the whole split, hints padded to its longest trajectory

with num = CLRS30[split]["num_samples"], times CLRS_30_ALGS_SETTINGS[name]["num_samples_multiplier"]
for val and test. The digest is the one relreason.data.store.fingerprint computes, rewritten here so
that no line of ours runs: sha256 over the arrays in name order (`input.NAME`, `hint.NAME`,
`output.NAME`, `lengths`), each as its name, its shape and its values as contiguous float64, hints
laid out [B, T, ...] (the reference's are [T, B, ...]); the first 20 hex digits.

Re-run (from the repository root, with the reference's venv; it must never be our venv):

    python -m venv /work/refenv && /work/refenv/bin/pip install dm-clrs==2.0.3 tqdm
    /work/refenv/bin/python scripts/golden_digests.py
    /work/refenv/bin/python scripts/golden_digests.py --algorithms bfs,insertion_sort --check
        # recompute some and compare with the file, writing nothing

`--v1` writes tests/data/golden_digests_v1.json instead: the splits of the algorithms whose data changed after
CLRS v1.0.0 (the CLRS30 v1.0.0 dataset): the string matchers (a needle of n // 4 on top of a haystack of n, 80
nodes at n = 64; `data.matcher_v1_splits`) and quickselect (no `pivot` hint; `model.drop_hints`). Only
`clrs/_src` of the v1.0.0 tag is needed (its samplers import jax, chex, attr):

    python -m venv /tmp/refv1 && /tmp/refv1/bin/pip install numpy==1.26.4 jax==0.4.30 jaxlib==0.4.30 chex==0.1.86 attrs absl-py
    git -C CLRS_CHECKOUT archive v1.0.0 clrs/_src | tar x -C /tmp/clrsv1
    PYTHONPATH=/tmp/clrsv1 /tmp/refv1/bin/python scripts/golden_digests.py --v1

`import clrs` imports TensorFlow and TensorFlow Datasets, which the samplers never use; where they are
not installed the stand-ins of scripts/golden_text.py take their place.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_text import _stand_in_tensorflow  # noqa: E402  (the same stand-ins as the CLRS-Text goldens)

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "golden_digests.json"
OUT_V1 = OUT.with_name("golden_digests_v1.json")
SPLITS = ("train", "val", "test")
V1_ALGORITHMS = ("naive_string_matcher", "kmp_matcher", "quickselect")  # data changed after v1.0.0 (2df2d48 and after)


def digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 of every array's name, shape and float64 values, in name order (relreason's `fingerprint`)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(np.asarray(arrays[name], dtype=np.float64))
        h.update(name.encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:20]


def reference_split(name: str, split: str) -> dict[str, np.ndarray]:
    """The reference's canonical `split` of algorithm `name`, by our storage names (hints [B, T, ...])."""
    from clrs._src import samplers, specs

    setting = samplers.CLRS30[split]
    num = setting["num_samples"]
    if split != "train":  # more samples where an algorithm's outputs carry few signals (dataset.py)
        num *= specs.CLRS_30_ALGS_SETTINGS[name]["num_samples_multiplier"]
    sampler, _ = samplers.build_sampler(name, seed=setting["seed"], num_samples=num, length=setting["length"])
    feedback = sampler.next(batch_size=None)
    arrays = {f"input.{dp.name}": dp.data for dp in feedback.features.inputs}
    arrays.update({f"hint.{dp.name}": np.swapaxes(dp.data, 0, 1) for dp in feedback.features.hints})
    arrays.update({f"output.{dp.name}": dp.data for dp in feedback.outputs})
    arrays["lengths"] = feedback.features.lengths
    return arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", help="comma-separated subset (default: all 30; writing needs all 30)")
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    parser.add_argument("--v1", action="store_true", help="the clrs on the path is v1.0.0: the string matchers' "
                                                         "digests, into golden_digests_v1.json")
    args = parser.parse_args()

    _stand_in_tensorflow()
    import logging

    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.ERROR)
    logging.getLogger("absl").setLevel(logging.ERROR)
    import inspect

    from clrs._src import samplers, specs

    v1_source = "length // 4" in inspect.getsource(samplers.MatcherSampler._sample_data)  # v1's needle
    if args.v1 != v1_source:
        sys.exit("--v1 needs CLRS v1.0.0's clrs/_src on the path" if args.v1 else
                 f"the clrs at {samplers.__file__} is v1.0.0: pass --v1, or put clrs 2.0.3 on the path")
    out = OUT_V1 if args.v1 else OUT
    every = list(V1_ALGORITHMS) if args.v1 else list(specs.CLRS_30_ALGS)
    names = args.algorithms.split(",") if args.algorithms else every
    unknown = set(names) - set(every)
    if unknown:
        sys.exit(f"not {'of ' + ', '.join(V1_ALGORITHMS) if args.v1 else 'CLRS-30 algorithms'}: {', '.join(sorted(unknown))}")
    digests = {}
    for name in names:
        digests[name] = {split: digest(reference_split(name, split)) for split in SPLITS}
        print(name, digests[name], file=sys.stderr)
    if args.check:
        recorded = json.loads(out.read_text())
        wrong = [f"{n}/{s}" for n in names for s in SPLITS if recorded.get(n, {}).get(s) != digests[n][s]]
        print("all equal" if not wrong else "differ: " + ", ".join(wrong))
        sys.exit(1 if wrong else 0)
    if set(names) != set(every):
        sys.exit(f"writing the golden file needs all {len(every)} algorithms (drop --algorithms, or add --check)")
    out.write_text(json.dumps(digests, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
