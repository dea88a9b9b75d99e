"""The Merkle tree of RFC 9162 §2.1 over the log: its hashes, which subtrees make up the audit
path of a leaf (inclusion, §2.1.3) and the proof that one tree extends another (consistency,
§2.1.4), and the checks of both (§2.1.3.2, §2.1.4.2), which a customer runs offline.

Proofs are computed from perfect subtrees only: a range [lo, hi) of leaves is the MTH of the
perfect subtrees it splits into (`perfect`), each found without recomputing the tree
(ledger.tree keeps them in tiles). Every function here is pure: no database, no clock.
"""

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence

Node = tuple[int, int]  # a perfect subtree: (level, index), covering leaves [index << level, (index + 1) << level)
EMPTY_ROOT = hashlib.sha256(b"").digest()  # MTH of no leaves


class ProofError(ValueError):
    """A proof that does not prove what it claims, or one asked for sizes it cannot cover."""


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def split(n: int) -> int:
    """The largest power of two smaller than `n` (n > 1): where RFC 9162 splits a tree of n leaves."""
    return 1 << ((n - 1).bit_length() - 1)


def perfect(lo: int, hi: int) -> list[Node]:
    """The perfect subtrees whose hashes, combined right to left, give MTH of leaves [lo, hi), as
    the RFC splits them (lo is a multiple of each left part, as every range the proofs ask is)."""
    nodes = []
    while hi - lo > 0:
        size = hi - lo
        if size & (size - 1) == 0:  # a power of two: one perfect subtree
            nodes.append((size.bit_length() - 1, lo >> (size.bit_length() - 1)))
            break
        k = split(size)
        nodes.append((k.bit_length() - 1, lo >> (k.bit_length() - 1)))
        lo += k
    return nodes


def combine(hashes: Sequence[bytes]) -> bytes:
    """The MTH of a range from its `perfect` subtrees' hashes, left to right."""
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = node_hash(left, result)
    return result


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The ranges whose MTHs are the audit path of leaf `index` in a tree of `size` (RFC 9162
    PATH), from the leaf's sibling up."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    ranges, lo, hi = [], 0, size
    while hi - lo > 1:
        k = split(hi - lo)
        if index < lo + k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo += k
    return ranges[::-1]


def consistency_ranges(old: int, new: int) -> list[tuple[int, int]]:
    """The ranges whose MTHs prove a tree of `new` leaves extends the one of `old` (RFC 9162
    PROOF / SUBPROOF), in the RFC's order."""
    if not 0 < old <= new:
        raise ProofError(f"no consistency proof from {old} to {new} leaves")
    ranges, lo, hi, whole = [], 0, new, True
    while old != hi:
        k = split(hi - lo)
        if old - lo <= k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo, whole = lo + k, False
    if not whole:
        ranges.append((lo, hi))
    return ranges[::-1]


def nodes_of(ranges: Iterable[tuple[int, int]]) -> list[Node]:
    """Every perfect subtree the MTHs of `ranges` are made of, once each."""
    return list(dict.fromkeys(node for lo, hi in ranges for node in perfect(lo, hi)))


def prove(ranges: list[tuple[int, int]], hashes_of: Callable[[list[Node]], Mapping[Node, bytes]]) -> list[bytes]:
    """The MTH of each range, from the perfect subtrees' hashes `hashes_of` finds (all at once)."""
    found = hashes_of(nodes_of(ranges))
    return [combine([found[node] for node in perfect(lo, hi)]) for lo, hi in ranges]


def root_from_inclusion(index: int, size: int, leaf: bytes, path: Sequence[bytes]) -> bytes:
    """The root an audit path leads to from a leaf hash (RFC 9162 §2.1.3.2); ProofError when it
    has the wrong length for the leaf and size."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    fn, sn, result = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            raise ProofError("the audit path is longer than the tree is high")
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            result = node_hash(result, sibling)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the audit path is shorter than the tree is high")
    return result


def check_inclusion(index: int, size: int, leaf: bytes, path: Sequence[bytes], root: bytes) -> None:
    """ProofError unless `path` proves leaf `index` (hash `leaf`) is in the tree of `size` with `root`."""
    if root_from_inclusion(index, size, leaf, path) != root:
        raise ProofError(f"the audit path of leaf {index} does not lead to the root of the tree of {size}")


def check_consistency(old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> None:
    """ProofError unless `proof` shows the tree of `new` leaves (`new_root`) extends the tree of
    `old` leaves (`old_root`) (RFC 9162 §2.1.4.2)."""
    if not 0 < old <= new:
        raise ProofError(f"no consistency proof from {old} to {new} leaves")
    if old == new:
        if proof or old_root != new_root:
            raise ProofError(f"two trees of {old} leaves with different roots, or a proof where none is due")
        return
    path = list(proof)
    if old & (old - 1) == 0:  # a power of two: the old root is the proof's first node
        path.insert(0, old_root)
    if not path:
        raise ProofError("an empty consistency proof")
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("the consistency proof is longer than the tree is high")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or fr != old_root or sr != new_root:
        raise ProofError(f"the tree of {new} leaves does not extend the tree of {old} leaves")
