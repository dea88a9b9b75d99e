"""The facts the ledger records: frozen, tagged msgspec Structs, encoded once, never changed.

Every event belongs to the stream of one organization; the stream id is the org id, so events
do not repeat it (the exceptions: the ledger's own stream of checkpoints, LedgerVerified, and the
stream of price switches, CatalogueSwitched).
Money is integer nano-units; the USD->INR rate used is recorded as text.
"""

from typing import Literal

import msgspec

Retention = Literal["retain", "none"]
BudgetPeriod = Literal["day", "month", "total"]  # a UTC day, a calendar month (UTC), or for ever
# How an escrow slice's hold id begins (gateway.billing.escrow names each new_id("slice")); a
# request's own hold is named otherwise ("hold_..."). The id is in every event that changes a hold.
SLICE_PREFIX = "slice_"


def is_slice(hold_id: str) -> bool:
    """Whether a hold is an escrow slice, credit a process took ahead, rather than a request's own."""
    return hold_id.startswith(SLICE_PREFIX)


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every ledger event.

    Subclasses repeat `frozen=True`: msgspec inherits it, but type checkers read it per class.
    """


class OrgCreated(Event, frozen=True, tag="org_created"):
    name: str
    retention: Retention = "retain"


class ApiKeyCreated(Event, frozen=True, tag="key_created"):
    key_id: str
    key_hash: str  # SHA-256 hex of the key; the key itself is never stored
    prefix: str  # the first characters, so a person can tell keys apart
    name: str = ""
    admin: bool = False


class ApiKeyRevoked(Event, frozen=True, tag="key_revoked"):
    key_id: str


class CreditsAdded(Event, frozen=True, tag="credits_added"):
    amount_inr_nano: int
    note: str = ""


class RetentionChanged(Event, frozen=True, tag="retention_changed"):
    retention: Retention


class Attempt(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One upstream call a request made: a provider that failed before the one that answered,
    or the one that answered (status 200). Error is the provider's failure, as the client heard it."""

    provider: str
    status: int
    latency_ms: int
    error: str = ""


class Draw(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Part of a request's charge paid from a hold its process reserved ahead (an escrow slice,
    gateway.billing.escrow): that much of the hold ends with the charge, in the same event."""

    hold_id: str
    amount_inr_nano: int
    key_id: str = ""  # the hold's key, as it was held


class Priced(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a request's cost was computed from, beside its token counts, so anyone holding the
    event can compute the cost again (ledger.charges.usd_nano): USD prices as decimal text, per
    token (the cache prices already resolved: a model without one has the prompt price there),
    per minute of audio transcribed, per request (a music generation)."""

    prompt_usd: str = "0"  # per prompt token neither read from nor written to the cache
    completion_usd: str = "0"
    cached_tokens: int = 0  # prompt tokens read from the provider's prompt cache
    cache_read_usd: str = "0"
    cache_write_tokens: int = 0  # prompt tokens written to it for five minutes
    cache_write_usd: str = "0"
    cache_write_1h_tokens: int = 0  # prompt tokens written to it for an hour
    cache_write_1h_usd: str = "0"
    seconds: str = "0"  # audio transcribed, priced per minute
    per_minute_usd: str = "0"
    flat_usd: str = "0"
    # The catalogue's price version the prices are from (GET /v1/prices/{version}) and the tier of
    # it they are (ledger.price_tiers): empty on requests recorded before prices had versions.
    version: str = ""
    tier: str = ""


class RequestCompleted(Event, frozen=True, tag="request_completed"):
    """One API request, successful or not. `charged_inr_nano` is what the balance pays: its true
    cost (tokens x catalogue price, `priced`), whatever it held. `draws` take part of that from holds its
    process reserved ahead; `anomaly` says why the request cost more than it held, if it did."""

    request_id: str
    key_id: str
    route: str
    model: str
    provider: str
    status: int
    stream: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd_nano: int = 0
    cost_inr_nano: int = 0
    charged_inr_nano: int = 0
    usd_to_inr: str = "0"
    latency_ms: int = 0
    error: str = ""
    content_id: str = ""  # prompt/response text lives in the content table, referenced here
    content_hash: str = ""
    # Every upstream call in order, when the request was routed (failover); the last one is
    # `provider`'s. Empty for a request that made no call or predates routing.
    attempts: tuple[Attempt, ...] = ()
    draws: tuple[Draw, ...] = ()
    anomaly: str = ""
    # What the cost was computed from, and whether the org paid the provider with its own key
    # (charged nothing): None on requests recorded before costs could be recomputed from events.
    priced: Priced | None = None
    byok: bool = False
    # A line of a batch (BatchCreated): the batch and the line's custom_id, each line recorded once.
    batch_id: str = ""
    custom_id: str = ""

    @property
    def drawn_inr_nano(self) -> int:
        return sum(draw.amount_inr_nano for draw in self.draws)

    @property
    def drawn_from_slices_inr_nano(self) -> int:
        return sum(draw.amount_inr_nano for draw in self.draws if is_slice(draw.hold_id))


class CreditsHeld(Event, frozen=True, tag="credits_held"):
    """Credit reserved for a request before its upstream call, or by a process for the requests
    it will admit (an escrow slice: `request_id` ""). The ledger refuses a hold the
    organization's available balance (credits - spent - held) cannot cover, and one of a key
    (`key_id`) whose budget has no room left in its period (budget - spent - held). A second
    hold of the same `hold_id` adds to it. A hold lapses `lease_us` after it was recorded (or
    last renewed, HoldsRenewed); a lapsed hold is released by whoever sees it first (expired)."""

    hold_id: str
    request_id: str
    amount_inr_nano: int
    key_id: str = ""  # the key the request came with ("": recorded before keys had budgets)
    lease_us: int = 0  # 0: recorded before leases; such a hold lapses LEGACY_LEASE_US after it was made

    def released(self, amount_inr_nano: int | None = None) -> "HoldReleased":
        """The end of this hold, or of `amount_inr_nano` of it."""
        return HoldReleased(hold_id=self.hold_id, key_id=self.key_id,
                            amount_inr_nano=self.amount_inr_nano if amount_inr_nano is None else amount_inr_nano)


class HoldReleased(Event, frozen=True, tag="hold_released"):
    """The reservation ends: with a charge in the same unit (settled) or without (released).
    `expired`: its lease lapsed, its holder gone; it ends whole, whatever remains of it (even
    nothing), and the ledger takes that once, only while it is lapsed."""

    hold_id: str
    amount_inr_nano: int  # all of the hold, or (a realtime session settling a response) part of it
    key_id: str = ""  # the hold's key, as it was held
    expired: bool = False


class HoldsRenewed(Event, frozen=True, tag="holds_renewed"):
    """The process holding these holds is alive: each lapses `lease_us` from now (never sooner
    than it already would). A hold no longer held is passed over."""

    hold_ids: tuple[str, ...]
    lease_us: int


class MusicTrackRecorded(Event, frozen=True, tag="music_track_recorded"):
    """The facts of one music generation, successful or not; cost lives on RequestCompleted."""

    request_id: str
    model: str
    provider: str
    storage: Literal["s3", "inline", "none"]
    error: bool = False
    object_key: str = ""  # set when storage is s3
    size: int = 0
    etag: str = ""
    mime_type: str = "audio/mpeg"
    prompt_content_id: str = ""
    text_content_id: str = ""
    idempotency_key: str = ""
    request_hash: str = ""


class IdempotencyKeyClaimed(Event, frozen=True, tag="idempotency_key_claimed"):
    """A request took an Idempotency-Key before its upstream call, in the unit that holds its
    price. The ledger rejects a second claim of a key its org still holds, so replicas racing
    on one key cannot both call upstream. The claim lapses `lease_us` after it was recorded
    (the claimer's upstream timeout plus a margin), so a replica that died holding it does
    not block the key forever."""

    idempotency_key: str
    request_hash: str
    request_id: str
    lease_us: int


class IdempotencyKeyReleased(Event, frozen=True, tag="idempotency_key_released"):
    """`request_id`'s claim of the key ends without an answer to remember: its request failed
    (and was not charged), or its claim lapsed or its 24 hours passed and a new claim replaces it."""

    idempotency_key: str
    request_id: str


class MediaExpired(Event, frozen=True, tag="media_expired"):
    """A hosted track's object was deleted from storage after the retention period.

    Recorded only after the delete succeeded, and at most once per track: the ledger
    rejects a second one, so racing sweepers cannot double-mark."""

    request_id: str
    object_key: str


class ProviderKeySet(Event, frozen=True, tag="provider_key_set"):
    """The organization brought its own key for a provider (BYOK). Only a fingerprint is
    recorded: the key itself is sealed and kept beside the ledger, never in an event."""

    provider: str
    fingerprint: str


class ProviderKeyRemoved(Event, frozen=True, tag="provider_key_removed"):
    provider: str


class KeyLimitsSet(Event, frozen=True, tag="key_limits_set"):
    """A key's own rate limits (0: unlimited), overriding the gateway's defaults."""

    key_id: str
    requests_per_minute: int = 0
    tokens_per_minute: int = 0


class KeySpendLimitsSet(Event, frozen=True, tag="key_spend_limits_set"):
    """A key's spend controls, whole: each change records all of them, and the last one holds.
    A budget (None: none) of INR per UTC day, calendar month or in total, counting what the
    key's requests are charged; the models it may use (catalogue ids, or `provider/*`; empty:
    every model); when it stops working (None: never)."""

    key_id: str
    budget_inr_nano: int | None = None
    budget_period: BudgetPeriod = "total"
    models: tuple[str, ...] = ()
    expires_at_us: int | None = None


class WebhookSet(Event, frozen=True, tag="webhook_set"):
    """An endpoint the org's alerts are delivered to (gateway.webhooks), whole: each change records
    all of it, and the last one holds. Its signing secret is sealed beside the ledger (secret
    `webhook:<id>`), never here. Alerts are derived from the org's events after the first of these.
    Thresholds: `balance_low_inr_nano` (None: none), `key_budget_percent` of a key's budget,
    `key_expiring_hours` ahead of a key's expiry (None: none). `enabled` false: not delivered to."""

    webhook_id: str
    url: str
    alerts: tuple[str, ...]
    balance_low_inr_nano: int | None = None
    key_budget_percent: tuple[int, ...] = ()
    key_expiring_hours: int | None = None
    enabled: bool = True


class WebhookRemoved(Event, frozen=True, tag="webhook_removed"):
    webhook_id: str


class WebhookTestRequested(Event, frozen=True, tag="webhook_test_requested"):
    """An admin asked for a `webhook.test` delivery to the endpoint, in order with its alerts."""

    webhook_id: str


class WebhookAttempted(Event, frozen=True, tag="webhook_attempted"):
    """One attempt to deliver message `message_id` (an `alert`) to an endpoint. Delivered: the
    endpoint's cursor moves on to `upto_version` (the org stream's version of the event the alert
    came from; 0 for one of time, key.expiring, which moves nothing). Failed: the endpoint is tried
    again at `retry_at_us`, its failures counted from the first one in a row."""

    webhook_id: str
    message_id: str
    alert: str
    upto_version: int
    attempt: int
    status: int  # the receiver's HTTP status; 0: no answer
    delivered: bool
    error: str = ""
    latency_ms: int = 0
    retry_at_us: int = 0


class WebhookPassed(Event, frozen=True, tag="webhook_passed"):
    """The endpoint's cursor moves over org events that raised no alert for it."""

    webhook_id: str
    upto_version: int


class WebhookDisabled(Event, frozen=True, tag="webhook_disabled"):
    """The gateway stopped delivering to an endpoint that kept failing; an admin enables it again."""

    webhook_id: str
    reason: str


class StreamHead(msgspec.Struct, frozen=True, array_like=True):
    """Where one stream stood: its last version and that event's chain hash (hex)."""

    stream_id: str
    version: int
    hash: str


class LedgerVerified(Event, frozen=True, tag="ledger_verified"):
    """A checkpoint: the log up to position `upto` verified (chains, and with `full` the
    projections too), and the head of every stream there, so a later verification starts from
    here. Recorded in the ledger's own stream (ledger.checkpoints.STREAM), not an org's."""

    upto: int
    heads: tuple[StreamHead, ...]
    full: bool = False
    # Ed25519 over `upto` and the root of the heads (ledger.signing), when the recorder had a key:
    # the signing key's id and public key (base64 of its 32 bytes), and the signature (base64).
    key_id: str = ""
    public_key: str = ""
    signature: str = ""
    # A signed tree head (ledger.tree, ledger.notes): the Merkle tree of the log's first `tree_size`
    # events, its root (base64) and the C2SP signed note stating both. Such a checkpoint names no
    # stream's head (`heads` empty): its size does not grow with the number of organizations.
    tree_size: int = 0
    root: str = ""
    note: str = ""


class FileStored(Event, frozen=True, tag="file_stored"):
    """A file kept for the org (gateway.batches.files): uploaded (`purpose` "batch"), or a batch's
    output or errors ("batch_output"). Its bytes are in object storage (`storage` "s3") or on disk
    beside the ledger ("local"), under `object_key`, until `expires_at_us`."""

    file_id: str
    purpose: str
    filename: str
    bytes: int
    sha256: str
    object_key: str
    storage: Literal["s3", "local"]
    expires_at_us: int
    lines: int = 0  # JSONL lines, for a batch input
    key_id: str = ""


class FileDeleted(Event, frozen=True, tag="file_deleted"):
    """A file's bytes were deleted (by its org, or by the sweeper once it `expired`); recorded
    after the delete succeeded, at most once a file (the ledger refuses a second)."""

    file_id: str
    expired: bool = False


class BatchLineError(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Why a batch failed validation: its input's `line` (1-based; 0: the batch as a whole)."""

    code: str
    message: str
    line: int = 0
    param: str = ""


class BatchCreated(Event, frozen=True, tag="batch_created"):
    """A batch of `lines` requests to `endpoint` for `model`, by key `key_id`, its worst case held
    by `hold_id` in the same unit (none when it failed validation: a BatchEnded follows in the
    unit). `native`: sent to the provider's own batch API, else run by the gateway, line by line.
    `api`: the shape it was asked in ("openai" /v1/batches, "anthropic" /v1/messages/batches)."""

    batch_id: str
    key_id: str
    api: Literal["openai", "anthropic"]
    endpoint: str
    model: str
    provider: str
    native: bool
    input_file_id: str
    lines: int
    hold_id: str
    completion_window: str
    expires_at_us: int
    metadata: dict[str, str] = {}


class BatchSubmitted(Event, frozen=True, tag="batch_submitted"):
    """A native batch's upstream batch: created (or found again after a crash) at its provider."""

    batch_id: str
    upstream_id: str


class BatchCancelRequested(Event, frozen=True, tag="batch_cancel_requested"):
    batch_id: str


class BatchEnded(Event, frozen=True, tag="batch_ended"):
    """The batch is over: every line it ran is recorded (a RequestCompleted each), what remains of
    its hold is released in the same unit, its output and error files stored before."""

    batch_id: str
    status: Literal["completed", "failed", "expired", "cancelled"]
    output_file_id: str = ""
    error_file_id: str = ""
    errors: tuple[BatchLineError, ...] = ()


class PriceSwitch(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """From `effective_from_us` (UTC microseconds), the prices of `version` are in force."""

    version: str
    effective_from_us: int


class CatalogueSwitched(Event, frozen=True, tag="catalogue_switched"):
    """A catalogue put in force across a deployment: its prices from the first switch on (every
    switch the stream had scheduled from then is superseded), then each later change its own dates
    state. Recorded in the prices' own stream (ledger.prices.STREAM), so checkpoints cover it."""

    sha256: str  # of `catalogue`, the file as it was published
    switches: tuple[PriceSwitch, ...]
    catalogue: dict  # the catalogue file's JSON (as published: ledger.prices.content)


AnyEvent = (OrgCreated | ApiKeyCreated | ApiKeyRevoked | CreditsAdded | RetentionChanged
            | RequestCompleted | CreditsHeld | HoldReleased | MusicTrackRecorded | MediaExpired
            | ProviderKeySet | ProviderKeyRemoved | KeyLimitsSet | IdempotencyKeyClaimed
            | IdempotencyKeyReleased | KeySpendLimitsSet | HoldsRenewed | LedgerVerified | WebhookSet
            | WebhookRemoved | WebhookTestRequested | WebhookAttempted | WebhookPassed | WebhookDisabled
            | CatalogueSwitched | FileStored | FileDeleted | BatchCreated | BatchSubmitted | BatchCancelRequested
            | BatchEnded)

# A hold recorded before holds had leases (CreditsHeld.lease_us 0) lapses this long after it was made.
LEGACY_LEASE_US = 60_000_000

encode_event = msgspec.json.Encoder().encode
decode_event = msgspec.json.Decoder(AnyEvent).decode


def event_type(event: Event) -> str:
    """The tag an event is stored under; TypeError for a class that has none (the base)."""
    tag = type(event).__struct_config__.tag
    if not isinstance(tag, str):  # msgspec allows int tags too; every ledger event names a str
        raise TypeError(f"{type(event).__name__} is not a tagged ledger event")
    return tag
