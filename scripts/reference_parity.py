"""The REFERENCE implementation's networks on one small batch per algorithm, for
tests/models/test_reference_parity.py: the same network, weights and batch must give our code the same training
loss, gradients, update and evaluation outputs.

Runs google-deepmind/clrs 2.0.3 (never our code) and writes tests/data/reference_parity/<processor>/<algorithm>.npz.
For each algorithm it builds the model exactly as clrs/examples/run.py does with its defaults
(processor triplet_gmpnn, or --processor mpnn, pgn, pgn_mask or deepsets; use_ln, 8 triplet features, hints
encoded and decoded, xavier_on_scalars, soft hint re-prediction, no teacher forcing, no dropout, Adam at 1e-3
after clipping the global norm at 1.0), only narrower (hidden 8, so that the file stays small), draws a batch of
4 graphs of 8 nodes from the algorithm's own sampler (`build_sampler` with run.py's sampler arguments; the string
matchers at run.py's 20 nodes), puts it through run.py's processing (random `pos`, pred_h as input where run.py
moves it, permutation pointers), inits the model on it (seed 42) and records:

- `param/<module>/<name>`: the initial weights (Haiku's names, [in, out] matrices);
- `input.X`, `hint.X` (laid out [B, T, ...], the reference's are [T, B, ...]), `output.X`, `lengths`: the batch
  BEFORE run.py's processing (the layout of our stored splits, in float32 as both networks read it), and `pos`:
  the random positions run.py's processing then drew;
- `loss`: BaselineModel._loss, the training forward (repred False); `grad/<module>/<name>`: its gradient;
- `after/<module>/<name>`: the weights after one `BaselineModel.feedback` (the training step: clip, Adam);
- `eval/<output>`: the raw output logits of the evaluation forward (repred True) before any post-processing;
- `score/<output>` and `score/score`: what run.py's collect_and_eval scores on this batch (BaselineModel.predict's
  hard predictions, `clrs.evaluate`): the metric of every validation and test.

Training adds Gumbel noise to permutation-pointer logits (decoders.log_sinkhorn, from Haiku's key sequence);
both sides take it out here (this script patches log_sinkhorn's key to None, the test patches our draw to 0) so
that the comparison is exact; the noise itself is a draw, not a computation to compare.

Re-run (from the repository root, with the reference's venv; it must never be our venv):

    python -m venv /work/refenv && /work/refenv/bin/pip install dm-clrs==2.0.3
    /work/refenv/bin/python scripts/reference_parity.py                 # Triplet-GMPNN, all 30 algorithms
    /work/refenv/bin/python scripts/reference_parity.py --processor mpnn --algorithms bellman_ford,insertion_sort
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "reference_parity"
HIDDEN, BATCH, NODES, INIT_SEED, DATA_SEED = 8, 4, 8, 42, 7
PROCESSORS = ("triplet_gmpnn", "mpnn", "pgn", "pgn_mask", "deepsets")  # the PGN family: one layout of Linears
STRING_MATCHERS = ("naive_string_matcher", "kmp_matcher")
SPARSER = ("articulation_points", "bridges", "mst_kruskal", "bipartite_matching")  # run.py halves their p


def one_batch(clrs, algorithm: str):
    """(raw feedback, processed feedback, processed spec): run.py's make_sampler for one batch."""
    from clrs.examples import run

    p = tuple(0.1 + 0.1 * i for i in range(9))  # run.py's sampler_kwargs, for every algorithm
    kwargs = {"p": tuple(np.array(p) / 2) if algorithm in SPARSER else p, "length_needle": -8}
    # the string matchers as run.py trains them: haystack and needle 5/4 of its largest size (16), a needle of up
    # to 8 (one of 8 nodes in all leaves no room for it)
    length = (16 * 5) // 4 if algorithm in STRING_MATCHERS else NODES
    sampler, spec = clrs.build_sampler(algorithm, seed=DATA_SEED, num_samples=BATCH, length=length, **kwargs)
    raw = sampler.next(BATCH)

    def once():
        yield raw

    rng = np.random.RandomState(DATA_SEED)
    it = clrs.process_random_pos(once(), rng)
    if algorithm in run.PRED_AS_INPUT_ALGOS:
        spec, it = clrs.process_pred_as_input(spec, it)
    spec, it = clrs.process_permutations(spec, it, True)
    return raw, next(it), spec


def record(algorithm: str, processor: str) -> dict[str, np.ndarray]:
    import clrs
    import jax

    raw, fb, spec = one_batch(clrs, algorithm)
    factory = clrs.get_processor_factory(processor, use_ln=True, nb_triplet_fts=8, nb_heads=1)
    model = clrs.models.BaselineModel(
        spec=[spec], dummy_trajectory=[fb], processor_factory=factory, hidden_dim=HIDDEN, encode_hints=True,
        decode_hints=True, encoder_init="xavier_on_scalars", use_lstm=False, learning_rate=1e-3,
        grad_clip_max_norm=1.0, checkpoint_path="/tmp/reference_parity", freeze_processor=False, dropout_prob=0.0,
        hint_teacher_forcing=0.0, hint_repred_mode="soft", nb_msg_passing_steps=1)
    model.init([fb.features], INIT_SEED)
    out: dict[str, np.ndarray] = {}
    for module, params in model.params.items():
        for name, value in params.items():
            out[f"param/{module}/{name}"] = np.asarray(value)
    data = functools.partial(np.asarray, dtype=np.float32)  # what the network reads (JAX computes in float32)
    for dp in raw.features.inputs:
        out[f"input.{dp.name}"] = data(dp.data)
    for dp in raw.features.hints:
        out[f"hint.{dp.name}"] = np.swapaxes(data(dp.data), 0, 1)  # [T, B, ...] -> [B, T, ...]
    for dp in raw.outputs:
        out[f"output.{dp.name}"] = data(dp.data)
    out["lengths"] = np.asarray(raw.features.lengths, dtype=np.int64)
    out["pos"] = data(next(dp.data for dp in fb.features.inputs if dp.name == "pos"))
    key = jax.random.PRNGKey(0)
    loss, grads = jax.value_and_grad(model._loss)(model.params, key, fb, 0)
    out["loss"] = np.asarray(loss)
    for module, params in grads.items():
        for name, value in params.items():
            out[f"grad/{module}/{name}"] = np.asarray(value)
    outputs, _ = model.net_fn.apply(model.params, key, [fb.features], repred=True, algorithm_index=0,
                                    return_hints=True, return_all_outputs=False)
    for name, value in outputs.items():
        out[f"eval/{name}"] = np.asarray(value)
    predictions, _ = model.predict(key, fb.features)  # run.py's collect_and_eval, on this one batch
    for name, value in clrs.evaluate(fb.outputs, predictions).items():
        out[f"score/{name}"] = np.asarray(float(value))
    model.feedback(key, fb)
    for module, params in model.params.items():
        for name, value in params.items():
            out[f"after/{module}/{name}"] = np.asarray(value)
    return out


def without_gumbel_noise() -> None:
    """Training's Gumbel noise on permutation-pointer logits taken out (module docstring)."""
    from clrs._src import decoders

    noisy = decoders.log_sinkhorn

    def log_sinkhorn(x, steps, temperature, zero_diagonal, noise_rng_key):
        return noisy(x, steps, temperature, zero_diagonal, None)

    decoders.log_sinkhorn = log_sinkhorn


def main() -> None:
    import clrs

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algorithms", default=",".join(clrs.CLRS_30_ALGS_SETTINGS),
                   help="comma-separated (default: all 30)")
    p.add_argument("--processor", default="triplet_gmpnn", choices=PROCESSORS, help="the reference's processor")
    args = p.parse_args()
    without_gumbel_noise()
    out = OUT / args.processor
    out.mkdir(parents=True, exist_ok=True)
    for algorithm in args.algorithms.split(","):
        arrays = record(algorithm, args.processor)
        tmp = out / f".{algorithm}.npz.tmp"
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)
        tmp.replace(out / f"{algorithm}.npz")
        print(f"{algorithm}: loss {float(arrays['loss']):.6f}, {sum(a.size for a in arrays.values())} numbers")


if __name__ == "__main__":
    main()
