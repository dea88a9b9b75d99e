"""An org's webhook endpoints (POST/GET/PATCH/DELETE /v1/webhooks, the CLI): each one, and each
change of it, is a ledger event (ledger.events.WebhookSet) in the org's stream; its signing secret
is shown once, at creation, and kept sealed beside the ledger. Only admin keys manage endpoints.
"""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Annotated, Literal, NamedTuple, TypeVar, get_args

import msgspec
from msgspec import UNSET, UnsetType
from yarl import URL

from gateway.accounts import keys
from gateway.accounts.sealing import Sealer
from gateway.edge.errors import ApiError
from gateway.jsonio import number
from gateway.config import Config, ConfigError
from gateway.webhooks import destinations, sealing, signing
from gateway.webhooks.alerts import message_id
from ledger import webhooks
from ledger.events import Event, WebhookRemoved, WebhookSet, WebhookTestRequested
from ledger.money import from_nano, to_nano
from ledger.recorder import Append, Recorded, Recorder, Secret

T = TypeVar("T")
Appender = Callable[[Append], Awaitable[list[Recorded]]]  # records a unit durably, or raises why not
Alert = Literal["balance.low", "key.budget", "key.expiring", "credits.added", "request.refused", "webhook.test",
                "batch.completed", "batch.failed", "batch.expired", "batch.cancelled"]
DEFAULT_PERCENT = (50, 80, 100)
DEFAULT_HOURS = 24
Url = Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
Alerts = Annotated[list[Alert], msgspec.Meta(min_length=1, max_length=len(get_args(Alert)))]
Percents = Annotated[list[Annotated[int, msgspec.Meta(ge=1, le=1000)]], msgspec.Meta(min_length=1, max_length=10)]
Hours = Annotated[int, msgspec.Meta(ge=1, le=8760)]


class NewWebhook(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """POST /v1/webhooks: where to deliver, which alerts, and their thresholds."""

    url: Url
    events: Alerts
    balance_low_inr: Decimal | None = None
    key_budget_percent: Percents | None = None
    key_expiring_hours: Hours | None = None


class WebhookChange(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """PATCH /v1/webhooks/{id}: a field left out stays as it is; `enabled` true resumes delivery."""

    url: Url | UnsetType = UNSET
    events: Alerts | UnsetType = UNSET
    balance_low_inr: Decimal | UnsetType | None = UNSET
    key_budget_percent: Percents | UnsetType | None = UNSET
    key_expiring_hours: Hours | UnsetType | None = UNSET
    enabled: bool | UnsetType = UNSET


def parse_new(body: dict) -> NewWebhook:
    """A new endpoint's fields given as plain data (the CLI's), checked as the API checks its body."""
    try:
        return msgspec.convert(body, NewWebhook)
    except msgspec.ValidationError as exc:
        raise _bad(f"invalid webhook: {exc}", "") from None


class Webhooks(msgspec.Struct, frozen=True):
    """What managing endpoints needs: where they may point, how secrets are sealed (None: no
    `[secrets] master_key`, so no endpoint can be made), and the delivery loop's bell."""

    policy: destinations.Policy
    sealer: Sealer | None
    bell: asyncio.Event

    @classmethod
    def configured(cls, config: Config) -> "Webhooks":
        """From the configuration (the server's and the CLI's alike); ConfigError naming why not."""
        try:
            sealer = sealing.sealer_for(config)
        except OSError as exc:
            raise ConfigError(f"webhook secrets cannot be sealed: {exc}") from None
        return cls(destinations.Policy.from_config(config.webhooks), sealer, asyncio.Event())


class Manager(NamedTuple):
    """One org's endpoints as a caller manages them: with an admin key or not, through the API or the CLI."""

    hooks: Webhooks
    append: Appender
    recorder: Recorder
    org_id: str
    admin: bool

    def require_admin(self) -> None:
        if not self.admin:
            raise ApiError(403, "only an admin key may manage webhooks; this key is not one",
                           type="permission_denied")


def secret_name(webhook_id: str) -> str:
    """Where an endpoint's sealed secret is kept, and what it is sealed to."""
    return f"webhook:{webhook_id}"


def _bad(message: str, param: str) -> ApiError:
    return ApiError(400, message, param=param)


async def _checked_url(url: str, policy: destinations.Policy) -> str:
    """The URL, refused (400 naming why) if it may not be delivered to: scheme, host, addresses."""
    try:
        checked = destinations.check_url(url, policy)
        parts = URL(checked)
        await destinations.resolve(parts.raw_host or "", parts.port or 443, policy)
    except destinations.DestinationRefused as exc:
        raise _bad(f"webhook url refused: {exc}", "url") from None
    return checked


def _threshold(amount: Decimal | None) -> int | None:
    if amount is None:
        return None
    if not amount.is_finite() or amount < 0:
        raise _bad("balance_low_inr must be a finite amount of INR, 0 or more", "balance_low_inr")
    return to_nano(amount)


def _event(webhook_id: str, url: str, alerts: Sequence[str], low: int | None, percent: Sequence[int] | None,
           hours: int | None, enabled: bool = True) -> WebhookSet:
    """The endpoint's whole record, its thresholds checked and defaulted for the alerts it wants."""
    if "balance.low" in alerts and low is None:
        raise _bad("balance.low needs balance_low_inr, the balance (INR) below which to alert", "balance_low_inr")
    wants_budget, wants_expiry = "key.budget" in alerts, "key.expiring" in alerts
    return WebhookSet(webhook_id=webhook_id, url=url, alerts=tuple(dict.fromkeys(alerts)), balance_low_inr_nano=low,
                      key_budget_percent=tuple(sorted(set(percent or (DEFAULT_PERCENT if wants_budget else ())))),
                      key_expiring_hours=hours if hours is not None else DEFAULT_HOURS if wants_expiry else None,
                      enabled=enabled)


def item(endpoint: webhooks.Endpoint) -> dict:
    """An endpoint as the API shows it (never its secret)."""
    low = endpoint.balance_low_inr_nano
    return {"id": endpoint.webhook_id, "object": "webhook", "url": endpoint.url, "events": list(endpoint.alerts),
            "balance_low_inr": None if low is None else number(from_nano(low)),
            "key_budget_percent": list(endpoint.key_budget_percent), "key_expiring_hours": endpoint.key_expiring_hours,
            "enabled": endpoint.enabled, "disabled_reason": endpoint.disabled_reason or None,
            "created": endpoint.created_at_us // 1_000_000, "failing_since": _seconds(endpoint.failing_since_us),
            "failed_attempts": endpoint.attempts, "next_attempt_at": _seconds(endpoint.retry_at_us or None)}


def attempt_item(attempt: webhooks.Attempt) -> dict:
    return {"message_id": attempt.message_id, "type": attempt.alert, "attempt": attempt.attempt,
            "status": attempt.status, "delivered": attempt.delivered, "error": attempt.error or None,
            "latency_ms": attempt.latency_ms, "at": attempt.at_us // 1_000_000}


def _seconds(at_us: int | None) -> int | None:
    return None if at_us is None else at_us // 1_000_000


async def create(m: Manager, request: NewWebhook) -> dict:
    """A new endpoint of the org, with its secret: in this answer and nowhere else in clear."""
    m.require_admin()
    if m.hooks.sealer is None:
        raise ApiError(409, "webhooks need the operator to set [secrets] master_key (GATEWAY_SECRETS_MASTER_KEY):"
                            " their signing secrets are kept sealed with it", type="configuration_error")
    webhook_id, secret = keys.new_id("wh"), signing.new_secret()
    event = _event(webhook_id, request.url, request.events, _threshold(request.balance_low_inr),
                   request.key_budget_percent, request.key_expiring_hours)  # its fields first, then where it points
    event = msgspec.structs.replace(event, url=await _checked_url(request.url, m.hooks.policy))
    sealed = m.hooks.sealer.seal(m.org_id, secret_name(webhook_id), secret)
    await m.append(Append(m.org_id, [event], secrets=[Secret(secret_name(webhook_id), sealed)]))
    return {**item(await _endpoint(m, webhook_id)), "secret": secret}


async def listing(m: Manager) -> dict:
    m.require_admin()
    return {"object": "list", "data": [item(e) for e in await webhooks.of_org(m.recorder, m.org_id)]}


async def detail(m: Manager, webhook_id: str) -> dict:
    """One endpoint with its latest delivery attempts, newest first."""
    m.require_admin()
    async with m.recorder.snapshot():
        endpoint = await _endpoint(m, webhook_id)
        recent = await webhooks.recent(m.recorder, m.org_id, webhook_id)
    return {**item(endpoint), "deliveries": [attempt_item(a) for a in recent]}


async def change(m: Manager, webhook_id: str, request: WebhookChange) -> dict:
    """The endpoint with the fields given changed (re-checked), the others as they were."""
    m.require_admin()
    was = await _endpoint(m, webhook_id)
    low = _given(request.balance_low_inr, None)
    alerts: Sequence[str] = was.alerts if isinstance(request.events, UnsetType) else request.events
    event = _event(webhook_id, was.url, alerts,
                   was.balance_low_inr_nano if request.balance_low_inr is UNSET else _threshold(low),
                   _given(request.key_budget_percent, list(was.key_budget_percent)),
                   _given(request.key_expiring_hours, was.key_expiring_hours),
                   enabled=_given(request.enabled, was.enabled))
    if not isinstance(request.url, UnsetType):
        event = msgspec.structs.replace(event, url=await _checked_url(request.url, m.hooks.policy))
    await _record(m, event)
    return item(await _endpoint(m, webhook_id))


def _given(value: T | UnsetType, was: T) -> T:
    return was if isinstance(value, UnsetType) else value


async def remove(m: Manager, webhook_id: str) -> dict:
    """The endpoint and its secret go; nothing more is delivered to it."""
    m.require_admin()
    await _endpoint(m, webhook_id)
    await m.append(Append(m.org_id, [WebhookRemoved(webhook_id=webhook_id)],
                          secrets=[Secret(secret_name(webhook_id), None)]))
    return {"id": webhook_id, "object": "webhook", "deleted": True}


async def test(m: Manager, webhook_id: str) -> dict:
    """A webhook.test delivery, queued in order behind the endpoint's alerts (202)."""
    m.require_admin()
    endpoint = await _endpoint(m, webhook_id)
    [recorded] = await _record(m, WebhookTestRequested(webhook_id=webhook_id))
    return {"id": message_id(m.org_id, recorded.version, "webhook.test"), "type": "webhook.test",
            "webhook_id": webhook_id, "enabled": endpoint.enabled}


async def _record(m: Manager, event: Event) -> list[Recorded]:
    recorded = await m.append(Append(m.org_id, [event]))
    m.hooks.bell.set()  # this process may be the one delivering: no need to wait for its next look
    return recorded


async def _endpoint(m: Manager, webhook_id: str) -> webhooks.Endpoint:
    endpoint = await webhooks.one(m.recorder, m.org_id, webhook_id)
    if endpoint is None:  # the same answer for another org's endpoint as for none at all
        raise ApiError(404, f"no webhook {webhook_id} in this organization", type="not_found")
    return endpoint
