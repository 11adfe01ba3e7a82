"""For the tests of the compiled (fused) kernels: they must run compiled code, or skip saying why.

`relreason.models.kernels.fused` falls back to the eager kernels for the rest of the process once a
compilation fails, and a test comparing "compiled" with eager then compares eager with eager and
passes. The `compiled_kernels` fixture starts each such test from a clean state (no inherited
fallback), skips it where inductor has no C++ compiler, and `assert_compiled_ran` fails the test when
its compiled calls in fact ran eager.
"""

from __future__ import annotations

import pytest

from relreason.models import kernels


def cpp_compiler() -> str:
    """The C++ compiler inductor would use on this machine ("" when there is none)."""
    try:
        from torch._inductor import cpp_builder

        return cpp_builder.get_cpp_compiler()
    except Exception:  # inductor raises its own InvalidCxxCompiler, or its layout changed: treat as none
        return ""


@pytest.fixture
def compiled_kernels():
    """Resets the fused kernels' fallback state before and after the test; skips without a compiler."""
    if not cpp_compiler():
        pytest.skip("no C++ compiler for torch.compile (inductor): the compiled kernels cannot run here")
    kernels.reset()
    yield
    kernels.reset()


def assert_compiled_ran() -> None:
    """Fails unless `fused` ran compiled code since the last reset and never fell back to eager."""
    assert not kernels.broken(), f"the fused kernels fell back to eager: {kernels.broken()}"
    assert kernels.compiled_calls() > 0, "no fused call ran compiled code"
