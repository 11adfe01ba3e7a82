"""A run trained again under the CPU kernels that made it: `reproduce --verify`'s re-training.

    how = retrain(cfg, Path("work"), "verify", kernels="AVX2", log=print)   # work/verify; how: in words

A CPU run re-trains bit-exactly only under the vector instructions its kernels used (torch's DEFAULT, AVX2
and AVX512 kernels round otherwise: 20 Triplet-GMPNN updates already end at three different weights,
scripts/cpu_kernels.py), and that level is chosen once per process, when torch first computes. So where a cell's first session
recorded other kernels than this process's (relreason.runtime.cpu_kernels) and this machine can run
them (a lower level: relreason.runtime.kernels_environment), the run is trained in a child process
under them (`python -m relreason.studies.retrain CONFIG OUT NAME`); elsewhere in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from relreason.data.store import owned_temporary
from relreason.errors import RelreasonError
from relreason.runtime import cpu_kernels, kernels_environment, kernels_hint


def retrain(cfg, out: Path, name: str, kernels: str | None, log=lambda m: None) -> str:
    """Trains `cfg` into `out`/`name` (no progress bars), under `kernels` (the CPU kernels the run's first
    session recorded; None: unrecorded) where they are not this process's and this machine can run them,
    else here. Returns how the kernels went, in words: "" (here's kernels), or the note a verdict carries.

    Raises:
        RelreasonError: the child process failed (its last line of output says why)."""
    here = cpu_kernels()
    env = kernels_environment(kernels) if kernels is not None and kernels != here else None
    if env is None:
        from relreason.train import run  # CLI start-up: torch loads on use

        run(cfg, out=Path(out), name=name, show_progress=False, log=log)
        if kernels is None or kernels == here:
            return ""
        return (f"made with {kernels} CPU kernels, here {here}, which cannot run them: bit-exact only with the same "
                f"kernels (to verify it, {kernels_hint(kernels)})")
    log(f"re-training under {kernels} CPU kernels, as made (here {here}): in a child process")
    Path(out).mkdir(parents=True, exist_ok=True)
    with owned_temporary(Path(out), f".{name}.config.", ".json.tmp") as config, tempfile.TemporaryFile("w+") as err:
        config.write_text(json.dumps(cfg.to_dict()))
        with subprocess.Popen([sys.executable, "-u", "-m", "relreason.studies.retrain", str(config), str(out), name],
                              env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=err, text=True) as child:
            for line in child.stdout:  # the training's log lines, as they come
                log(line.rstrip("\n"))
        err.seek(0)
        last = (err.read().strip().splitlines() or ["(no output)"])[-1]
    if child.returncode != 0:
        raise RelreasonError(f"the re-training under {kernels} CPU kernels failed: {last}",
                             "run it again with RELREASON_DEBUG=1 for the child's traceback")
    return f"re-trained under the {kernels} CPU kernels it was made with (here {here}; {', '.join(env)} set)"


def _main(argv: list[str]) -> int:
    """The child: `CONFIG OUT NAME` trains the config (a JSON file of Config.to_dict) into OUT/NAME."""
    from relreason.config import config_from_dict  # the child process only
    from relreason.train import run  # CLI start-up: torch loads on use

    config, out, name = argv
    cfg = config_from_dict(json.loads(Path(config).read_text()))
    try:
        run(cfg, out=Path(out), name=name, show_progress=False, log=print)
    except RelreasonError as e:
        if os.environ.get("RELREASON_DEBUG", "") not in ("", "0"):
            raise
        print(e, file=sys.stderr)  # the parent raises it as its own one-line error
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
