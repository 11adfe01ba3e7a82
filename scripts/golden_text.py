"""Digests of the REFERENCE implementation's CLRS-Text streams, for tests/data/test_text.py.

Runs google-deepmind/clrs 2.0.3 (never our code) and writes tests/data/golden_text_digests.json: for
every algorithm and every case below, the sha256 of the first NUM (question, answer) pairs of the
reference's text stream, made exactly as its CLRS-Text generators make them
(clrs/_src/clrs_text/generate_clrs_text.py and huggingface_generators.py):

    sampler, _ = samplers.build_sampler(name, num_samples=-1, seed=seed, length=length,
                                        track_max_steps=False, truncate_decimals=decimals)
    for each example: clrs_utils.format_clrs_example(name, sampler.next(batch_size=1), use_hints=hints)

Cases: lengths 5 and 12 (5: the string matchers' one-symbol needle and tiny graphs; 12: the TransNAR
in-distribution size, two-symbol needles, sorting keys with 3-decimal ties now and then), seeds 0 and 7,
with and without hints, floats truncated to 3 decimals; plus one untruncated stream per algorithm
(length 5, seed 0, no hints: every float printed in full, as numpy prints float64).

Re-run (from the repository root, with the reference's venv; it must never be our venv):

    /work/refenv/bin/pip install tqdm          # imported by clrs_text/__init__; once
    /work/refenv/bin/python scripts/golden_text.py
    /work/refenv/bin/python scripts/golden_text.py --dump /tmp/clrs_text_ref.json --num 50
        # (debugging) also writes the texts themselves, to diff against ours

`import clrs` imports TensorFlow and TensorFlow Datasets (for tf.Tensor checks and the TFDS dataset
builders); neither is used on the text path (samplers, probing, clrs_utils), so when they are not
installed this script puts inert stand-ins in sys.modules before importing clrs.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from unittest import mock

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "golden_text_digests.json"
LENGTHS = (5, 12)
SEEDS = (0, 7)
NUM = 4  # examples per stream: enough to reach every branch of the renderer, cheap for the test
DECIMALS = 3  # the CLRS-Text truncation (huggingface_generators.clrs_generator's default)
# The extra full-precision stream (truncate_decimals=None, the generate_clrs_text.py flag's default).
UNTRUNCATED = {"length": 5, "seed": 0, "hints": False}


def case_name(length: int, seed: int, hints: bool, decimals: int | None) -> str:
    """The key of one stream in the golden file; tests/data/test_text.py parses the same form."""
    return f"n{length}_s{seed}_{'hints' if hints else 'plain'}_d{'full' if decimals is None else decimals}"


def cases() -> list[dict]:
    out = [{"length": n, "seed": s, "hints": h, "decimals": DECIMALS}
           for n in LENGTHS for s in SEEDS for h in (False, True)]
    out.append({**UNTRUNCATED, "decimals": None})
    return out


def digest(pairs: list[tuple[str, str]]) -> str:
    """sha256 of the JSON list of [question, answer] pairs (the same function in the test)."""
    return hashlib.sha256(json.dumps([list(p) for p in pairs]).encode()).hexdigest()[:24]


def _stand_in_tensorflow() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        tf = mock.MagicMock(name="tensorflow")
        tf.Tensor = type("Tensor", (), {})  # probing: isinstance(x, tf.Tensor) must be a real class
        sys.modules["tensorflow"] = tf
    if importlib.util.find_spec("tensorflow_datasets") is None:
        tfds = mock.MagicMock(name="tensorflow_datasets")
        # clrs/_src/dataset.py subclasses these at import time (a dataclass with a `name` field).
        tfds.core.BuilderConfig = dataclasses.dataclass(type("BuilderConfig", (), {"__annotations__": {"name": str},
                                                                                  "name": ""}))
        tfds.core.GeneratorBasedBuilder = type("GeneratorBasedBuilder", (), {})
        sys.modules["tensorflow_datasets"] = tfds


def reference_stream(name: str, length: int, seed: int, hints: bool, decimals: int | None, num: int):
    from clrs._src import samplers
    from clrs._src.clrs_text import clrs_utils

    sampler, _ = samplers.build_sampler(name, num_samples=-1, seed=seed, length=length, track_max_steps=False,
                                        truncate_decimals=decimals)
    return [clrs_utils.format_clrs_example(name, sampler.next(batch_size=1), use_hints=hints) for _ in range(num)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=NUM, help="examples per stream (the golden file uses 4)")
    parser.add_argument("--dump", type=Path, help="also write the texts to this JSON file (debugging)")
    args = parser.parse_args()

    _stand_in_tensorflow()
    import logging

    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.ERROR)
    logging.getLogger("absl").setLevel(logging.ERROR)
    from clrs._src import specs

    names = list(specs.CLRS_30_ALGS)
    digests: dict[str, dict[str, str]] = {}
    texts: dict[str, dict[str, list]] = {}
    for name in names:
        digests[name], texts[name] = {}, {}
        for c in cases():
            pairs = reference_stream(name, c["length"], c["seed"], c["hints"], c["decimals"], args.num)
            key = case_name(c["length"], c["seed"], c["hints"], c["decimals"])
            digests[name][key] = digest(pairs)
            texts[name][key] = pairs
        print(name, file=sys.stderr)
    if args.dump is not None:
        args.dump.write_text(json.dumps(texts))
    if args.num == NUM:
        settings = {"num": NUM, "reference": "google-deepmind/clrs 2.0.3", "script": "scripts/golden_text.py"}
        OUT.write_text(json.dumps({"settings": settings, "digests": digests}, indent=1) + "\n")
        print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
