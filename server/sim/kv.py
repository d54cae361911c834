"""Paged KV-cache blocks from a fixed pool, with prefix caching of full blocks (vLLM V1's block pool).

A block holds ``block_size`` tokens. Blocks are reference counted; a block whose count drops to zero
goes to the tail of the free queue but keeps its content hash, so a later request with the same prefix
can take it back (a prefix-cache hit) until allocation evicts it from the head of the queue.

    pool = BlockPool(num_blocks=64, enable_caching=True)
    got = pool.allocate(3)          # -> [0, 1, 2] or None when fewer than 3 are free
    pool.cache_block(got[0], h)     # full block registered under its hash-chain value
    pool.release(got)               # back to the free queue, still findable by pool.lookup(h)
    pool.usage                      # 1 - free / total, vLLM's kv_cache_usage_perc
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def block_hashes(tokens: Sequence[int], block_size: int, count: int, start: int = 0,
                 parent: int | None = None) -> list[int]:
    """Hash chain of full blocks ``start .. start+count-1``: each hash covers its tokens and every block before."""
    out: list[int] = []
    prev = parent if parent is not None else 0x5EED
    for i in range(start, start + count):
        prev = hash((prev, tuple(tokens[i * block_size:(i + 1) * block_size])))
        out.append(prev)
    return out


class BlockPool:
    """Fixed pool of KV blocks: reference counts, an LRU free queue and a hash -> block map."""

    __slots__ = ("num_blocks", "enable_caching", "_ref", "_hash_of", "_cached", "_free")

    def __init__(self, num_blocks: int, enable_caching: bool = True):
        if num_blocks < 1:
            raise ValueError("num_blocks must be >= 1")
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self._ref = [0] * num_blocks
        self._hash_of: list[int | None] = [None] * num_blocks
        self._cached: dict[int, int] = {}
        self._free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))

    @property
    def num_free(self) -> int:
        """Blocks nobody references (cached-but-evictable ones included), as vLLM counts them."""
        return len(self._free)

    @property
    def usage(self) -> float:
        return 1.0 - len(self._free) / self.num_blocks

    def ref_count(self, block: int) -> int:
        return self._ref[block]

    def lookup(self, block_hash: int) -> int | None:
        """The cached block holding this hash, or None."""
        return self._cached.get(block_hash) if self.enable_caching else None

    def num_evictable(self, blocks: Sequence[int]) -> int:
        """How many of ``blocks`` sit in the free queue (taking them consumes free capacity)."""
        ref = self._ref
        return sum(1 for b in blocks if ref[b] == 0)

    def touch(self, blocks: Sequence[int]) -> None:
        """Take a reference on (cache-hit) blocks, pulling free ones out of the free queue."""
        ref, free = self._ref, self._free
        for b in blocks:
            if ref[b] == 0:
                del free[b]
            ref[b] += 1

    def allocate(self, n: int) -> list[int] | None:
        """``n`` fresh blocks from the head of the free queue (evicting their cached hashes), or None."""
        free = self._free
        if n > len(free):
            return None
        out: list[int] = []
        ref, hash_of, cached = self._ref, self._hash_of, self._cached
        for _ in range(n):
            b, _none = free.popitem(last=False)
            h = hash_of[b]
            if h is not None:
                hash_of[b] = None
                if cached.get(h) == b:
                    del cached[h]
            ref[b] = 1
            out.append(b)
        return out

    def release(self, blocks: Sequence[int]) -> None:
        """Drop one reference per block; tail blocks first so they are evicted before shared prefixes."""
        ref, free = self._ref, self._free
        for b in reversed(blocks):
            if ref[b] <= 0:  # a real error, not an assert (python -O would drop that); the count stays at 0
                raise ValueError(f"block {b} released more often than taken")
            ref[b] -= 1
            if ref[b] == 0:
                free[b] = None

    def cache_block(self, block: int, block_hash: int) -> None:
        """Register a full block under its hash (first writer wins for duplicate content)."""
        if not self.enable_caching or self._hash_of[block] is not None:
            return
        if block_hash not in self._cached:
            self._cached[block_hash] = block
            self._hash_of[block] = block_hash

    def reset_cache(self) -> None:
        """Forget every cached hash (vLLM's /reset_prefix_cache)."""
        self._cached.clear()
        self._hash_of = [None] * self.num_blocks
