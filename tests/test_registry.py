"""The one Registry class: names written once, looked up with a did-you-mean, each with its origin, and
never held twice (in one registry or across registries sharing a namespace). Loading plugins into a
registry is tested in tests/test_plugins.py."""

from __future__ import annotations

import pytest

from relreason.errors import RelreasonError
from relreason.plugins import BUILT_IN
from relreason.registry import NameClash, Registry


def test_register_as_decorator_and_as_call_keeps_order_and_origin():
    reg: Registry[object] = Registry("thing", "relreason list things")

    @reg.register("beta")
    def beta():
        return "b"

    reg.register("alpha", 1)
    assert reg.names() == ["beta", "alpha"] and list(reg) == ["beta", "alpha"] and len(reg) == 2
    assert reg.get("beta") is beta and reg.get("alpha") == 1
    assert reg.items() == [("beta", beta), ("alpha", 1)]
    assert "alpha" in reg and "gamma" not in reg
    assert reg.origin("alpha") is BUILT_IN and str(reg.origin("alpha")) == "built-in"


def test_unknown_names_get_a_did_you_mean_and_the_list_command():
    reg: Registry[int] = Registry("thing", "relreason list things")
    reg.register("bellman_ford", 1)
    with pytest.raises(RelreasonError) as e:
        reg.get("belman_ford")
    assert e.value.message == "unknown thing 'belman_ford'"
    assert e.value.hint == "did you mean 'bellman_ford'?; see `relreason list things`"
    with pytest.raises(RelreasonError, match="unknown thing 'x'"):
        reg.origin("x")
    bare: Registry[int] = Registry("metric")
    bare.register("clrs", 1)
    with pytest.raises(RelreasonError) as e:
        bare.get("zzz")
    assert e.value.hint == "known: clrs"


def test_a_name_is_registered_once():
    reg: Registry[int] = Registry("thing")
    reg.register("a", 1)
    with pytest.raises(NameClash, match=r"thing 'a' is registered twice: first by relreason \(built-in\)"):
        reg.register("a", 2)
    assert reg.get("a") == 1


def test_registries_sharing_a_namespace_never_hold_the_same_name():
    processors: Registry[int] = Registry("model")
    text: Registry[int] = Registry("text model", namespace=processors)
    other: Registry[int] = Registry("algorithm")
    processors.register("mpnn", 1)
    text.register("transnar", 2)
    other.register("mpnn", 3)  # another namespace: no clash
    with pytest.raises(NameClash, match="text model 'mpnn' is registered twice: first as a model"):
        text.register("mpnn", 4)
    with pytest.raises(NameClash, match="model 'transnar' is registered twice: first as a text model"):
        processors.register("transnar", 5)
    assert processors.names() == ["mpnn"] and text.names() == ["transnar"]
