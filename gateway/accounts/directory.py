"""The in-memory view auth and the credit check read on every request.

It is a projection of the ledger kept in each process: loaded from the projection tables at
start, then fed every new event (this process's at commit, other processes' by polling).
"""

from collections.abc import Sequence

import msgspec

from gateway.accounts import keys
from ledger import queries
from ledger.events import (
    ApiKeyCreated, ApiKeyRevoked, CreditsAdded, CreditsHeld, HoldReleased, OrgCreated,
    KeyLimitsSet, KeySpendLimitsSet, ProviderKeyRemoved, ProviderKeySet, RequestCompleted, RetentionChanged,
)
from ledger.recorder import Recorded, Recorder


class Principal(msgspec.Struct, frozen=True):
    """Who is calling: the key and the organization it bills."""

    key_id: str
    org_id: str
    admin: bool = False


class SpendLimits(msgspec.Struct, frozen=True):
    """A key's spend controls as the ledger last recorded them (ledger.events.KeySpendLimitsSet)."""

    budget_inr_nano: int | None = None
    budget_period: str = "total"
    models: tuple[str, ...] = ()
    expires_at_us: int | None = None

    @classmethod
    def of(cls, event: KeySpendLimitsSet) -> "SpendLimits":
        return cls(event.budget_inr_nano, event.budget_period, event.models, event.expires_at_us)


NO_SPEND_LIMITS = SpendLimits()


class OrgAccount(msgspec.Struct):
    retention: str
    credits_inr_nano: int = 0
    spent_inr_nano: int = 0
    held_inr_nano: int = 0

    @property
    def balance_inr_nano(self) -> int:
        return self.credits_inr_nano - self.spent_inr_nano

    @property
    def available_inr_nano(self) -> int:
        """What may still be reserved: the balance less what running requests hold."""
        return self.balance_inr_nano - self.held_inr_nano


class Directory:
    def __init__(self) -> None:
        self._keys: dict[str, Principal] = {}  # by key digest; revoked keys are removed
        self._digests: dict[str, str] = {}  # key id -> digest, to revoke by id
        self._orgs: dict[str, OrgAccount] = {}
        self._provider_keys: dict[tuple[str, str], str] = {}  # (org, provider) -> fingerprint
        self._key_limits: dict[str, tuple[int, int]] = {}  # key id -> (requests, tokens) per minute
        self._spend_limits: dict[str, SpendLimits] = {}  # key id -> its spend controls, if it has any

    def authenticate(self, key: str) -> Principal | None:
        return self._keys.get(keys.digest(key))

    def account(self, org_id: str) -> OrgAccount | None:
        return self._orgs.get(org_id)

    def key_limits(self, key_id: str) -> tuple[int, int] | None:
        """A key's own (requests, tokens) per minute, if it was given any."""
        return self._key_limits.get(key_id)

    def spend_limits(self, key_id: str) -> SpendLimits:
        """A key's budget, allowed models and expiry (none of them, when never set)."""
        return self._spend_limits.get(key_id, NO_SPEND_LIMITS)

    def provider_key(self, org_id: str, provider: str) -> str | None:
        """The fingerprint of the organization's own key for `provider`, if it has one."""
        return self._provider_keys.get((org_id, provider))

    def apply(self, recorded: Recorded) -> None:
        """Fold one event into the view."""
        org = recorded.stream_id
        match recorded.event:
            case OrgCreated(retention=retention):
                self._orgs[org] = OrgAccount(retention)
            case RetentionChanged(retention=retention):
                self._orgs[org].retention = retention
            case CreditsAdded(amount_inr_nano=amount):
                self._orgs[org].credits_inr_nano += amount
            case RequestCompleted(charged_inr_nano=charged, draws=draws) as event:
                account = self._orgs[org]
                account.spent_inr_nano += charged
                if draws:
                    account.held_inr_nano -= event.drawn_inr_nano
            case CreditsHeld(amount_inr_nano=amount):
                self._orgs[org].held_inr_nano += amount
            case HoldReleased(amount_inr_nano=amount):
                self._orgs[org].held_inr_nano -= amount
            case ApiKeyCreated(key_id=key_id, key_hash=key_hash, admin=admin):
                self._keys[key_hash] = Principal(key_id, org, admin)
                self._digests[key_id] = key_hash
            case ProviderKeySet(provider=provider, fingerprint=fingerprint):
                self._provider_keys[(org, provider)] = fingerprint
            case KeyLimitsSet(key_id=key_id, requests_per_minute=rpm, tokens_per_minute=tpm):
                if (principal := self._keys.get(self._digests.get(key_id, ""))) and principal.org_id == org:
                    self._key_limits[key_id] = (rpm, tpm)
            case KeySpendLimitsSet(key_id=key_id) as event:
                if (principal := self._keys.get(self._digests.get(key_id, ""))) and principal.org_id == org:
                    self._spend_limits[key_id] = SpendLimits.of(event)
            case ProviderKeyRemoved(provider=provider):
                self._provider_keys.pop((org, provider), None)
            case ApiKeyRevoked(key_id=key_id):
                digest = self._digests.get(key_id, "")
                if (principal := self._keys.get(digest)) and principal.org_id == org:
                    self._keys.pop(digest)
                    del self._digests[key_id]

    async def load(self, recorder: Recorder) -> int:
        """Fill the view from the projection tables; returns the position it reflects."""
        async with recorder.snapshot():
            position = await queries.last_position(recorder)
            self._load_orgs(await queries.orgs(recorder))
            self._load_keys(await queries.active_keys(recorder))
            for key_id, rpm, tpm in await queries.key_limits(recorder):
                self._key_limits[key_id] = (rpm, tpm)
            for row in await queries.spend_limits(recorder):
                self._spend_limits[row.key_id] = SpendLimits(*row[1:])
            for org_id, provider, fingerprint in await queries.provider_keys(recorder):
                self._provider_keys[(org_id, provider)] = fingerprint
        return position

    def _load_orgs(self, rows: Sequence[queries.Org]) -> None:
        for org_id, _name, retention, credits, spent, held in rows:
            self._orgs[org_id] = OrgAccount(retention, credits, spent, held)

    def _load_keys(self, rows: Sequence[queries.ActiveKey]) -> None:
        for key_id, org_id, key_hash, admin in rows:
            self._keys[key_hash] = Principal(key_id, org_id, admin)
            self._digests[key_id] = key_hash
