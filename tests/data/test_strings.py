"""String matchers against independent references: match positions by str.find, the naive matcher's
trace by a textbook loop, the KMP failure function and automaton states by brute-force borders, plus
hand-traced tiny examples and the sampler's draw order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relreason.data import generate, run_algorithm
from relreason.data.algorithms.strings import kmp_matcher, naive_string_matcher, sample_matcher
from relreason.data.samplers import RandomState
from relreason.errors import RelreasonError

MATCHERS = {"naive_string_matcher": naive_string_matcher, "kmp_matcher": kmp_matcher}


def first_match(T, P) -> int:
    """Start of P's first occurrence in T (|T| if none), by str.find."""
    at = "".join("ACGT"[c] for c in T).find("".join("ACGT"[c] for c in P))
    return len(T) if at < 0 else at


def border(word) -> int:
    """Length of the longest proper border (a prefix that is also a suffix) of word, by brute force."""
    return max(l for l in range(len(word)) if list(word[:l]) == list(word[len(word) - l:]))


def naive_trace(T, P) -> list[tuple[int, int]]:
    """The naive matcher's (s, j) at each probe point: one per shift, one more per matched symbol."""
    steps = []
    for s in range(len(T) - len(P) + 1):
        j = 0
        steps.append((s, j))
        while T[s + j] == P[j]:
            if j == len(P) - 1:
                return steps
            j += 1
            steps.append((s, j))
    return steps


def random_pairs(seed: int, B: int, nT: int, nP: int) -> tuple[np.ndarray, np.ndarray]:
    """Haystacks over 2 of the 4 symbols (long partial matches, long KMP chains). Every third needle is
    planted, every third has a symbol the haystack lacks (no match), the rest are random."""
    rng = np.random.default_rng(seed)
    T, P = rng.integers(0, 2, (B, nT)), rng.integers(0, 2, (B, nP))
    for b in range(0, B, 3):
        at = rng.integers(0, nT - nP + 1)
        T[b, at:at + nP] = P[b]
        if b + 1 < B:
            P[b + 1, rng.integers(0, nP)] = 2 + rng.integers(0, 2)
    return T, P


def index(x: np.ndarray) -> np.ndarray:
    """A mask_one hint [..., N] as its index."""
    return x.argmax(axis=-1)


@pytest.mark.parametrize("name", MATCHERS)
@pytest.mark.parametrize("nT, nP", [(12, 3), (20, 1), (9, 9), (30, 5)])
def test_match_is_the_first_occurrence(name, nT, nP):
    T, P = random_pairs(nT * 100 + nP, 60, nT, nP)
    ds = MATCHERS[name](T, P)
    expected = [first_match(t, p) for t, p in zip(T, P)]
    assert index(ds.outputs["match"]).tolist() == expected
    assert any(e == nT for e in expected) and any(e < nT for e in expected)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=14), st.lists(st.integers(0, 2), min_size=1, max_size=4))
def test_both_matchers_find_str_find_on_arbitrary_strings(T, P):
    if len(P) > len(T):
        P = P[:len(T)]
    for name in MATCHERS:
        traj = run_algorithm(name, np.array(T), np.array(P))
        assert index(traj.outputs["match"]) == first_match(T, P)


@pytest.mark.parametrize("nT, nP", [(12, 3), (20, 1), (13, 13)])
def test_naive_trace_is_the_textbook_loop(nT, nP):
    T, P = random_pairs(7 + nT, 40, nT, nP)
    ds = naive_string_matcher(T, P)
    for b in range(len(T)):
        steps = naive_trace(T[b], P[b])
        tr = ds.trajectory(b)
        s, i, j = index(tr.hints["s"]), index(tr.hints["i"]), index(tr.hints["j"])
        assert list(zip(s.tolist(), (j - nT).tolist())) == steps
        assert np.array_equal(i, s + j - nT)  # i walks the haystack alongside j in the needle


def test_kmp_failure_function_is_the_longest_border():
    T, P = random_pairs(3, 50, 20, 8)
    ds = kmp_matcher(T, P)
    nT = T.shape[1]
    for b in range(len(T)):
        tr = ds.trajectory(b)
        borders = np.array([border(P[b][:q + 1]) for q in range(P.shape[1])])
        pi = tr.hints["pi"][-1]  # the scan sees the finished failure function
        assert np.array_equal(pi[:nT], np.arange(nT))
        assert np.array_equal(pi[nT:], nT + np.maximum(borders - 1, 0))
        assert np.array_equal(tr.hints["is_reset"][-1, nT:], borders == 0)


def test_kmp_scan_states_are_the_longest_prefix_suffix():
    T, P = random_pairs(5, 50, 24, 5)
    ds = kmp_matcher(T, P)
    nT, nP = T.shape[1], P.shape[1]
    for b in range(len(T)):
        tr = ds.trajectory(b)
        phase = tr.hints["phase"]
        first_scan = int(np.argmax(phase))
        assert not phase[:first_scan].any() and phase[first_scan:].all()  # the failure function first
        assert first_scan <= 2 * nP - 1  # KMP's amortized bound on the failure-function loop
        i = index(tr.hints["i"])[first_scan:]
        q = index(tr.hints["q"])[first_scan:] - nT
        matched = np.where(tr.hints["q_reset"][first_scan:] == 1, 0, q + 1)
        tops = np.flatnonzero(np.diff(i, prepend=-1))  # the first hint at each haystack position
        assert np.array_equal(i[tops], np.arange(len(tops)))
        for t in tops:
            read = list(T[b][:i[t]])  # the longest prefix of P ending the text read so far
            assert matched[t] == max(l for l in range(min(nP, len(read) + 1)) if read[len(read) - l:] == list(P[b][:l]))
        assert np.array_equal(index(tr.hints["s"])[first_scan:], np.maximum(i - nP + 1, 0))
        assert len(set(index(tr.hints["k"])[first_scan:].tolist())) == 1  # k is frozen during the scan


def test_naive_hand_example():
    tr = run_algorithm("naive_string_matcher", np.array([0, 1, 0, 1, 2]), np.array([0, 1, 2]))
    assert index(tr.hints["s"]).tolist() == [0, 0, 0, 1, 2, 2, 2]
    assert (index(tr.hints["j"]) - 5).tolist() == [0, 1, 2, 0, 0, 1, 2]
    assert index(tr.hints["i"]).tolist() == [0, 1, 2, 1, 2, 3, 4]
    assert index(tr.outputs["match"]) == 2
    assert tr.inputs["pos"].tolist() == [0, 0.2, 0.4, 0.6, 0.8, 0, 1 / 3, 2 / 3]
    assert tr.inputs["string"].tolist() == [0] * 5 + [1] * 3
    assert tr.hints["pred_h"][0].tolist() == [0, 0, 1, 2, 3, 5, 5, 6]
    assert index(tr.inputs["key"]).tolist() == [0, 1, 0, 1, 2, 0, 1, 2]


def test_kmp_hand_example():
    # P = aab in T = aaab: failure function (k reset, k = 0, a link to reset, reset), then the scan,
    # which falls back once at the third a and matches at shift 1.
    tr = run_algorithm("kmp_matcher", np.array([0, 0, 0, 1]), np.array([0, 0, 1]))
    nT = 4
    assert tr.hints["phase"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert (index(tr.hints["q"]) - nT).tolist() == [1, 1, 2, 2, 0, 0, 1, 0, 1]
    assert tr.hints["q_reset"].tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 0]
    assert (index(tr.hints["k"]) - nT).tolist() == [0] * 9
    assert tr.hints["k_reset"].tolist() == [1, 0, 1, 1, 1, 1, 1, 1, 1]
    assert index(tr.hints["s"]).tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 1]
    assert index(tr.hints["i"]).tolist() == [0, 0, 0, 0, 0, 1, 2, 2, 3]
    assert (tr.hints["pi"][:, nT:] - nT).tolist() == [[0, 1, 2], [0, 0, 2], [0, 0, 2]] + [[0, 0, 0]] * 6
    assert tr.hints["is_reset"][:, nT:].tolist() == [[1, 0, 0]] * 3 + [[1, 0, 1]] * 6
    assert index(tr.outputs["match"]) == 1


@pytest.mark.parametrize("name", MATCHERS)
def test_no_match_points_at_the_needle_head(name):
    tr = run_algorithm(name, np.array([0, 1, 0, 1, 0]), np.array([1, 1]))
    assert index(tr.outputs["match"]) == 5


def reference_draws(rng: RandomState, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference sampler's calls, literally: needle, haystack, then `choice` of the position."""
    nP = 1 if length < 5 else length // 5
    needle = rng.randint(0, high=4, size=(nP,))
    haystack = rng.randint(0, high=4, size=(length - nP,))
    at = rng.choice(length - 2 * nP)
    haystack[at:at + nP] = needle
    return haystack, needle


@pytest.mark.parametrize("length", [3, 4, 5, 9, 16, 64])
def test_sampler_draws_the_reference_stream(length):
    ours, ref = RandomState(length), RandomState(length)
    for _ in range(50):
        (T, P), (T_ref, P_ref) = sample_matcher(ours, length), reference_draws(ref, length)
        assert np.array_equal(T, T_ref) and np.array_equal(P, P_ref)
        assert len(T) + len(P) == length and first_match(T, P) < len(T) - len(P)  # planted, never at the end
    assert ours.randint(1 << 30) == ref.randint(1 << 30)  # both streams consumed alike


def test_canonical_shapes():
    ds = generate("kmp_matcher", num=4, size=16, seed=0)
    assert ds.inputs["key"].shape == (4, 16, 4) and ds.inputs["string"][0].sum() == 16 // 5


@pytest.mark.parametrize("T, P", [([0, 1], [0, 1, 2]), ([0, 5, 1], [1]), ([[0, 1]], [0])])
def test_bad_inputs_are_user_errors(T, P):
    for name in MATCHERS:
        with pytest.raises(RelreasonError):
            run_algorithm(name, np.array(T), np.array(P))
