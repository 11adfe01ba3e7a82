"""Evaluation memory: the RT at the lobster_rt recipe's width on backbone-100 lobsters stays within
the memory budget of the auto-sized evaluation batch (`relreason.train.workloads._pick_batch`).

`relreason train rt lobster --recipe lobster_rt` was once killed by the OOM killer in its final
test (24 GB resident at backbone 100): the test batch was not sized to the memory. Here a child
process sees 1.5 GiB of available memory (`relreason.runtime.available_memory` replaced), builds the
recipe's RT, and evaluates four backbone-100 test graphs with the batch picked automatically.
The picker may give one batch's activations EVAL_MEMORY_FRACTION (a quarter) of the available
memory, so the bound is: peak RSS during evaluation - RSS before it <= 0.25 x 1.5 GiB = 384 MiB.
The peak is the evaluation's own: the child resets the kernel's high-water mark (VmHWM, by writing 5
to /proc/self/clear_refs) once the data and the model are built, so growth in evaluation cannot hide
under the earlier peak of generating the data (ru_maxrss, the process's lifetime peak, would let it).
Measured (2-core CPU, width 224, 30 layers, graphs padded to 125 nodes): about 140 MiB per graph
evaluated at once, so the picked batch of one takes ~140 MiB, while the four graphs in one batch
(what a fixed batch size of 4 or more does) take ~560 MiB and break the bound.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

AVAILABLE = 1.5 * 2**30  # what the child believes it may use
FRACTION = 0.25  # relreason.train.workloads.EVAL_MEMORY_FRACTION (checked in the child)

CHILD = """
import json, re, resource, sys
import torch
import relreason.runtime
relreason.runtime.available_memory = lambda: int({available})
from relreason.config import build_config
from relreason.train import workloads


def status(key):  # bytes, from /proc/self/status
    return int(re.search(key + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024


def reset_peak():  # VmHWM := VmRSS (Linux >= 4.0); False where the kernel does not support it
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return status("VmHWM") <= status("VmRSS") + 2**20


torch.set_num_threads(1)
cfg = build_config("rt", "lobster", "lobster_rt", ["data.test_num=4", "data.data_dir={data}", "train.device=cpu"])
wl = workloads.build_workload(cfg, torch.device("cpu"))
ds = wl.dataset(0, "test")
lifetime_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
reset = reset_peak()
before = status("VmRSS")
res = wl.evaluate("test")
peak = status("VmHWM")
print(json.dumps({{"reset": reset, "before": before, "peak": peak, "lifetime_before": lifetime_before,
                  "lifetime_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "label": res["label"], "score": res["score"],
                  "hidden": cfg.model.hidden, "fraction": workloads.EVAL_MEMORY_FRACTION,
                  "batch": workloads._pick_batch(None, cfg.train.eval_batch_size, wl.built.net("lobster"), ds)}}))
"""


@pytest.mark.slow
def test_lobster_backbone_100_test_batch_fits_the_memory_budget(tmp_path):
    code = CHILD.format(available=AVAILABLE, data=tmp_path / "data")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    if not got["reset"]:
        pytest.skip("this kernel cannot reset the peak RSS (/proc/self/clear_refs): evaluation's own peak is unmeasurable")
    assert got["fraction"] == FRACTION
    assert "backbone 100" in got["label"] and "4 samples" in got["label"]
    grown = got["peak"] - got["before"]
    assert grown <= FRACTION * AVAILABLE, (
        f"evaluating took {grown / 2**20:.0f} MiB beyond the {got['before'] / 2**20:.0f} MiB before it, "
        f"over the picker's budget of {FRACTION * AVAILABLE / 2**20:.0f} MiB (batch {got['batch']})")
