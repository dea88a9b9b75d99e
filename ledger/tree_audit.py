"""Verifying the log's Merkle tree (ledger.tree) and continuing from a tree head.

From a tree head (a checkpoint at tree size N): the stored tree must still have the signed root
at N; each stream the events after N touch continues from its stored head at N, which must still
hash as recorded and be a leaf of that signed tree (an inclusion proof against its root), so a
head rewritten in place is caught; then the chains after N are checked as ever. A full
verification rebuilds the whole tree from the events and compares every stored tile, and every
tree head's root at its size: a rewritten, dropped or reordered event shows in both.
"""

import base64

from ledger import chains, checkpoints, merkle, tree
from ledger.chains import Head
from ledger.checkpoints import Checkpoint
from ledger.recorder import Recorder

LAST_LEAF = "SELECT stream_id, version FROM events WHERE position = ?"
# Each stream the events after a tree head touch, with its first version there (nothing decoded).
FIRST_VERSIONS = "SELECT stream_id, MIN(version) FROM events WHERE position > ? AND position <= ? GROUP BY stream_id"


async def continued(recorder: Recorder, start: Checkpoint, last: int, batch: int
                    ) -> tuple[int, list[str], dict[str, Head]]:
    """(events checked, problems, heads) of the events after tree head `start`, up to `last`."""
    size, signed_root = start.verified.tree_size, base64.b64decode(start.verified.root)
    try:
        stored_root = await tree.root(recorder, size)
    except merkle.ProofError as exc:
        return 0, [f"the tree head at {size}: {exc}"], {}
    problems = [] if stored_root == signed_root else [f"the stored tree's root at {size} is not its tree head's"]
    heads, found = await _heads_at(recorder, size, last, signed_root)
    checked, more, heads = await chains.check_range(recorder, size + 1, last, heads, batch)
    return checked, problems + found + more, heads


async def _heads_at(recorder: Recorder, size: int, last: int, root: bytes) -> tuple[dict[str, Head], list[str]]:
    """Each stream's head at `size` of the streams the events after it touch, and why any is not
    what the tree head at `size` holds."""
    first = dict(await recorder._fetch(FIRST_VERSIONS, (size, last)))
    wanted = [(s, v - 1) for s, v in first.items() if v > 1]
    rows = await chains.stored_events(recorder, [*wanted, *await _last_leaf(recorder, size)], size)
    heads = {stream: (version, bytes(row[-1])) for (stream, version), row in rows.items()}
    missing = [f"stream {s}: its event v{v} is not in the log before position {size + 1}"
               for s, v in wanted if s not in heads]
    changed = await chains.heads_changed(recorder, heads, size)
    continued = {stream: heads[stream] for stream, _ in wanted if stream in heads}
    return continued, missing + changed + await _unproven(recorder, rows, size, root)


async def _last_leaf(recorder: Recorder, size: int) -> list[tuple[str, int]]:
    """The (stream, version) of the tree's last leaf, checked too: whatever continues, the tree
    head's newest event must still be the one it signed."""
    rows = await recorder._fetch(LAST_LEAF, (size,))
    return [(rows[0][0], rows[0][1])] if rows else []


async def _unproven(recorder: Recorder, rows: dict[tuple[str, int], tuple], size: int, root: bytes) -> list[str]:
    """The heads whose stored event is not the leaf the signed tree has at its position."""
    ranges = {position: merkle.inclusion_ranges(position - 1, size) for position, *_ in rows.values()}
    nodes = await tree.hashes_of(recorder, merkle.nodes_of(r for found in ranges.values() for r in found))
    problems = []
    for (stream, version), row in rows.items():
        path = merkle.prove(ranges[row[0]], lambda _: nodes)
        if merkle.root_from_inclusion(row[0] - 1, size, merkle.leaf_hash(bytes(row[-1])), path) != root:
            problems.append(f"stream {stream} v{version}: not the event the tree head at {size} holds")
    return problems


async def rebuilt(recorder: Recorder, batch: int = tree.READ_BATCH) -> list[str]:
    """Rebuild the tree from the events and compare it with the stored tiles and every tree head."""
    stored_size, heads = await tree.size(recorder), await checkpoints.tree_heads(recorder)
    built, problems = tree.Builder(), list[str]()
    try:
        async for digests in tree.hashes_after(recorder, 0, stored_size, batch):
            for digest in digests:
                built.add(merkle.leaf_hash(digest))
                if built.size in heads and base64.b64encode(built.root()).decode() != heads[built.size]:
                    problems.append(f"the tree head at {built.size} does not match the log's events")
            problems += await _tiles_differ(recorder, {tile: entries for tile, entries in built.taken().items()
                                                       if len(entries) == tree.WIDTH * tree.HASH})
    except merkle.ProofError as exc:  # a gap (the chain check names it too)
        problems.append(str(exc))
    problems += await _tiles_differ(recorder, built.edge_tiles())
    if built.size != stored_size:
        problems.append(f"the stored tree has {stored_size} leaves, the log {built.size} events to that point")
    return problems


async def _tiles_differ(recorder: Recorder, built: dict[tuple[int, int], bytes]) -> list[str]:
    """The built tiles that differ from the stored ones."""
    stored = await tree.tiles(recorder, built)
    return [f"stored tile {tile} differs from the one the events make" for tile, hashes in sorted(built.items())
            if stored.get(tile) != hashes]
