"""Parameter counts of the Relational Transformer authors' own model, the golden values of
tests/models/processors/test_rt.py::test_parameter_counts_equal_the_authors.

Run once, outside our environment, with the CLRS reference venv (it has jax and haiku) on an
unpacked copy of the authors' code (github CameronDiao/relational-transformer, commit 09f6469):

    git --git-dir=<mirror> archive HEAD clrs | tar -x -C /tmp/rtfork
    /work/refenv/bin/python scripts/rt_authors_param_counts.py /tmp/rtfork bellman_ford floyd_warshall

For each algorithm and each (global vector, pointer decoding) setting it builds the authors'
`BaselineModel` exactly as their `clrs/examples/run.py` does with its defaults (rt processor, 12 heads
x 16 = hidden 192, d_nh 32, d_eh1 16, d_eh2 8, 3 layers, hint mode encoded_decoded_nodiff), inits it
on a small batch and prints the total number of parameters as JSON. Their package imports
TensorFlow for type checks and dataset loading only: both are stubbed out, and a few `jax.tree_*`
aliases removed from recent JAX are restored. Our code and tests never import this.
"""

from __future__ import annotations

import json
import sys
import types


def load_authors_code(root: str) -> None:
    fake_tf = types.ModuleType("tensorflow")
    fake_tf.Tensor = type("Tensor", (), {})  # probing.py only uses it in an isinstance check
    sys.modules["tensorflow"] = fake_tf
    package = types.ModuleType("clrs")  # skip clrs/__init__.py: it imports the tfds dataset module
    package.__path__ = [f"{root}/clrs"]
    sys.modules["clrs"] = package
    import jax

    for name in ("tree_map", "tree_leaves", "tree_flatten", "tree_unflatten"):
        if not hasattr(jax, name):
            setattr(jax, name, getattr(jax.tree_util, name))


def count(algorithm: str, graph_vec: str, ptr_from_edges: bool) -> int:
    import jax
    from clrs._src import baselines, processors, samplers

    sampler, spec = samplers.build_sampler(algorithm, seed=1, num_samples=4, length=8)
    factory = processors.get_processor_factory("rt", use_ln=True, nb_layers=3, nb_heads=12, node_hid_size=32,
                                               edge_hid_size_1=16, edge_hid_size_2=8, graph_vec=graph_vec,
                                               disable_edge_updates=False)
    model = baselines.BaselineModel(spec=spec, dummy_trajectory=sampler.next(), processor_factory=factory,
                                    hidden_dim=12 * 16, encode_hints=True, decode_hints=True, decode_diffs=False,
                                    ptr_from_edges=ptr_from_edges, use_lstm=False, learning_rate=2.5e-4,
                                    dropout_prob=0.0, hint_teacher_forcing_noise=0.5)
    model.init(sampler.next(1).features, 43)
    return int(sum(x.size for x in jax.tree_util.tree_leaves(model.params)))


def main(argv: list[str]) -> None:
    root, algorithms = argv[0], argv[1:]
    load_authors_code(root)
    counts = {f"{alg}/{gv}/{'edge' if edge else 'node'}": count(alg, gv, edge)
              for alg in algorithms for gv in ("cat", "core") for edge in (True, False)}
    print(json.dumps(counts, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
