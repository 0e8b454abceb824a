"""Query-independent structures kept between counterfactual queries.

The grid of split levels and the leaf boxes of an ensemble do not depend on
the query, and neither do the grid cells of a reference array; building them
costs more than many queries. :class:`GridCache` keeps them per owner object
(an ensemble, a reference array), a bounded number of entries per owner and
of owners, and forgets an owner's entries when the owner is garbage
collected. Keys describe content (hashes, flags), never the identity of
another object. One process-wide instance, :data:`GRID_CACHE`; sessions
share it only through equal content, which gives equal values.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Hashable

__all__ = ["GridCache", "GRID_CACHE"]


class GridCache:
    """Values built from an owner object, kept until the owner dies (LRU-bounded)."""

    def __init__(self, max_owners: int = 16, max_entries: int = 8) -> None:
        self.max_owners = max_owners
        self.max_entries = max_entries
        # reentrant: an owner can die while the lock is held (an evicted value that is itself an
        # owner, or the garbage collector running mid-update), and its finalizer takes the lock
        self._lock = threading.RLock()
        self._store: OrderedDict[int, OrderedDict[Hashable, Any]] = OrderedDict()

    def get(self, owner: object, key: Hashable, build: Callable[[], Any]) -> Any:
        """The value kept for ``(owner, key)``; ``build()`` makes it on a miss."""
        oid = id(owner)
        with self._lock:
            entries = self._store.get(oid)
            if entries is not None and key in entries:
                self._store.move_to_end(oid)
                entries.move_to_end(key)
                return entries[key]
        value = build()                      # outside the lock: a build can take a while
        try:
            weakref.ref(owner)
        except TypeError:                    # an owner that cannot be watched is not cached
            return value
        with self._lock:
            entries = self._store.get(oid)
            if entries is None:
                entries = self._store[oid] = OrderedDict()
                weakref.finalize(owner, self._forget, oid)
                while len(self._store) > self.max_owners:
                    self._store.popitem(last=False)
            entries[key] = value
            while len(entries) > self.max_entries:
                entries.popitem(last=False)
        return value

    def _forget(self, oid: int) -> None:
        with self._lock:
            self._store.pop(oid, None)


GRID_CACHE = GridCache()
