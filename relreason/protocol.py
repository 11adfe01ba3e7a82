"""What a run's protocol is made of, as the configuration names its keys (`section.key`).

It stands below every layer because the whole house reads it: the configuration (how a run departs
from its recipe: `relreason.config.run_deviation`), the study grids (which cells are comparable) and the
run records (which settings to show when runs are compared, `relreason.eval.runs`).
"""

# Keys a run may set without departing from its recipe's protocol: where and how it runs, including
# which kernels compute the same maths (no change to the result beyond float rounding), the seed (one
# draw of the protocol), the NAR a TransNAR reads (an input of the run, which no recipe can name) and
# the tracker its numbers also go to (train.log: a view of metrics.jsonl).
NOT_PROTOCOL_KEYS = ("train.device", "train.threads", "train.eval_batch_size", "data.data_dir", "train.seed",
                     "model.nar", "processor.chunk_mb", "processor.compiled_kernels", "train.log")
