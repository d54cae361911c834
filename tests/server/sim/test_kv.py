"""BlockPool: allocation from a fixed pool, reference counts, LRU eviction of cached blocks."""

from __future__ import annotations

import pytest

from server.sim.kv import BlockPool, block_hashes


def test_allocate_until_empty_then_none():
    pool = BlockPool(4)
    assert pool.allocate(3) == [0, 1, 2]
    assert pool.num_free == 1 and pool.usage == pytest.approx(0.75)
    assert pool.allocate(2) is None  # all-or-nothing
    assert pool.allocate(1) == [3]
    assert pool.usage == 1.0


def test_release_returns_blocks_and_cached_ones_stay_findable_until_evicted():
    pool = BlockPool(3)
    a = pool.allocate(2)
    pool.cache_block(a[0], 111)
    pool.release(a)
    assert pool.num_free == 3 and pool.usage == 0.0
    assert pool.lookup(111) == a[0]
    # free queue order: the never-used block 2 first, then a[1] (tail block released first), then a[0]
    assert pool.allocate(2) == [2, a[1]]
    assert pool.lookup(111) == a[0]
    assert pool.allocate(1) == [a[0]]  # evicts it: the hash is gone
    assert pool.lookup(111) is None


def test_touching_a_cached_free_block_takes_it_out_of_the_free_queue():
    pool = BlockPool(2)
    (b,) = pool.allocate(1)
    pool.cache_block(b, 7)
    pool.release([b])
    assert pool.num_evictable([b]) == 1
    pool.touch([b])
    assert pool.ref_count(b) == 1 and pool.num_free == 1
    pool.touch([b])  # shared by a second request
    assert pool.ref_count(b) == 2 and pool.num_free == 1
    pool.release([b])
    assert pool.num_free == 1
    pool.release([b])
    assert pool.num_free == 2


def test_double_release_is_caught():
    pool = BlockPool(1)
    b = pool.allocate(1)
    pool.release(b)
    with pytest.raises(ValueError, match=r"block 0 released more often than taken"):
        pool.release(b)
    assert pool.ref_count(b[0]) == 0 and pool.num_free == 1  # refused before the count went negative


def test_caching_off_never_finds_anything():
    pool = BlockPool(2, enable_caching=False)
    (b,) = pool.allocate(1)
    pool.cache_block(b, 5)
    assert pool.lookup(5) is None


def test_hash_chain_depends_on_every_earlier_block():
    toks = list(range(64))
    h = block_hashes(toks, 16, 4)
    other = block_hashes([999, *toks[1:]], 16, 4)
    assert len(h) == 4 and len(set(h)) == 4
    assert all(x != y for x, y in zip(h, other, strict=True))  # a change in block 0 changes every later hash
    # extending a chain from its last hash gives the same values as hashing at once
    assert block_hashes(toks, 16, 2, start=2, parent=h[1]) == h[2:]
