"""relreason.studies.training: how `reproduce` and `ablate` group their cells into processes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from relreason.errors import RelreasonError
from relreason.studies.training import PACK_SIZE, pack_size


@pytest.mark.parametrize("device", ["cuda", "cpu", "auto"])
def test_pack_auto_trains_one_cell_per_process_on_every_device(device):
    """`--pack auto` packs nowhere: on an H200 a pack of captured cells stalled (docs/gpu.md), so auto keeps the
    path that ran; `--pack on` packs anywhere, `--pack off` never."""
    cells = [SimpleNamespace(config=SimpleNamespace(train=SimpleNamespace(device=device)))]
    assert pack_size("auto", cells) == 0 and pack_size("off", cells) == 0
    assert pack_size("on", cells) == PACK_SIZE and pack_size("on", []) == 0
    with pytest.raises(RelreasonError, match="--pack 'fast' is not one of auto, on, off"):
        pack_size("fast", cells)
