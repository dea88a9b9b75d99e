"""The operator's side of the proofs (ledger.tree): one event's inclusion under a tree head, one
tree head's consistency with another, and everything a customer's offline check needs for an
export (`gateway ledger fetch-proofs`: every tree head, the proof between each and the next, and
the inclusion of the org's newest exported event under each), as ledger.proof_check reads them."""

import base64
import itertools
from collections.abc import Iterable

import msgspec

from ledger import checkpoints, merkle, tree
from ledger.proof_check import Consistency, Head, Inclusion, Proofs
from ledger.recorder import Recorder

EVENT_AT = "SELECT stream_id, hash FROM events WHERE position = ?"


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


async def event_at(recorder: Recorder, position: int) -> tuple[str, bytes] | None:
    """The stream and chain hash of the event at `position`, if there is one."""
    rows = await recorder._fetch(EVENT_AT, (position,))
    return (rows[0][0], bytes(rows[0][1])) if rows else None


async def inclusion(recorder: Recorder, position: int, tree_size: int, chain_hash: bytes) -> Inclusion:
    """The audit path of the event at `position` (whose chain hash is given) in the tree of `tree_size`."""
    path = await tree.inclusion(recorder, position - 1, tree_size)
    return Inclusion(tree_size=tree_size, leaf_index=position - 1, leaf_hash=b64(merkle.leaf_hash(chain_hash)),
                     audit_path=[b64(node) for node in path])


async def consistency(recorder: Recorder, old: int, new: int) -> Consistency:
    return Consistency(from_=old, to=new, proof=[b64(node) for node in await tree.consistency(recorder, old, new)])


async def tree_heads(recorder: Recorder) -> list[Head]:
    """Every tree head recorded, smallest first (one per size)."""
    heads = await checkpoints.tree_heads(recorder)
    return [Head(tree_size=size, root_hash=root) for size, root in sorted(heads.items())]


async def for_export(recorder: Recorder, org_id: str, events: Iterable[tuple[int, bytes]]) -> Proofs:
    """The proofs of every tree head for an export of `org_id` (its events' positions and chain
    hashes, in order): the newest exported event under each head, proved included."""
    heads, exported = await tree_heads(recorder), iter(events)
    chain = [await consistency(recorder, a.tree_size, b.tree_size) for a, b in itertools.pairwise(heads)]
    included, newest, following = [], None, next(exported, None)
    for head in heads:
        while following is not None and following[0] <= head.tree_size:
            newest, following = following, next(exported, None)
        if newest is not None:
            included.append(await inclusion(recorder, newest[0], head.tree_size, newest[1]))
    return Proofs(heads=heads, consistency=chain, inclusion=included, org_id=org_id)


def encoded(proofs: Proofs) -> bytes:
    return msgspec.json.encode(proofs)
