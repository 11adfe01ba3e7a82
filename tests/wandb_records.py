"""Reading what an offline W&B run wrote (`WANDB_MODE=offline`): its `run-<id>.wandb` transaction log.

wandb >= 0.18 no longer ships a Python reader of that file (wandb.sdk.internal.datastore is gone; the Go
`wandb-core` writes and syncs it), and syncing needs a server. The file is LevelDB's log format with a
W&B header: ":W&B", the magic 0xBEE1 and a version byte, then 32 KiB blocks of chunks (CRC-32C, length,
type FULL/FIRST/MIDDLE/LAST), each record a `wandb_internal_pb2.Record` protobuf, parsed here with
wandb's own protobuf classes. So the tests read exactly what `wandb sync` would send.

    runs = offline_runs(wandb_dir)   # one per session, in the order they ran
    runs[0].id, runs[0].group, runs[0].config, runs[0].history   # history: [{"_step": 4, "train/loss": ...}]
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list:
    """Every record of a .wandb file, as wandb_internal_pb2.Record."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:7] == HEADER, f"{path} is not a W&B transaction log"
    out, pos, pending = [], 7, b""
    while pos + 7 <= len(data):
        room = BLOCK - pos % BLOCK
        if room < 7:  # a block's tail too short for a chunk header is padding
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:  # zero padding at the end of a block
            pos += room
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


@dataclass
class OfflineRun:
    id: str = ""
    project: str = ""
    group: str = ""
    job_type: str = ""
    name: str = ""
    config: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)


def read_run(path: Path) -> OfflineRun:
    run = OfflineRun()
    for r in records(path):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            run.id, run.project, run.group = r.run.run_id, r.run.project, r.run.run_group
            run.job_type, run.name = r.run.job_type, r.run.display_name
            run.config.update(_config(r.run.config))
        elif kind == "config":
            run.config.update(_config(r.config))
        elif kind == "history":
            row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
            if r.history.HasField("step"):
                row["_step"] = r.history.step.num
            run.history.append(row)
    return run


def _config(config) -> dict:
    return {item.key: json.loads(item.value_json) for item in config.update if item.key != "_wandb"}


def offline_runs(wandb_dir: Path) -> list[OfflineRun]:
    """The offline runs under WANDB_DIR (its wandb/offline-run-<time>-<id>[-k] folders), oldest first.

    The `wandb-core` process writes the files, after `finish()` has returned: `wandb.teardown()` first
    waits for it to end, so every file is whole."""
    import wandb

    wandb.teardown()
    files = sorted(Path(wandb_dir).glob("wandb/offline-run-*/run-*.wandb"), key=lambda p: p.stat().st_mtime_ns)
    return [read_run(f) for f in files]


def series(runs: list[OfflineRun], key: str) -> list[tuple[int, float]]:
    """(step, value) of `key` over every session of the runs, in the order they were logged."""
    return [(row["_step"], row[key]) for run in runs for row in run.history if key in row]
