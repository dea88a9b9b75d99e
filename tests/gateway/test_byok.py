"""Bring your own key: an organization's provider key is sealed at rest, used for its requests to
that provider, and such requests are recorded with their cost but not charged (spec 4.1, 7)."""

from pathlib import Path

import msgspec
import pytest

from gateway.accounts import admin
from gateway.accounts.admin import AdminError
from gateway.accounts.sealing import Sealer, SealingError
from ledger.events import CreditsHeld, ProviderKeySet, RequestCompleted
from tests.support import PROVIDER_KEY, auth, chat_body, clean_env
from tests.gateway.gateway_helpers import run_cli_async

MASTER = "test-master-key-0123456789"
ORG_OPENAI_KEY = "sk-org-own-openai-key-abcdefghijklmnop"
ORG_GOOGLE_KEY = "AIzaOrgOwnGoogleKey0123456789abcdef"


@pytest.fixture
async def byok(make_gateway, config):
    secrets = msgspec.structs.replace(config.secrets, master_key=MASTER)
    return await make_gateway(msgspec.structs.replace(config, secrets=secrets))


async def own_key(gateway, org_id: str, provider: str, key: str) -> dict:
    result = await admin.set_provider_key(gateway.ledger.recorder, Sealer(MASTER), org_id, provider, key)
    await gateway.ledger.follower.catch_up()
    return result


async def last_upstream(gateway, simulator) -> dict:
    recorded = await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json()
    return recorded["data"][-1]


async def requests(gateway) -> list[RequestCompleted]:
    return [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]


async def test_own_key_is_used_and_the_request_is_recorded_with_its_cost_but_not_charged(byok, simulator):
    org = await byok.new_org("100")
    await own_key(byok, org["org_id"], "openai", ORG_OPENAI_KEY)
    for stream in (False, True):
        response = await byok.client.post("/v1/chat/completions", headers=auth(org["api_key"]),
                                          json=chat_body(stream=stream))
        assert response.status == 200
        await response.read()
        assert (await last_upstream(byok, simulator))["headers"]["authorization"] == f"Bearer {ORG_OPENAI_KEY}"
    recorded = await requests(byok)
    assert len(recorded) == 2
    assert all(r.cost_inr_nano > 0 and r.charged_inr_nano == 0 for r in recorded)
    assert await byok.balance(org["org_id"]) == 100


async def test_no_credit_is_402_unless_the_orgs_own_key_applies(byok, simulator):
    org = await byok.new_org("0")
    headers = auth(org["api_key"])
    assert (await byok.client.post("/v1/chat/completions", headers=headers, json=chat_body())).status == 402
    await own_key(byok, org["org_id"], "anthropic", "sk-ant-org-key-0123456789")  # another provider's
    assert (await byok.client.post("/v1/chat/completions", headers=headers, json=chat_body())).status == 402
    await own_key(byok, org["org_id"], "openai", ORG_OPENAI_KEY)
    assert (await byok.client.post("/v1/chat/completions", headers=headers, json=chat_body())).status == 200


async def test_a_removed_key_sends_the_org_back_to_credits(byok, simulator):
    org = await byok.new_org("100")
    await own_key(byok, org["org_id"], "openai", ORG_OPENAI_KEY)
    await admin.remove_provider_key(byok.ledger.recorder, org["org_id"], "openai")
    await byok.ledger.follower.catch_up()
    response = await byok.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json=chat_body())
    assert response.status == 200
    assert (await last_upstream(byok, simulator))["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    [recorded] = await requests(byok)
    assert recorded.charged_inr_nano == recorded.cost_inr_nano > 0


async def test_a_rotated_key_is_used_from_the_next_request(byok, simulator):
    org = await byok.new_org("100")
    await own_key(byok, org["org_id"], "openai", ORG_OPENAI_KEY)
    await byok.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json=chat_body())
    await own_key(byok, org["org_id"], "openai", "sk-org-rotated-key-0123456789")
    await byok.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json=chat_body())
    assert (await last_upstream(byok, simulator))["headers"]["authorization"] == "Bearer sk-org-rotated-key-0123456789"


async def test_music_with_the_orgs_google_key_holds_nothing_and_charges_nothing(byok, simulator):
    org = await byok.new_org("0")
    await own_key(byok, org["org_id"], "google", ORG_GOOGLE_KEY)
    response = await byok.client.post("/v1/music", headers=auth(org["api_key"]),
                                      json={"model": "tune-3-clip-preview", "prompt": "calm piano"})
    assert response.status == 200, await response.text()
    assert (await last_upstream(byok, simulator))["headers"]["x-goog-api-key"] == ORG_GOOGLE_KEY
    assert not any(isinstance(r.event, CreditsHeld) for r in await byok.events())
    [recorded] = await requests(byok)
    assert recorded.cost_inr_nano > 0 and recorded.charged_inr_nano == 0


async def test_a_key_sealed_under_another_master_key_is_a_clear_error_without_the_key(make_gateway, config, simulator):
    secrets = msgspec.structs.replace(config.secrets, master_key="another-master-key")
    gateway = await make_gateway(msgspec.structs.replace(config, secrets=secrets))
    org = await gateway.new_org("100")
    await own_key(gateway, org["org_id"], "openai", ORG_OPENAI_KEY)  # sealed under MASTER
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json=chat_body())
    body = await response.text()
    assert response.status == 500 and "master_key" in body and ORG_OPENAI_KEY not in body


async def test_without_a_master_key_provider_keys_are_refused(gateway):
    org = await gateway.new_org("1")
    with pytest.raises(AdminError, match="master_key"):
        await admin.set_provider_key(gateway.ledger.recorder, Sealer(""), org["org_id"], "openai", ORG_OPENAI_KEY)
    with pytest.raises(AdminError, match="provider must be one of"):
        await admin.set_provider_key(gateway.ledger.recorder, Sealer(MASTER), org["org_id"], "acme", "k")


async def test_cli_prints_a_fingerprint_and_the_key_is_nowhere_in_the_database_files(tmp_path):
    env = clean_env(GATEWAY_LEDGER_URL=f"sqlite:///{tmp_path}/data/ledger.db", GATEWAY_SECRETS_MASTER_KEY=MASTER,
                    ORG_KEY=ORG_OPENAI_KEY)
    created = await run_cli_async("admin", "create-org", "acme", env=env)
    org_id = msgspec.json.decode(created.stdout)["org_id"]
    result = await run_cli_async("admin", "set-provider-key", org_id, "openai", "env:ORG_KEY", env=env)
    assert result.returncode == 0, result.stderr
    printed = msgspec.json.decode(result.stdout)
    fingerprint = Sealer(MASTER).fingerprint(ORG_OPENAI_KEY)
    assert printed == {"org_id": org_id, "provider": "openai", "fingerprint": fingerprint}
    assert ORG_OPENAI_KEY not in result.stdout + result.stderr
    stored = b"".join(path.read_bytes() for path in Path(tmp_path, "data").iterdir())
    assert ORG_OPENAI_KEY.encode() not in stored and b"org-own-openai" not in stored
    removed = await run_cli_async("admin", "remove-provider-key", org_id, "openai", env=env)
    assert msgspec.json.decode(removed.stdout)["removed"] is True


def test_sealed_keys_open_only_for_their_org_and_provider_and_master_key():
    sealer = Sealer(MASTER)
    sealed = sealer.seal("org_a", "openai", ORG_OPENAI_KEY)
    assert ORG_OPENAI_KEY.encode() not in sealed
    assert sealer.open("org_a", "openai", sealed) == ORG_OPENAI_KEY
    assert sealer.seal("org_a", "openai", ORG_OPENAI_KEY) != sealed  # a fresh nonce each time
    for org, provider, other in (("org_b", "openai", sealer), ("org_a", "google", sealer),
                                 ("org_a", "openai", Sealer("another"))):
        with pytest.raises(SealingError):
            other.open(org, provider, sealed)
    assert sealer.fingerprint(ORG_OPENAI_KEY) == Sealer(MASTER).fingerprint(ORG_OPENAI_KEY)
    assert sealer.fingerprint(ORG_OPENAI_KEY) != Sealer("another").fingerprint(ORG_OPENAI_KEY)


async def test_the_event_log_holds_only_the_fingerprint(byok):
    org = await byok.new_org("1")
    result = await own_key(byok, org["org_id"], "openai", ORG_OPENAI_KEY)
    [event] = [r for r in await byok.events() if isinstance(r.event, ProviderKeySet)]
    assert event.event.fingerprint == result["fingerprint"] and ORG_OPENAI_KEY.encode() not in event.data
