"""The part of the recorder contract about the ledger as a transparency log (issue 40), run on every
backend: the Merkle tree over the log (ledger.tree) against a tree computed from scratch, growers
racing, signed tree heads (ledger.notes) of one size whatever the organizations, `verify`
rebuilding the tree, and the customer's offline check (ledger.export_check with ledger.proofs)
catching an operator who rewrites, truncates or forks the log between two tree heads.

Mixed into `RecorderContract`.
"""

import asyncio
import base64

import msgspec
import pytest

from ledger import audit, checkpoints, merkle, notes, proofs, queries, tree
from ledger.events import CreditsAdded
from ledger.export_check import Mismatch, check
from ledger.proof_check import ProofMismatch, TreeCheck, TreeHead
from ledger.recorder import Append
from ledger.signing import Signer
from tests.ledger.export_contract import billed, exported, forged, priced_request, stored_data
from tests.ledger.ledger_helpers import append_ok, credits, org, unit


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162's MTH, computed from scratch."""
    if len(leaves) == 1:
        return merkle.leaf_hash(leaves[0])
    k = merkle.split(len(leaves))
    return merkle.node_hash(mth(leaves[:k]), mth(leaves[k:]))


async def chain_hashes(recorder) -> list[bytes]:
    return [bytes(r.hash) for r in await recorder.read(0, 100_000)]


async def many(recorder, count: int, stream: str = "acme") -> None:
    await append_ok(recorder, unit(stream, org(stream)))
    for start in range(0, count, 100):
        await recorder.append([Append(stream, [CreditsAdded(amount_inr_nano=n + 1)])
                               for n in range(start, min(count, start + 100))])


def listing(heads: list[checkpoints.Checkpoint], signer: Signer) -> tuple[list[TreeHead], dict[str, bytes]]:
    """The tree heads as GET /v1/ledger/checkpoints publishes them, and the key that signed them."""
    return [msgspec.convert(c.published(), TreeHead) for c in heads], {signer.key_id: signer.public_raw}


def positions(lines: list[bytes]) -> list[tuple[int, bytes]]:
    return [(fields["position"], bytes.fromhex(fields["hash"])) for fields in map(msgspec.json.decode, lines)]


class TreeContract:
    async def test_the_tree_and_its_proofs_are_rfc_9162s_at_every_size(self, recorder):
        await many(recorder, 600)
        assert await tree.grow(recorder, 300) == 300  # in two steps, across tile edges
        assert await tree.grow(recorder, 601) == 601
        leaves = await chain_hashes(recorder)
        for size in (1, 2, 255, 256, 257, 300, 512, 601):
            root = mth(leaves[:size])
            assert await tree.root(recorder, size) == root
            for index in {0, size // 2, size - 1}:
                merkle.check_inclusion(index, size, merkle.leaf_hash(leaves[index]),
                                       await tree.inclusion(recorder, index, size), root)
            for old in {old for old in (1, 7, 256, size // 3 or 1, size) if old <= size}:
                proof = await tree.consistency(recorder, old, size)
                merkle.check_consistency(old, size, mth(leaves[:old]), root, proof)
        with pytest.raises(merkle.ProofError):
            await tree.root(recorder, 602)

    async def test_growers_racing_leave_one_tree(self, recorder):
        await many(recorder, 900)
        sizes = await asyncio.gather(*(tree.grow(recorder, 901) for _ in range(4)))
        assert set(sizes) == {901} and await tree.root(recorder, 901) == mth(await chain_hashes(recorder))
        assert await audit.verify(recorder) == (901, [])

    async def test_a_tree_head_is_a_signed_note_of_one_size_whatever_the_organizations(self, recorder):
        signer = Signer.generate()
        await many(recorder, 10, "acme")
        _, first = await audit.keep_verified(recorder, signer=signer, origin="example.com/ledger")
        for n in range(200):
            await append_ok(recorder, unit(f"org{n:03d}", org(f"Org {n}"), credits(n + 1)))
        _, second = await audit.keep_verified(recorder, signer=signer, origin="example.com/ledger")
        heads = list(await checkpoints.newest(recorder, None, 10))
        assert [c.position for c in heads] == [second, first]
        for head in heads:
            stated = notes.opened(head.verified.note, "example.com/ledger", signer.public_raw)
            assert (stated.origin, stated.size) == ("example.com/ledger", head.verified.tree_size)
            assert stated.root == await tree.root(recorder, stated.size) and stated.extensions[0].startswith("time ")
            assert head.verified.heads == ()
        sizes = {len(msgspec.json.encode(head.published())) for head in heads}
        assert max(sizes) - min(sizes) <= 4  # 11 events and 1 org, or 412 and 201 orgs: the same size
        other = Signer.generate()
        with pytest.raises(notes.NoteError):
            notes.opened(heads[0].verified.note, "example.com/ledger", other.public_raw)

    async def test_verify_rebuilds_the_tree_and_catches_a_tile_or_an_event_changed(self, recorder, tmp_path):
        await many(recorder, 300)
        await audit.keep_verified(recorder, signer=Signer.generate())
        assert await audit.verify(recorder) == (302, [])
        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        await self.execute_raw(tmp_path, "UPDATE merkle_tiles SET hashes = ? WHERE level = 0 AND idx = 1",
                               [bytes(32) * 45])
        assert any("stored tile (0, 1)" in p for p in (await audit.verify(recorder))[1])
        await tree_reset(self, tmp_path)
        await tree.grow(recorder, 301)
        assert (await audit.verify(recorder))[1] == []
        await self.execute_raw(tmp_path, "UPDATE events SET hash = ? WHERE position = 300", [bytes(32)])
        _, problems = await audit.verify(recorder)
        assert "position 300 (stream acme v300): hash mismatch" in problems

    async def test_the_customer_s_check_holds_an_honest_log_to_its_tree_heads(self, recorder):
        signer = Signer.generate()
        await billed(recorder)
        await audit.keep_verified(recorder, signer=signer)
        await append_ok(recorder, unit("acme", priced_request("r6", 3, 3)), unit("other", credits(9)))
        await audit.keep_verified(recorder, signer=signer)
        lines = await exported(recorder)
        heads, keys = listing(await checkpoints.newest(recorder, None, 10), signer)
        given = await proofs.for_export(recorder, "acme", positions(lines))
        report = check(lines, tree=TreeCheck(heads, keys, given, frozenset({signer.key_id})))
        assert (report["tree_heads"], report["tree_heads_included"], report["consistency_proofs"]) == (2, 2, 1)
        with pytest.raises(ProofMismatch, match="no proofs"):
            TreeCheck(heads, keys, None, None)
        with pytest.raises(ProofMismatch, match="no consistency proof"):
            TreeCheck(heads, keys, msgspec.structs.replace(given, consistency=[]), None)
        with pytest.raises(Mismatch, match="no inclusion proof"):
            check(lines, tree=TreeCheck(heads, keys, msgspec.structs.replace(given, inclusion=given.inclusion[:1]),
                                        None))
        with pytest.raises(ProofMismatch, match="not one you trust"):
            TreeCheck(heads, keys, given, frozenset({"another"}))

    async def test_history_rewritten_between_tree_heads_is_caught(self, recorder, tmp_path):
        signer, lines = Signer.generate(), await self.two_heads_later(recorder)
        # The operator rewrites a credit's note, every hash after it, and the tree, then signs anew.
        rewritten = forged(lines, 2, lambda fields: fields.update(note="rewritten"))
        await self.rewrite(tmp_path, rewritten[2:])
        await tree_reset(self, tmp_path)
        await checkpoints.record_tree(recorder, await queries.last_position(recorder), full=False, signer=signer)
        assert "does not match the log's events" in " ".join((await audit.verify(recorder))[1])
        after = await exported(recorder)
        assert after == rewritten and check(after)["ok"]  # consistent on its own
        heads, keys = listing(await checkpoints.newest(recorder, None, 10), signer)
        given = await proofs.for_export(recorder, "acme", positions(after))
        with pytest.raises(ProofMismatch, match="does not extend"):
            TreeCheck(heads, keys | self.keys, given, None)

    async def test_a_truncated_log_is_caught(self, recorder, tmp_path):
        signer = Signer.generate()
        lines = await self.two_heads_later(recorder, signer)
        held, keys = listing(await checkpoints.newest(recorder, None, 10), signer)  # as the customer saved them
        last = msgspec.json.decode(lines[-1])["position"]
        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        await self.execute_raw(tmp_path, "DELETE FROM events WHERE position >= ?", [last])  # r6, the second head
        await tree_reset(self, tmp_path)
        await checkpoints.record_tree(recorder, last - 1, full=False, signer=signer)
        given = await proofs.for_export(recorder, "acme", positions(await exported(recorder)))
        assert check(await exported(recorder))["ok"]  # consistent on its own
        with pytest.raises(ProofMismatch, match="forked"):
            TreeCheck(held, keys, given, None)

    async def test_a_forked_tree_head_is_caught(self, recorder):
        signer = Signer.generate()
        lines = await self.two_heads_later(recorder, signer)
        heads, keys = listing(await checkpoints.newest(recorder, None, 10), signer)
        given = await proofs.for_export(recorder, "acme", positions(lines))
        # The operator signs a second head of the same size for another history, shown to someone else.
        other_root = bytes(32)
        body = notes.text(checkpoints.ORIGIN, heads[0].tree_size, other_root)
        fork = TreeHead(tree_size=heads[0].tree_size, root_hash=base64.b64encode(other_root).decode(),
                        note=notes.signed(body, checkpoints.ORIGIN, signer.public_raw,
                                          base64.b64decode(signer.sign(body.encode()))), key_id=signer.key_id)
        with pytest.raises(ProofMismatch, match="forked"):
            TreeCheck([*heads, fork], keys, given, None)

    async def two_heads_later(self, recorder, signer: Signer | None = None) -> list[bytes]:
        """A billed org under two signed tree heads; its export."""
        first = signer or Signer.generate()
        self.keys = {first.key_id: first.public_raw}
        await billed(recorder)
        await audit.keep_verified(recorder, signer=first)
        await append_ok(recorder, unit("acme", priced_request("r6", 3, 3)))
        await audit.keep_verified(recorder, signer=first)
        return await exported(recorder)

    async def rewrite(self, tmp_path, lines: list[bytes]) -> None:
        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        for raw in lines:
            fields = msgspec.json.decode(raw)
            await self.execute_raw(tmp_path, "UPDATE events SET data = ?, hash = ? WHERE position = ?",
                                   [stored_data(raw), bytes.fromhex(fields["hash"]), fields["position"]])


async def tree_reset(contract, tmp_path) -> None:
    """The operator throws the stored tree away (to grow one over a changed log)."""
    await contract.execute_raw(tmp_path, "DELETE FROM merkle_tiles")
    await contract.execute_raw(tmp_path, "DELETE FROM merkle_tree")
