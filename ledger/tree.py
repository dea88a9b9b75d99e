"""The log's Merkle tree (ledger.merkle), kept in the ledger's own database as tiles.

Every event is a leaf, in position order (leaf index = position - 1), its leaf data the 32 bytes
of its chain hash. A tile, as C2SP tlog-tiles lays them out, holds up to 256 consecutive hashes
of one tree level, a multiple of 8 (tile level L holds tree level 8L): any perfect subtree's hash
is one tile entry, or hashed from at most 128 of them (`hashes_of`), so a proof reads a few rows
and never the log. The tree grows off the request path, by whoever records a checkpoint, from the
events after its size (`grow`); the right-edge tiles are rewritten as they fill. Two processes
growing it at once cannot both write: the store takes a growth only from the size it was read at
(Recorder.put_tiles).
"""

from collections.abc import AsyncIterator, Iterable

from ledger import merkle
from ledger.merkle import Node
from ledger.recorder import Recorder

HEIGHT = 8  # tree levels a tile spans
WIDTH = 1 << HEIGHT  # hashes a full tile holds
HASH = 32
READ_BATCH = 5000  # events read at once while growing
WRITE_EVERY = 50_000  # leaves added between two writes of the tiles
SIZE = "SELECT size FROM merkle_tree WHERE name = 'log'"
# The leaves after a position: only the chain hashes (no event is decoded to grow the tree).
HASHES = "SELECT position, hash FROM events WHERE position > ? AND position <= ? ORDER BY position LIMIT ?"
TILES = "SELECT level, idx, hashes FROM merkle_tiles WHERE level = ? AND idx IN ({})"
Tile = tuple[int, int]  # (tile level, index)


class Builder:
    """The right edge of a tree as it grows: each tile level's last, unfinished tile, the tiles
    changed since the last write, and the frontier (the perfect subtrees of the whole, left to
    right) from which its root at any size comes."""

    def __init__(self, size: int = 0, edge: dict[int, bytearray] | None = None,
                 frontier: list[tuple[int, bytes]] | None = None) -> None:
        self.size = size
        self.edge = edge or {}  # tile level -> its unfinished tile's hashes
        self.changed: dict[Tile, bytes] = {}
        self.frontier = frontier or []

    def add(self, leaf: bytes) -> None:
        """Append one leaf hash."""
        self._put(0, self.size, leaf)
        self.size += 1
        level, node = 0, leaf
        while self.frontier and self.frontier[-1][0] == level:
            node = merkle.node_hash(self.frontier.pop()[1], node)
            level += 1
        self.frontier.append((level, node))

    def _put(self, tile_level: int, index: int, node: bytes) -> None:
        """Entry `index` of tile level `tile_level`; a tile it fills adds its root one tile level up."""
        tile = self.edge.setdefault(tile_level, bytearray())
        tile += node
        self.changed[(tile_level, index >> HEIGHT)] = bytes(tile)
        if len(tile) == WIDTH * HASH:
            self.edge[tile_level] = bytearray()
            self._put(tile_level + 1, index >> HEIGHT, subtree(tile))

    def root(self) -> bytes:
        """MTH of every leaf added (merkle.EMPTY_ROOT for none)."""
        if not self.frontier:
            return merkle.EMPTY_ROOT
        return merkle.combine([node for _, node in self.frontier])

    def edge_tiles(self) -> dict[Tile, bytes]:
        """The unfinished tile of each tile level, as stored at this size."""
        return {(level, (self.size >> (HEIGHT * level)) >> HEIGHT): bytes(hashes)
                for level, hashes in self.edge.items() if hashes}

    def taken(self) -> dict[Tile, bytes]:
        """The tiles changed since the last call, to be written."""
        changed, self.changed = self.changed, {}
        return changed


def subtree(hashes: bytes | bytearray) -> bytes:
    """The hash of the perfect subtree over a power-of-two run of hashes (32 bytes each)."""
    level = [bytes(hashes[i:i + HASH]) for i in range(0, len(hashes), HASH)]
    while len(level) > 1:
        level = [merkle.node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


async def size(recorder: Recorder) -> int:
    """How many leaves the stored tree has."""
    rows = await recorder._fetch(SIZE)
    return rows[0][0] if rows else 0


async def tiles(recorder: Recorder, wanted: Iterable[Tile]) -> dict[Tile, bytes]:
    """The stored tiles among `wanted`."""
    by_level: dict[int, set[int]] = {}
    for level, index in wanted:
        by_level.setdefault(level, set()).add(index)
    found: dict[Tile, bytes] = {}
    for level, indexes in by_level.items():
        ordered = sorted(indexes)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start:start + 500]
            rows = await recorder._fetch(TILES.format(", ".join("?" * len(chunk))), [level, *chunk])
            found.update({(row[0], row[1]): bytes(row[2]) for row in rows})
    return found


def _place(node: Node) -> tuple[Tile, int, int]:
    """Where a perfect subtree's hashes are: its tile, the first entry, how many entries."""
    level, index = node
    tile_level, rest = divmod(level, HEIGHT)
    first = index << rest
    return (tile_level, first >> HEIGHT), first & (WIDTH - 1), 1 << rest


async def hashes_of(recorder: Recorder, nodes: list[Node]) -> dict[Node, bytes]:
    """The hash of each perfect subtree (each within the stored tree), from its tile."""
    places = {node: _place(node) for node in nodes}
    found_tiles = await tiles(recorder, {tile for tile, _, _ in places.values()})
    found = {}
    for node, (tile, first, count) in places.items():
        entries = found_tiles.get(tile, b"")[first * HASH:(first + count) * HASH]
        if len(entries) != count * HASH:
            raise merkle.ProofError(f"the stored tree lacks the subtree {node}: it is smaller than asked")
        found[node] = subtree(entries)
    return found


async def _prove(recorder: Recorder, ranges: list[tuple[int, int]]) -> list[bytes]:
    found = await hashes_of(recorder, merkle.nodes_of(ranges))
    return merkle.prove(ranges, lambda _: found)


async def root(recorder: Recorder, tree_size: int) -> bytes:
    """MTH of the first `tree_size` leaves (ProofError beyond the stored tree)."""
    await _within(recorder, tree_size)
    return (await _prove(recorder, [(0, tree_size)]))[0] if tree_size else merkle.EMPTY_ROOT


async def inclusion(recorder: Recorder, index: int, tree_size: int) -> list[bytes]:
    """The audit path of leaf `index` in the tree of `tree_size` leaves."""
    await _within(recorder, tree_size)
    return await _prove(recorder, merkle.inclusion_ranges(index, tree_size))


async def consistency(recorder: Recorder, old: int, new: int) -> list[bytes]:
    """The proof that the tree of `new` leaves extends the one of `old` leaves."""
    await _within(recorder, new)
    return [] if old == new else await _prove(recorder, merkle.consistency_ranges(old, new))


async def _within(recorder: Recorder, tree_size: int) -> None:
    if tree_size > (stored := await size(recorder)):
        raise merkle.ProofError(f"the tree has {stored} leaves so far, not {tree_size}")


async def builder(recorder: Recorder) -> Builder:
    """A builder at the stored tree's right edge."""
    at = await size(recorder)
    edge_tiles, level = [], 0
    while at >> (HEIGHT * level):
        edge_tiles.append((level, (at >> (HEIGHT * level)) >> HEIGHT))
        level += 1
    stored = await tiles(recorder, edge_tiles)
    edge = {tile_level: bytearray(stored.get((tile_level, index), b"")) for tile_level, index in edge_tiles}
    nodes = merkle.perfect(0, at)
    found = await hashes_of(recorder, nodes) if nodes else {}
    return Builder(at, edge, [(node[0], found[node]) for node in nodes])


async def grow(recorder: Recorder, upto: int, batch: int = READ_BATCH) -> int:
    """Add the events after the stored tree's size, up to position `upto`, as leaves, `batch` at
    a time (a server's small: each holds its loop); the size it then has (another process's
    growth, if it won the race, is kept and this one dropped)."""
    built = await builder(recorder)
    start = built.size
    async for hashes in hashes_after(recorder, start, upto, batch):
        for digest in hashes:
            built.add(merkle.leaf_hash(digest))
        if built.size - start >= WRITE_EVERY or built.size >= upto:
            if not await recorder.put_tiles(start, built.size, built.taken()):
                return await size(recorder)
            start = built.size
    if built.size > start and not await recorder.put_tiles(start, built.size, built.taken()):
        return await size(recorder)
    return built.size


async def hashes_after(recorder: Recorder, after: int, upto: int, size: int = READ_BATCH
                       ) -> AsyncIterator[list[bytes]]:
    """The chain hashes (leaf data) of the events after position `after` up to `upto`, `size` at a
    time, in order; ProofError at a gap, over which no tree can be grown."""
    while after < upto and (rows := await recorder._fetch(HASHES, (after, upto, size))):
        if rows[0][0] != after + 1 or rows[-1][0] != after + len(rows):
            raise merkle.ProofError(f"the log has a gap after position {after}: no tree can be grown over it")
        after = rows[-1][0]
        yield [bytes(row[1]) for row in rows]
