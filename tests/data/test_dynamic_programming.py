"""Dynamic programming tables against independent references: a memoized matrix-chain recursion, a
textbook LCS table, and optimal BSTs found by enumerating every tree; plus their hint invariants."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relreason.data import generate, run_algorithm
from relreason.data.algorithms import ALGORITHMS
from relreason.data.samplers import RandomState

# ---------------------------------------------------------------- matrix chain


def chain_cost(p: np.ndarray, i: int, j: int) -> float:
    """Cheapest cost of multiplying matrices i..j (matrix k is p[k-1] x p[k]), memoized recursion."""

    @functools.lru_cache(maxsize=None)
    def best(a: int, b: int) -> float:
        if a == b:
            return 0.0
        return min(best(a, k) + best(k + 1, b) + p[a - 1] * p[k] * p[b] for k in range(a, b))

    return best(i, j)


def split_cost(p: np.ndarray, s: np.ndarray, i: int, j: int) -> float:
    """Cost of the parenthesization the split table s describes."""
    if i == j:
        return 0.0
    k = int(s[i, j])
    assert i <= k < j
    return split_cost(p, s, i, k) + split_cost(p, s, k + 1, j) + p[i - 1] * p[k] * p[j]


def test_matrix_chain_order_finds_the_cheapest_parenthesization():
    ds = generate("matrix_chain_order", num=25, size=8, seed=2)
    n = ds.n
    for b in range(len(ds)):
        p = ds.inputs["p"][b]
        s = ds.outputs["s"][b]
        m = ds.hints["m"][b, ds.lengths[b] - 1]  # the final table
        for i in range(1, n):
            for j in range(i, n):
                assert m[i, j] == pytest.approx(chain_cost(p, i, j), rel=1e-12)
                assert split_cost(p, s, i, j) == pytest.approx(m[i, j], rel=1e-12)


def test_matrix_chain_order_hand_example():
    # CLRS 15.2: dimensions 30x35, 35x15, 15x5, 5x10, 10x20, 20x25 cost 15125 with split ((A1(A2A3))((A4A5)A6)).
    p = np.array([30, 35, 15, 5, 10, 20, 25], float)
    tr = run_algorithm("matrix_chain_order", p)
    assert tr.hints["m"][-1][1, 6] == 15125
    s = tr.outputs["s"]
    assert (s[1, 6], s[1, 3], s[4, 6]) == (3, 1, 5)


def test_matrix_chain_order_hints_refine_monotonically():
    ds = generate("matrix_chain_order", num=30, size=10, seed=4)
    n = ds.n
    upper = np.triu(np.ones((n, n), bool))
    upper[0] = False  # row 0 is not a matrix
    for b in range(len(ds)):
        T = ds.lengths[b]
        m, msk, s_h = ds.hints["m"][b, :T], ds.hints["msk"][b, :T].astype(bool), ds.hints["s_h"][b, :T]
        np.testing.assert_array_equal(msk[0], np.diag(np.arange(n) > 0))
        np.testing.assert_array_equal(msk[-1], upper)
        assert np.all(msk[1:] >= msk[:-1])  # known cells stay known
        known = msk[:-1]
        assert np.all(m[1:][known] <= m[:-1][known])  # and only get cheaper
        # Hint t is the table before pass t; the run stops after the first pass that changes nothing, so
        # every recorded step differs from the one before it.
        assert all(np.any(m[t] != m[t - 1]) for t in range(1, T))
        np.testing.assert_array_equal(s_h[-1], ds.outputs["s"][b])
    assert len(set(ds.lengths.tolist())) > 1  # samples stop at different steps


# ---------------------------------------------------------------- longest common subsequence


def lcs_table(x, y) -> np.ndarray:
    """Textbook table L[i, j] = LCS length of x[:i] and y[:j], with an empty row and column."""
    L = np.zeros((len(x) + 1, len(y) + 1), int)
    for i, j in itertools.product(range(1, len(x) + 1), range(1, len(y) + 1)):
        L[i, j] = L[i - 1, j - 1] + 1 if x[i - 1] == y[j - 1] else max(L[i - 1, j], L[i, j - 1])
    return L


def read_lcs(b: np.ndarray, x) -> list:
    """Follows the arrows from the last cell (0 diagonal: take the character; 1 up; 2 left)."""
    i, j = b.shape[0] - 1, b.shape[1] - 1
    out = []
    while i >= 0 and j >= 0:
        if b[i, j] == 0:
            out.append(x[i])
            i, j = i - 1, j - 1
        elif b[i, j] == 1:
            i -= 1
        else:
            j -= 1
    return out[::-1]


def is_subsequence(sub, seq) -> bool:
    it = iter(seq)
    return all(ch in it for ch in sub)


def check_lcs(tr, x, y) -> None:
    nx, n = len(x), len(x) + len(y)
    b_full = tr.outputs["b"]  # [N, N, 4]
    b = b_full[:nx, nx:].argmax(-1)
    common = read_lcs(b, list(x))
    assert is_subsequence(common, list(x)) and is_subsequence(common, list(y))
    L = lcs_table(x, y)
    assert len(common) == L[-1, -1]
    np.testing.assert_array_equal(tr.hints["c"][-1][:nx, nx:], L[1:, 1:])
    blank = np.ones((n, n), bool)
    blank[:nx, nx:] = False
    np.testing.assert_array_equal(b_full[blank], np.tile([0, 0, 0, -1], (blank.sum(), 1)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=7), st.lists(st.integers(0, 3), min_size=1, max_size=7))
def test_lcs_length_arrows_spell_a_longest_common_subsequence(x, y):
    check_lcs(run_algorithm("lcs_length", np.array(x), np.array(y)), x, y)


def test_lcs_length_on_sampled_strings():
    ds = generate("lcs_length", num=20, size=13, seed=6)
    nx = 13 - 13 // 2
    for b in range(len(ds)):
        key = ds.inputs["key"][b].argmax(-1)
        check_lcs(ds.trajectory(b), key[:nx], key[nx:])


def test_lcs_length_hand_example():
    # CLRS 15.4: x = ABCBDAB, y = BDCABA have an LCS of length 4 (e.g. BCBA); A T C G = 0 1 2 3 here.
    code = {"A": 0, "B": 1, "C": 2, "D": 3}
    x, y = [code[ch] for ch in "ABCBDAB"], [code[ch] for ch in "BDCABA"]
    tr = run_algorithm("lcs_length", np.array(x), np.array(y))
    assert tr.hints["c"][-1][6, 7 + 5] == 4
    np.testing.assert_array_equal(tr.inputs["string"], [0] * 7 + [1] * 6)
    np.testing.assert_allclose(tr.inputs["pos"], list(np.arange(7) / 7) + list(np.arange(6) / 6))
    np.testing.assert_array_equal(tr.hints["pred_h"][0], [0, 0, 1, 2, 3, 4, 5, 7, 7, 8, 9, 10, 11])


# ---------------------------------------------------------------- optimal binary search tree


def all_trees(i: int, j: int):
    """Every BST over keys i..j-1 (dummies i..j) as nested tuples (key, left, right); a dummy is an int."""
    if i == j:
        return [i]
    return [(r, left, right) for r in range(i, j) for left in all_trees(i, r) for right in all_trees(r + 1, j)]


def tree_cost(tree, p, q, depth: int = 0) -> float:
    """Expected search cost: sum of (depth + 1) * probability over keys and dummy leaves."""
    if isinstance(tree, int):
        return (depth + 1) * q[tree]
    r, left, right = tree
    return (depth + 1) * p[r] + tree_cost(left, p, q, depth + 1) + tree_cost(right, p, q, depth + 1)


def tree_from_roots(root: np.ndarray, i: int, j: int):
    if i == j:
        return i
    r = int(root[i, j])
    assert i <= r < j
    return (r, tree_from_roots(root, i, r), tree_from_roots(root, r + 1, j))


def test_optimal_bst_matches_the_best_of_all_trees():
    ds = generate("optimal_bst", num=15, size=5, seed=8)
    assert ds.n == 6  # n keys, n + 1 nodes
    for b in range(len(ds)):
        p, q = ds.inputs["p"][b][:-1], ds.inputs["q"][b]
        root = ds.outputs["root"][b]
        e = ds.hints["e"][b, -1]
        best = min(tree_cost(t, p, q) for t in all_trees(0, 5))
        assert e[0, 5] == pytest.approx(best, rel=1e-12)
        assert tree_cost(tree_from_roots(root, 0, 5), p, q) == pytest.approx(best, rel=1e-12)
        for i, j in itertools.combinations(range(6), 2):  # every subproblem as well
            assert e[i, j] == pytest.approx(min(tree_cost(t, p, q) for t in all_trees(i, j)), rel=1e-12)
            assert ds.hints["w"][b, -1][i, j] == pytest.approx(p[i:j].sum() + q[i:j + 1].sum(), rel=1e-12)


def test_optimal_bst_fills_one_diagonal_per_step():
    ds = generate("optimal_bst", num=10, size=6, seed=1)
    n = ds.n
    assert np.all(ds.lengths == n)
    span = np.arange(n)[None, :] - np.arange(n)[:, None]
    for t in range(n):
        np.testing.assert_array_equal(ds.hints["msk"][:, t], np.broadcast_to((span >= 0) & (span <= t), (10, n, n)))
        assert not ds.hints["e"][:, t][:, (span < 0) | (span > t)].any()
    np.testing.assert_array_equal(ds.hints["root_h"][:, -1], ds.outputs["root"])
    np.testing.assert_array_equal(ds.inputs["p"][:, -1], 0)  # p is padded to n + 1 nodes


# ---------------------------------------------------------------- samplers


def test_samplers_draw_the_reference_distributions():
    rng = RandomState(0)
    (p,) = ALGORITHMS.get("matrix_chain_order").sample(rng, 9)
    assert p.shape == (9,) and np.all((0 <= p) & (p < 1))
    x, y = ALGORITHMS.get("lcs_length").sample(rng, 9)
    assert (len(x), len(y)) == (5, 4) and set(np.concatenate([x, y]).tolist()) <= {0, 1, 2, 3}
    p, q = ALGORITHMS.get("optimal_bst").sample(rng, 9)
    assert (len(p), len(q)) == (9, 10) and np.concatenate([p, q]).sum() == pytest.approx(1.0)
    rng, ref = RandomState(5), RandomState(5)  # one stream of 2n + 1 uniforms, keys first
    p, q = ALGORITHMS.get("optimal_bst").sample(rng, 3)
    u = ref.uniform(size=7)
    np.testing.assert_allclose(np.concatenate([p, q]), u / u.sum(), rtol=0, atol=0)
