"""A bill the customer can verify, from outside (issue 28): an org's admin key downloads its
export over HTTP after real requests made with the official SDKs on every billed route, the
signed checkpoints and the public key with no key at all, and checks them with the offline
verifier as a separate process that reads no configuration; then the operator's database and the
customer's file are tampered with, and the verifier says where."""

import base64
import csv
import io
import json
import sqlite3
import wave
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from gateway.accounts import admin
from gateway.edge.state import SERVICES
from ledger import export, notes, signing
from ledger.signing import Signer
from tests.gateway.gateway_helpers import run_cli_async
from tests.ledger.export_contract import forged, stored_data
from tests.support import auth, clean_env, poll, signing_checkpoints

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
EVENTS, CHECKPOINTS, PUBLIC_KEY = "/v1/ledger/events", "/v1/ledger/checkpoints", "/v1/ledger/public-key"
DEADLINE_S = 60.0  # for waits on a condition: generous, a loaded machine is slow, not wrong


@pytest.fixture
def signer() -> Signer:
    return Signer.generate()


@pytest.fixture
async def signing_gateway(make_gateway, config, signer, tmp_path):
    # The holds' upkeep (lease renewals, idle slices returned) first runs long after the test: what
    # the operator rewrites below is a ledger at rest (`at_rest`), not one a renewal lands on.
    billing = msgspec.structs.replace(config.billing, hold_lease_s=3600.0, escrow_idle_s=3600.0)
    return await make_gateway(signing_checkpoints(msgspec.structs.replace(config, billing=billing), signer, tmp_path))


def speech_wav(seconds: float = 1.0) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(bytes(int(16000 * seconds)))
    return out.getvalue()


async def every_billed_route(gateway, api_key: str) -> int:
    """One request the way each SDK sends it on each billed route; how many succeeded."""
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=api_key, max_retries=0)
    await client.chat.completions.create(model="gpt-4o-mini",
                                         messages=[{"role": "user", "content": "hi [sim:tokens=5]"}])
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi [sim:tokens=3]"}], stream=True,
        stream_options={"include_usage": True})
    _ = [chunk async for chunk in stream]
    await client.embeddings.create(model="text-embedding-3-small", input=["alpha", "beta"])
    await client.responses.create(model="gpt-4o-mini", input="hello [sim:tokens=4]")
    await client.audio.speech.create(model="tts-1", voice="alloy", input="read this")
    await client.audio.transcriptions.create(model="whisper-1", file=("talk.wav", speech_wav(), "audio/wav"))
    claude = anthropic.AsyncAnthropic(base_url=gateway.url, api_key=api_key, max_retries=0)
    await claude.messages.create(model="claude-haiku-4-5", max_tokens=50, messages=[
        {"role": "user", "content": "hello [sim:tokens=4] [sim:cache_read=3]"}])
    with pytest.raises(openai.RateLimitError):  # failed: recorded, not charged
        await client.chat.completions.create(model="gpt-4o-mini",
                                             messages=[{"role": "user", "content": "[sim:status=429]"}])
    return 7


async def download(gateway, api_key: str, **query: str) -> list[bytes]:
    response = await gateway.client.get(EVENTS, params=query, headers=auth(api_key))
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"].startswith("application/x-ndjson")
    return (await response.read()).splitlines(keepends=True)


async def checkpoints_published(gateway, min_size: int) -> dict:
    """GET /v1/ledger/checkpoints, with no key, once the gateway has a tree head of `min_size` events."""
    async def published() -> dict:
        response = await gateway.client.get(CHECKPOINTS)
        assert response.status == 200
        return await response.json()
    body = await poll(published, lambda body: body["checkpoints"] and body["checkpoints"][0]["tree_size"] >= min_size,
                      timeout=DEADLINE_S)
    assert body["checkpoints"] and body["checkpoints"][0]["tree_size"] >= min_size, f"no tree head of {min_size}"
    return body


async def fetched_proofs(gateway, org_id: str, lines: list[bytes], tmp_path: Path) -> Path:
    """`gateway ledger fetch-proofs` run by the operator on the gateway's ledger: the proofs file."""
    config, export_file, out = tmp_path / "operator.toml", tmp_path / "for-proofs.ndjson", tmp_path / "proofs.json"
    config.write_text(f'[ledger]\nurl = "{gateway.ledger.recorder.url}"\n')
    export_file.write_bytes(b"".join(lines))
    result = await run_cli_async("ledger", "fetch-proofs", org_id, "--export", str(export_file), "--out", str(out),
                                 "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tree_heads"] >= 1
    return out


async def at_rest(gateway, org_id: str) -> None:
    """Once nothing more is appended to the org's stream in the background: the releases under way
    recorded, the escrow refills under way ended, and then every slice returned."""
    services = gateway.server.app[SERVICES]
    await services.releases.settled()
    await services.escrow.settled()
    await services.escrow.return_idle(0)
    [(held,)] = await gateway.ledger.recorder._fetch("SELECT held_inr_nano FROM orgs WHERE org_id = ?", (org_id,))
    assert held == 0


async def check_export(tmp_path: Path, lines: list[bytes], *options: str) -> tuple[int, dict | None, str]:
    """`gateway ledger check-export` in a directory with no configuration and an environment
    without GATEWAY_*: exit code, report, stderr."""
    path = tmp_path / "export.ndjson"
    path.write_bytes(b"".join(lines))
    result = await run_cli_async("ledger", "check-export", str(path), *options, env=clean_env())
    return result.returncode, json.loads(result.stdout) if result.stdout else None, result.stderr


async def test_a_customer_verifies_their_bill_and_catches_tampering(signing_gateway, signer, tmp_path):
    gateway = signing_gateway
    org = await gateway.new_org("50")
    succeeded = await every_billed_route(gateway, org["api_key"])
    await at_rest(gateway, org["org_id"])  # the export is then the org's whole history, to its end
    lines = await download(gateway, org["api_key"])
    last = msgspec.json.decode(lines[-1])["position"]
    published = await checkpoints_published(gateway, last)
    (tmp_path / "checkpoints.json").write_text(json.dumps(published))
    pem = await (await gateway.client.get(PUBLIC_KEY)).text()
    assert signing.key_id(signing.public_raw(pem.encode())) == signer.key_id
    (tmp_path / "public.pem").write_text(pem)
    proofs = await fetched_proofs(gateway, org["org_id"], lines, tmp_path)
    pinned = ("--checkpoints", str(tmp_path / "checkpoints.json"), "--public-key", str(tmp_path / "public.pem"),
              "--proofs", str(proofs))

    code, report, stderr = await check_export(tmp_path, lines, *pinned)
    assert code == 0, stderr
    assert Decimal(report["balance_inr"]) == await gateway.balance(org["org_id"])
    assert report["requests"] == succeeded + 1 and report["charges_recomputed"] == succeeded
    assert report["tree_heads_included"] >= 1 and report["signing_keys"] == [signer.key_id]
    code, _, stderr = await check_export(tmp_path, lines, *pinned[:4])  # a tree head without its proofs
    assert code == 1 and "no proofs" in stderr

    await statement_equals_export(gateway, org["api_key"], lines)

    changed = list(lines)
    middle = len(changed[5]) // 2
    byte = b"X" if changed[5][middle:middle + 1] != b"X" else b"Y"
    changed[5] = changed[5][:middle] + byte + changed[5][middle + 1:]
    code, _, stderr = await check_export(tmp_path, changed)
    assert code == 1 and f"position {msgspec.json.decode(lines[5])['position']}" in stderr

    # The operator rewrites history in the database, chain made whole again: only a checkpoint shows it.
    rewritten = forged(lines, 2, lambda fields: fields.update(note="rewritten"))
    db = gateway.ledger.recorder.url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as connection:
        connection.executescript("DROP TRIGGER events_are_immutable; DROP TRIGGER events_are_permanent;")
        connection.executemany("UPDATE events SET data = ?, hash = ? WHERE position = ?", [
            (stored_data(raw), bytes.fromhex(msgspec.json.decode(raw)["hash"]), msgspec.json.decode(raw)["position"])
            for raw in rewritten[2:]])
    again = await download(gateway, org["api_key"])
    assert (await check_export(tmp_path, again))[0] == 0  # consistent on its own
    await fetched_proofs(gateway, org["org_id"], again, tmp_path)  # from the operator's changed ledger
    code, _, stderr = await check_export(tmp_path, again, *pinned)
    assert code == 1 and "history was rewritten" in stderr and "position" in stderr


async def statement_equals_export(gateway, api_key: str, lines: list[bytes]) -> None:
    """The statement of the month of the export's last event, figure by figure, is the sum of the
    export's events (to the nano-rupee), its CSV row by row."""
    events = [msgspec.json.decode(line) for line in lines]
    month = events[-1]["recorded_at"][:7]
    before = [e for e in events if e["recorded_at"][:7] < month]
    inside = [e for e in events if e["recorded_at"][:7] == month]
    credits_nano, charged = (lambda es: sum(e["amount_inr_nano"] for e in es if e["type"] == "credits_added"),
                             lambda es: sum(e["charged_inr_nano"] for e in es if e["type"] == "request_completed"))
    rows: dict[tuple, list[int]] = {}
    for e in inside:
        if e["type"] == "request_completed":
            row = rows.setdefault((e["recorded_at"][:10], e["key_id"], e["model"]), [0, 0])
            row[0], row[1] = row[0] + 1, row[1] + e["charged_inr_nano"]
    body = await (await gateway.client.get(f"/v1/statements/{month}", headers=auth(api_key))).json()
    nano = lambda text: int(Decimal(text) * 10**9)  # noqa: E731
    opening = credits_nano(before) - charged(before)
    assert (nano(body["opening_balance_inr"]), nano(body["credits_inr"]), nano(body["charges_inr"])) == (
        opening, credits_nano(inside), charged(inside))
    assert nano(body["closing_balance_inr"]) == opening + credits_nano(inside) - charged(inside)
    held = sum(e["amount_inr_nano"] for e in events if e["type"] == "credits_held") - sum(
        e["amount_inr_nano"] for e in events if e["type"] == "hold_released") - sum(
        d["amount_inr_nano"] for e in events if e["type"] == "request_completed" for d in e["draws"])
    # What the month's holds still hold at its end (now): requests' own, and escrow slices apart.
    assert nano(body["held_inr"]) + nano(body["escrow_inr"]) == held
    assert sum(r["requests"] for r in body["by_model"]) == sum(row[0] for row in rows.values())
    csv_text = await (await gateway.client.get(f"/v1/statements/{month}", params={"format": "csv"},
                                                headers=auth(api_key))).text()
    [_, *table] = list(csv.reader(io.StringIO(csv_text)))
    assert {(day, key, model): [int(requests), nano(inr)] for day, key, model, requests, inr in table} == rows


async def test_only_an_admin_key_exports_and_only_its_own_org(gateway):
    org, other = await gateway.new_org("5"), await gateway.new_org("7")
    member = await admin.create_key(gateway.ledger.recorder, org["org_id"], "member")
    await gateway.ledger.follower.catch_up()
    lines = await download(gateway, org["api_key"])
    assert [msgspec.json.decode(line)["type"] for line in lines] == ["org_created", "key_created", "credits_added",
                                                                     "key_created"]
    assert not any(other["org_id"].encode() in line for line in lines)
    refused = await gateway.client.get(EVENTS, headers=auth(member["api_key"]))
    assert refused.status == 403 and "admin" in (await refused.json())["error"]["message"]
    assert (await gateway.client.get(EVENTS)).status == 401


async def test_an_export_pages_by_position_and_time(gateway):
    org = await gateway.new_org("5")
    whole = await download(gateway, org["api_key"])
    first = msgspec.json.decode(whole[0])
    assert await download(gateway, org["api_key"], after=str(first["position"]), limit="1") == whole[1:2]
    late = export.instant(msgspec.json.decode(whole[-1])["recorded_at_us"] + 1)
    assert await download(gateway, org["api_key"], to=late) == whole
    assert await download(gateway, org["api_key"], **{"from": late}) == []


@pytest.mark.parametrize(("query", "param"), [
    ({"after": "-1"}, "after"), ({"after": "x"}, "after"), ({"limit": "0"}, "limit"),
    ({"from": "yesterday"}, "from"), ({"to": "2026-13-01"}, "to")])
async def test_a_malformed_export_query_is_a_400_naming_it(gateway, query, param):
    org = await gateway.new_org("5")
    response = await gateway.client.get(EVENTS, params=query, headers=auth(org["api_key"]))
    assert response.status == 400
    assert (await response.json())["error"]["param"] == param


async def test_without_a_signing_key_checkpoints_are_unsigned_and_there_is_no_public_key(make_gateway, config):
    ledger = msgspec.structs.replace(config.ledger, checkpoint_interval_s=0.2)
    gateway = await make_gateway(msgspec.structs.replace(config, ledger=ledger))
    org = await gateway.new_org("5")
    lines = await download(gateway, org["api_key"])
    body = await checkpoints_published(gateway, msgspec.json.decode(lines[-1])["position"])
    assert body["checkpoints"][0]["key_id"] == "" and body["public_keys"] == []
    assert "\u2014" not in body["checkpoints"][0]["note"]  # a note's text, signed by no key
    missing = await gateway.client.get(PUBLIC_KEY)
    assert missing.status == 404 and "signing_key" in (await missing.json())["error"]["message"]


async def test_a_tree_head_is_a_signed_note_naming_no_stream(signing_gateway, signer):
    org = await signing_gateway.new_org("5")
    lines = await download(signing_gateway, org["api_key"])
    body = await checkpoints_published(signing_gateway, msgspec.json.decode(lines[-1])["position"])
    text = json.dumps(body)
    assert org["org_id"] not in text and msgspec.json.decode(lines[-1])["hash"] not in text
    [key] = body["public_keys"]
    head = body["checkpoints"][0]
    assert set(head) == {"tree_size", "root_hash", "recorded_at", "note", "key_id", "position"}
    public = signing.public_raw(key["public_key_pem"].encode())
    assert key["current"] and key["key_id"] == head["key_id"] == signer.key_id
    stated = notes.opened(head["note"], "ai-gateway/ledger", public)
    assert (stated.size, base64.b64encode(stated.root).decode()) == (head["tree_size"], head["root_hash"])


async def test_the_operator_s_export_is_the_same_lines(gateway, tmp_path):
    org = await gateway.new_org("5")
    await every_billed_route(gateway, org["api_key"])
    config = tmp_path / "operator.toml"
    config.write_text(f'[ledger]\nurl = "{gateway.ledger.recorder.url}"\n')
    exported = await run_cli_async("ledger", "export", org["org_id"], "--config", str(config))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.encode() == b"".join(await download(gateway, org["api_key"]))
