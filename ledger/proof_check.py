"""The customer's check of tree heads, offline (ledger.export_check calls it): each checkpoint's
signed note verifies with its key and states its size and root; the proofs the operator handed
over (`gateway ledger fetch-proofs`, ledger.proofs) show every tree head extends the one before
it (consistency), so no history was rewritten, dropped or forked between them; and the export's
newest event under each checkpoint is a leaf of its tree (inclusion), so the org's own history is
the one the checkpoint signed. A checkpoint without its proofs fails: an operator must not be able
to leave out the one proof that would convict it.
"""

import base64
import binascii
import itertools

import msgspec

from ledger import merkle, notes, signing


class TreeHead(msgspec.Struct, frozen=True):
    """A checkpoint as GET /v1/ledger/checkpoints publishes a tree head."""

    tree_size: int
    root_hash: str
    note: str
    key_id: str = ""
    recorded_at: str = ""
    position: int = 0


class Inclusion(msgspec.Struct, frozen=True):
    tree_size: int
    leaf_index: int
    leaf_hash: str
    audit_path: list[str]


class Consistency(msgspec.Struct, frozen=True):
    from_: int = msgspec.field(name="from")
    to: int = 0
    proof: list[str] = []


class Head(msgspec.Struct, frozen=True):
    tree_size: int
    root_hash: str


class Proofs(msgspec.Struct, frozen=True):
    """What `gateway ledger fetch-proofs` writes: every tree head, the consistency proof between
    each and the next, and the inclusion proof of the org's newest event under each."""

    heads: list[Head]
    consistency: list[Consistency]
    inclusion: list[Inclusion]
    org_id: str = ""


class ProofMismatch(ValueError):
    """A tree head or a proof that does not hold."""


def b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ProofMismatch(f"{what} is not base64") from None


class TreeCheck:
    """The tree heads of a checkpoints file, held to their notes and the operator's proofs."""

    def __init__(self, heads: list[TreeHead], keys: dict[str, bytes], proofs: Proofs | None,
                 trusted: frozenset[str] | None) -> None:
        self.heads = sorted(heads, key=lambda h: h.tree_size)
        self.keys, self.trusted = keys, trusted
        self.unsigned, self.signers, self.included = 0, set[str](), 0
        if self.heads and proofs is None:
            raise ProofMismatch("checkpoints are tree heads, and no proofs were given (gateway ledger fetch-proofs):"
                                " without them nothing shows the log was not rewritten")
        self.roots: dict[int, bytes] = {}
        for head in self.heads:
            root = self._opened(head)
            if self.roots.setdefault(head.tree_size, root) != root:
                raise ProofMismatch(f"two tree heads of {head.tree_size} events with different roots: the log was"
                                    " forked")
        self.inclusions = {p.tree_size: p for p in proofs.inclusion} if proofs else {}
        self.chained = _consistent(proofs, self.roots) if proofs else 0

    def _opened(self, head: TreeHead) -> bytes:
        """The head's root, once its note verifies with its key and states its size and root."""
        root = b64(head.root_hash, f"the root of the tree head of {head.tree_size}")
        if not head.key_id:
            if self.trusted is not None:
                raise ProofMismatch(f"the tree head of {head.tree_size} is not signed")
            self.unsigned += 1
            stated = notes.parse(head.note)
        else:
            stated = self._signed(head)
        if (stated.size, stated.root) != (head.tree_size, root):
            raise ProofMismatch(f"the note of the tree head of {head.tree_size} states another size or root")
        return root

    def _signed(self, head: TreeHead) -> notes.Checkpoint:
        public = self.keys.get(head.key_id)
        if public is None or signing.key_id(public) != head.key_id:
            raise ProofMismatch(f"the tree head of {head.tree_size} is signed by key {head.key_id}, whose public"
                                " key is not given")
        if self.trusted is not None and head.key_id not in self.trusted:
            raise ProofMismatch(f"the tree head of {head.tree_size} is signed by key {head.key_id}, not one you trust")
        try:
            opened = notes.opened(head.note, head.note.partition("\n")[0], public)
        except notes.NoteError as exc:
            raise ProofMismatch(f"the tree head of {head.tree_size}: {exc}") from None
        self.signers.add(head.key_id)
        return opened

    def newest(self, position: int, chain_hash: bytes, tree_size: int) -> None:
        """The org's newest event under the tree head of `tree_size` is at `position`: it must be
        a leaf of that tree."""
        proof = self.inclusions.get(tree_size)
        if proof is None or proof.leaf_index != position - 1:
            raise ProofMismatch(f"no inclusion proof of the event at position {position} under the tree head of"
                                f" {tree_size}")
        path = [b64(node, "an audit path node") for node in proof.audit_path]
        try:
            merkle.check_inclusion(position - 1, tree_size, merkle.leaf_hash(chain_hash), path,
                                   self.roots[tree_size])
        except merkle.ProofError as exc:
            raise ProofMismatch(f"the event at position {position} is not the one the tree head of {tree_size}"
                                f" signed ({exc}): history was rewritten or dropped") from None
        self.included += 1


def _consistent(proofs: Proofs, roots: dict[int, bytes]) -> int:
    """Check each proof between successive tree heads of the proofs file, and that every checkpoint
    given is one of those heads; how many proofs held."""
    chain = {h.tree_size: b64(h.root_hash, f"the root of the tree of {h.tree_size}") for h in proofs.heads}
    for size, root in roots.items():
        if chain.get(size) != root:
            raise ProofMismatch(f"the tree head of {size} is not among the proofs' heads, or has another root there:"
                                " the log was forked")
    sizes = sorted(chain)
    given = {(p.from_, p.to): p.proof for p in proofs.consistency}
    for old, new in itertools.pairwise(sizes):
        if (old, new) not in given:
            raise ProofMismatch(f"no consistency proof from the tree of {old} to the tree of {new}")
        path = [b64(node, "a consistency proof node") for node in given[(old, new)]]
        try:
            merkle.check_consistency(old, new, chain[old], chain[new], path)
        except merkle.ProofError as exc:
            raise ProofMismatch(f"the tree of {new} does not extend the tree of {old} ({exc}): history between"
                                " them was rewritten, dropped or forked") from None
    return max(len(sizes) - 1, 0)
