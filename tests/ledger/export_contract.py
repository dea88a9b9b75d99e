"""The part of the recorder contract about a bill the customer can verify (issue 28), run on every
backend: an org's export (ledger.export) read from the store, checked offline
(ledger.export_check), against signed checkpoints (ledger.checkpoints, ledger.signing).

Mixed into `RecorderContract`. Each tampering a customer must catch is made here as an operator
or a forger would: a byte changed in the file, an event dropped, two reordered, a price changed
(with every hash after it recomputed, so the chain alone does not show it), and the history
rewritten in the database after a checkpoint.
"""

from decimal import Decimal

import msgspec
import pytest

from ledger import audit, charges, checkpoints, export, queries
from ledger.events import CreditsHeld, Draw, RequestCompleted
from ledger.export_check import Mismatch, Published, check
from ledger.recorder import GENESIS_HASH, chain_hash
from ledger.signing import Signer
from tests.ledger.ledger_helpers import append_ok, credits, hold, key, org, release, unit

RATE = "84.5"
PRICES = charges.per_token(Decimal("0.0000025"), Decimal("0.00001"), Decimal("0.00000125"))


def priced_request(request_id: str, prompt: int, completion: int, *, key_id: str = "k1", status: int = 200,
                   byok: bool = False, cached: int = 0, draws: tuple[Draw, ...] = ()) -> RequestCompleted:
    """A request whose cost and charge are exactly what the gateway would record (ledger.charges)."""
    priced = msgspec.structs.replace(PRICES, cached_tokens=cached) if cached else PRICES
    usd = sum(charges.usd_nano(priced, prompt, completion))
    inr = charges.inr_nano(usd, Decimal(RATE))
    return RequestCompleted(request_id=request_id, key_id=key_id, route="/v1/chat/completions", model="gpt-test",
                            provider="sim", status=status, prompt_tokens=prompt, completion_tokens=completion,
                            cost_usd_nano=usd, cost_inr_nano=inr,
                            charged_inr_nano=inr if charges.charged(status, byok) else 0, usd_to_inr=RATE,
                            priced=priced, byok=byok, draws=draws)


async def billed(recorder, name: str = "acme") -> None:
    """An org with credits, requests charged and not, holds released and drawn from; and another
    org's events between its own."""
    await append_ok(recorder, unit(name, org(name), key("k1"), credits(50_000_000_000, "opening")),
                    unit("other", org("Other"), key("secret-key"), credits(7)))
    await append_ok(recorder, unit(name, hold("h1", 2_000_000), priced_request("r1", 1200, 300)))
    await append_ok(recorder, unit(name, priced_request("r2", 10, 0, status=502), release("h1", 1_000_000)),
                    unit("other", priced_request("x1", 5, 5, key_id="secret-key")))
    await append_ok(recorder, unit(name, priced_request("r3", 900, 80, cached=600, draws=(
        Draw(hold_id="h1", amount_inr_nano=1),)), priced_request("r4", 40, 40, byok=True)))
    await append_ok(recorder, unit(name, credits(2_500_000_000), priced_request("r5", 7, 0, status=499)))


async def exported(recorder, stream_id: str = "acme", window: export.Window = export.EVERYTHING) -> list[bytes]:
    return [line for page in [p async for p in export.lines(recorder, stream_id, window)]
            for line in page.splitlines(keepends=True)]


def forged(lines: list[bytes], index: int, change) -> list[bytes]:
    """The export a forger would hand over: line `index`'s event changed by `change(dict)`, and it
    and every later line given the hashes that make the chain whole again."""
    out = list(lines[:index])
    prev = bytes.fromhex(msgspec.json.decode(lines[index])["prev_hash"])
    for number, raw in enumerate(lines[index:]):
        fields = msgspec.json.decode(raw)
        envelope = {name: fields.pop(name) for name in
                    ("position", "stream_id", "version", "recorded_at", "recorded_at_us", "hash", "prev_hash")}
        if number == 0:
            change(fields)
        data = msgspec.json.encode(fields)
        digest = chain_hash(prev, envelope["position"], envelope["stream_id"], envelope["version"], fields["type"],
                            envelope["recorded_at_us"], data)
        out.append(export.line(envelope["stream_id"], (envelope["position"], envelope["version"],
                                                       envelope["recorded_at_us"], data, digest), prev))
        prev = digest
    return out


async def published_of(recorder) -> list[Published]:
    """The legacy checkpoints as GET /v1/ledger/checkpoints published them before tree heads, read as
    the checker reads them."""
    return [msgspec.convert(c.published_legacy(), Published) for c in await checkpoints.newest(recorder, None, 10)
            if c.legacy]


async def legacy_checkpoint(recorder, signer: Signer | None = None) -> int:
    """A checkpoint as recorded before tree heads (every stream's head): those stay verifiable."""
    verified = await audit.verification(recorder, with_projections=False)
    assert not verified.problems
    return await checkpoints.record(recorder, verified.upto, verified.heads, full=False, signer=signer)


def stored_data(raw: bytes) -> bytes:
    """The event's bytes as the store holds them: the line from its "type" on."""
    return b"{" + raw.rstrip(b"\n")[raw.index(b'"type":'):]


def mismatch(lines: list[bytes], *args) -> Mismatch:
    with pytest.raises(Mismatch) as caught:
        check(lines, *args)
    return caught.value


class ExportContract:
    async def test_an_export_names_what_escrow_slices_hold_apart_from_requests_holds(self, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(5_000_000_000)))
        await append_ok(recorder, unit("acme", CreditsHeld(hold_id="slice_1", request_id="", amount_inr_nano=300,
                                                           key_id="k1"), hold("hold_2", 40)))
        await append_ok(recorder, unit("acme", priced_request("r1", 10, 5, draws=(
            Draw(hold_id="slice_1", amount_inr_nano=1, key_id="k1"),)), release("hold_2", 10)))
        report = check(await exported(recorder))
        assert (Decimal(report["held_inr"]), Decimal(report["escrow_inr"])) == (Decimal("3E-8"), Decimal("2.99E-7"))
        held = (await recorder._fetch("SELECT held_inr_nano FROM orgs"))[0][0]
        assert held == 30 + 299 and await queries.org_escrow(recorder, "acme") == 299

    async def test_an_export_checks_and_sums_to_the_org_s_balance_and_holds(self, recorder):
        await billed(recorder)
        lines = await exported(recorder)
        report = check(lines)
        [(credits_nano, spent, held)] = await recorder._fetch(
            "SELECT credits_inr_nano, spent_inr_nano, held_inr_nano FROM orgs WHERE org_id = ?", ["acme"])
        assert report["ok"] and report["events"] == len(lines) == 11 and report["requests"] == 5
        assert Decimal(report["balance_inr"]) * 10**9 == credits_nano - spent
        assert Decimal(report["held_inr"]) * 10**9 == held == 999_999
        assert report["charges_recomputed"] == 5
        assert not any(b"other" in line or b"secret-key" in line for line in lines)  # no other org's data

    async def test_each_line_is_the_event_as_stored_with_where_it_sits(self, recorder):
        await billed(recorder)
        stored = await recorder.read_stream("acme")
        lines = await exported(recorder)
        for line, recorded, prev in zip(lines, stored, [GENESIS_HASH] + [r.hash for r in stored], strict=False):
            fields = msgspec.json.decode(line)
            assert (fields["position"], fields["version"], fields["type"], fields["hash"], fields["prev_hash"]) == (
                recorded.position, recorded.version, recorded.kind, recorded.hash.hex(), prev.hex())
            assert fields["recorded_at"] == export.instant(recorded.recorded_at_us)
            assert line.rstrip(b"\n").endswith(recorded.data[1:])

    async def test_pages_after_a_position_continue_the_chain(self, recorder):
        await billed(recorder)
        whole, pages, after = await exported(recorder), [], 0
        while page := await exported(recorder, window=export.Window(after=after, limit=5)):
            pages.append(page)
            after = msgspec.json.decode(page[-1])["position"]
        assert [len(p) for p in pages] == [5, 5, 1] and [line for p in pages for line in p] == whole
        report = check(pages[1], partial=True)  # a part of the stream checks on its own, without a balance
        assert "begins at version 6: versions 1 to 5 are missing" in mismatch(pages[1]).why
        assert report["first_version"] == 6 and report["balance_inr"] is None

    async def test_a_time_window_takes_what_was_recorded_in_it(self, recorder):
        await billed(recorder)
        times = [msgspec.json.decode(line)["recorded_at_us"] for line in await exported(recorder)]
        start, end = sorted(set(times))[1], sorted(set(times))[3]
        inside = await exported(recorder, window=export.Window(from_us=start, to_us=end))
        assert [msgspec.json.decode(line)["recorded_at_us"] for line in inside] == [t for t in times
                                                                                   if start <= t < end]
        assert await exported(recorder, "nobody") == []

    async def test_a_changed_byte_a_dropped_event_and_two_reordered_are_named(self, recorder):
        await billed(recorder)
        lines = await exported(recorder)
        positions = [msgspec.json.decode(line)["position"] for line in lines]
        changed, r3 = list(lines), next(i for i, line in enumerate(lines) if b'"request_id":"r3"' in line)
        changed[r3] = changed[r3].replace(b'"prompt_tokens":900', b'"prompt_tokens":800')
        assert mismatch(changed).position == positions[r3]
        assert "hash is not the SHA-256" in mismatch(changed).why
        assert mismatch(lines[:4] + lines[5:]).position == positions[5]
        assert "version 5 is missing" in mismatch(lines[:4] + lines[5:]).why
        reordered = [*lines[:3], lines[4], lines[3], *lines[5:]]
        assert mismatch(reordered).position == positions[4] and "missing" in mismatch(reordered).why
        assert "reordered" in mismatch([*lines[:4], lines[3], *lines[4:]]).why

    async def test_a_changed_price_is_caught_even_with_every_hash_recomputed(self, recorder):
        await billed(recorder)
        lines = await exported(recorder)
        index = next(i for i, line in enumerate(lines) if b'"request_id":"r1"' in line)

        def cheaper(fields: dict) -> None:
            fields["priced"]["completion_usd"] = "0.000009"
        found = mismatch(forged(lines, index, cheaper))
        assert found.position == msgspec.json.decode(lines[index])["position"]
        assert "its tokens at its prices cost" in found.why
        assert check(forged(lines, index, lambda fields: None))["ok"]  # the forgery itself is sound

        def undercharged(fields: dict) -> None:
            fields["charged_inr_nano"] -= 1
        assert "charged_inr_nano" in mismatch(forged(lines, index, undercharged)).why

    async def test_history_rewritten_after_a_signed_checkpoint_is_caught(self, recorder, tmp_path):
        await billed(recorder)
        await legacy_checkpoint(recorder, Signer.generate())
        await append_ok(recorder, unit("acme", priced_request("r6", 3, 3)))
        published = await published_of(recorder)
        lines = await exported(recorder)
        assert check(lines, published)["checkpoints_matched"] == 1
        # The operator rewrites a credit's note and, to hide it, every hash after it, in the database.
        rewritten = forged(lines, 2, lambda fields: fields.update(note="rewritten"))
        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        for raw in rewritten[2:]:
            fields = msgspec.json.decode(raw)
            await self.execute_raw(tmp_path, "UPDATE events SET data = ?, hash = ? WHERE position = ?",
                                   [stored_data(raw), bytes.fromhex(fields["hash"]), fields["position"]])
        after = await exported(recorder)
        assert after == rewritten and check(after)["ok"]  # consistent on its own
        found = mismatch(after, published)
        assert "signed another head" in found.why
        assert found.position == msgspec.json.decode(lines[-2])["position"]  # the head the checkpoint signed

    async def test_checkpoints_signed_before_a_key_rotation_still_verify(self, recorder):
        await billed(recorder)
        old, new = Signer.generate(), Signer.generate()
        await legacy_checkpoint(recorder, old)
        await append_ok(recorder, unit("acme", credits(1)))
        await legacy_checkpoint(recorder, new)
        await append_ok(recorder, unit("acme", credits(2)))
        await legacy_checkpoint(recorder)  # unsigned
        published = await published_of(recorder)
        lines = await exported(recorder)
        report = check(lines, published)
        assert report["checkpoints_matched"] == 3 and report["checkpoints_unsigned"] == 1
        assert report["signing_keys"] == sorted([old.key_id, new.key_id])
        signed = [c for c in published if c.signature]
        assert check(lines, signed, frozenset({old.key_id, new.key_id}))["checkpoints_matched"] == 2
        assert "not a key you trust" in mismatch(lines, signed, frozenset({new.key_id})).why
        assert "is not signed" in mismatch(lines, published, frozenset({old.key_id, new.key_id})).why
        forged_signature = msgspec.structs.replace(signed[0], upto=signed[0].upto + 1)
        assert "signature does not verify" in mismatch(lines, [forged_signature]).why
        not_hex = msgspec.structs.replace(signed[0], leaves=["zz", *signed[0].leaves])
        assert "a leaf is not hex" in mismatch(lines, [not_hex]).why
        other_root = msgspec.structs.replace(signed[0], leaves=signed[0].leaves[1:])
        assert "root is not the hash of its leaves" in mismatch(lines, [other_root]).why

    async def test_an_export_cut_short_of_a_checkpoint_is_caught(self, recorder):
        await billed(recorder)
        await legacy_checkpoint(recorder, Signer.generate())
        published = await published_of(recorder)
        lines = await exported(recorder)
        found = mismatch(lines[:-1], published)  # the last event dropped: the checkpoint holds it
        assert "signed another head" in found.why
