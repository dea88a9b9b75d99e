"""Filling the projections a schema upgrade added, from what an older store already has.

Each statement leaves the new table exactly as a replay of the store's events would
(ledger.projections says how each event changes it); ledger.backends.sqlite and ledger.backends.postgres run them
once, in the migrating open, after adding the tables and columns.
"""

from collections.abc import Callable

from ledger.events import LEGACY_LEASE_US
from ledger.periods import US_PER_DAY
from ledger.projections import slice_held

# Schema version 5 added api_keys.last_used_at_us and usage_daily; a store upgraded from an older version
# fills them from the request log, exactly as a replay of its events would.
BACKFILL_V5 = (
    ("UPDATE api_keys SET last_used_at_us = (SELECT MAX(r.created_at_us) FROM request_log r"
     " WHERE r.key_id = api_keys.key_id AND r.org_id = api_keys.org_id)"),
    "DELETE FROM usage_daily",
    (f"INSERT INTO usage_daily (org_id, day, route, model, status, requests, prompt_tokens,"
     f" completion_tokens, cost_usd_nano, charged_inr_nano) SELECT org_id, created_at_us / {US_PER_DAY},"
     f" route, model, status, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_usd_nano),"
     f" SUM(charged_inr_nano) FROM request_log GROUP BY org_id, created_at_us / {US_PER_DAY}, route, model, status"),
)
# Schema version 7 added each key's daily spend; a store upgraded from an older one fills it from
# the request log, exactly as a replay of its events would (holds of older events name no key).
BACKFILL_V7 = (
    "DELETE FROM key_spend_daily",
    (f"INSERT INTO key_spend_daily (org_id, key_id, day, charged_inr_nano) SELECT org_id, key_id,"
     f" created_at_us / {US_PER_DAY}, SUM(charged_inr_nano) FROM request_log"
     f" WHERE charged_inr_nano > 0 GROUP BY org_id, key_id, created_at_us / {US_PER_DAY}"),
)
# Schema version 8 added the holds table; a store upgraded from an older one fills it from the hold
# events, exactly as a replay would (older holds have no lease: LEGACY_LEASE_US). {field} reads
# a field of an event's JSON in the backend's dialect (ledger.backends.sqlite, ledger.backends.postgres).
_HOLD_DELTA = "CASE type WHEN 'credits_held' THEN 1 ELSE -1 END * CAST({amount} AS BIGINT)"
BACKFILL_V8 = (
    "DELETE FROM holds",
    ("INSERT INTO holds (hold_id, org_id, key_id, amount_inr_nano, lapses_at_us, lapse_position)"
     f" SELECT g.hold_id, g.stream_id, g.key_id, g.amount, e.recorded_at_us + {LEGACY_LEASE_US}, g.last FROM"
     " (SELECT {hold_id} AS hold_id, stream_id, MAX(COALESCE({key_id}, '')) AS key_id,"
     " SUM(" + _HOLD_DELTA + ") AS amount, MAX(CASE type WHEN 'credits_held' THEN position END) AS last"
     " FROM events WHERE type IN ('credits_held', 'hold_released') GROUP BY {hold_id}, stream_id"
     " HAVING SUM(" + _HOLD_DELTA + ") > 0) AS g JOIN events e ON e.position = g.last"),
)


# Schema version 9 added the statement rollups (ledger.projections ADD_CHARGES, ADD_BALANCE); a store
# upgraded from an older one fills them exactly as a replay would: the charges from the request
# log, the balance from the events. {drawn} is the backend's expression for the sum of a
# request_completed event's draws (0 or NULL without any): only a request that drew makes a row.
_BALANCE_CREDITS = "CASE type WHEN 'credits_added' THEN CAST({amount} AS BIGINT) ELSE 0 END"
_BALANCE_HELD = ("CASE type WHEN 'credits_held' THEN CAST({amount} AS BIGINT) WHEN 'hold_released'"
                 " THEN -CAST({amount} AS BIGINT) WHEN 'request_completed' THEN -({drawn}) ELSE 0 END")
BACKFILL_V9 = (
    "DELETE FROM charges_daily",
    (f"INSERT INTO charges_daily (org_id, day, key_id, model, usd_to_inr, requests, charged_inr_nano)"
     f" SELECT org_id, created_at_us / {US_PER_DAY}, key_id, model, usd_to_inr, COUNT(*), SUM(charged_inr_nano)"
     f" FROM request_log GROUP BY org_id, created_at_us / {US_PER_DAY}, key_id, model, usd_to_inr"),
    "DELETE FROM balance_daily",
    (f"INSERT INTO balance_daily (org_id, day, credits_inr_nano, held_inr_nano)"
     f" SELECT stream_id, recorded_at_us / {US_PER_DAY}, SUM({_BALANCE_CREDITS}), SUM({_BALANCE_HELD}) FROM events"
     f" WHERE type IN ('credits_added', 'credits_held', 'hold_released')"
     f" OR (type = 'request_completed' AND COALESCE({{drawn}}, 0) <> 0)"
     f" GROUP BY stream_id, recorded_at_us / {US_PER_DAY}"),
)


# Schema version 10 added the webhook tables (ledger.webhooks). No older store holds a webhook
# event, so they start empty, as a replay would leave them: nothing to fill.

# Schema version 11 added balance_daily.escrow_inr_nano: the net change of what escrow slices hold
# (their holds and releases, and the draws from them). A store upgraded from an older one rebuilds
# the rollup from the events with it, as a replay would. {sliced} is the backend's expression for
# the sum of a request_completed event's draws from slices (NULL without any).
_BALANCE_ESCROW = ("CASE WHEN type = 'request_completed' THEN -COALESCE({sliced}, 0)"
                   " WHEN " + slice_held("{hold_id}") + " THEN CASE type WHEN 'credits_held' THEN 1 ELSE -1 END"
                   " * CAST({amount} AS BIGINT) ELSE 0 END")
BACKFILL_V11 = (
    "DELETE FROM balance_daily",
    (f"INSERT INTO balance_daily (org_id, day, credits_inr_nano, held_inr_nano, escrow_inr_nano)"
     f" SELECT stream_id, recorded_at_us / {US_PER_DAY}, SUM({_BALANCE_CREDITS}), SUM({_BALANCE_HELD}),"
     f" SUM({_BALANCE_ESCROW}) FROM events WHERE type IN ('credits_added', 'credits_held', 'hold_released')"
     f" OR (type = 'request_completed' AND COALESCE({{drawn}}, 0) <> 0)"
     f" GROUP BY stream_id, recorded_at_us / {US_PER_DAY}"),
)


# Schema version 12 added request_log.price_version and price_tier (ledger.events.Priced). No older
# event records either, so the empty default is what a replay would leave: nothing to fill.


def backfill_v8(field: Callable[[str], str]) -> tuple[str, ...]:
    """BACKFILL_V8 with `field(name)` the backend's expression for a field of `events.data`."""
    names = {name: field(name) for name in ("hold_id", "key_id", "amount")}
    names["amount"] = field("amount_inr_nano")
    return tuple(statement.format(**names) for statement in BACKFILL_V8)


def backfill_v9(field: Callable[[str], str], drawn: str) -> tuple[str, ...]:
    """BACKFILL_V9 with `field` as in backfill_v8 and `drawn` the sum of an event's draws."""
    return tuple(statement.format(amount=field("amount_inr_nano"), drawn=drawn) for statement in BACKFILL_V9)


def backfill_v11(field: Callable[[str], str], drawn: str, sliced: str) -> tuple[str, ...]:
    """BACKFILL_V11 with `field` and `drawn` as in backfill_v9, `sliced` the sum of an event's draws
    from slices."""
    return tuple(statement.format(amount=field("amount_inr_nano"), hold_id=field("hold_id"), drawn=drawn,
                                  sliced=sliced) for statement in BACKFILL_V11)


def due(found: int, field: Callable[[str], str], drawn: str, sliced: str) -> tuple[str, ...]:
    """The backfills a store at schema version `found` needs, in order (a new store is at 0); `field`
    and `drawn` as in backfill_v9, `sliced` as in backfill_v11. Only those of later versions: a
    backfill may be true only of the events its version knew (BACKFILL_V8 predates draws, which a
    store at 8 has made)."""
    by_version = ((5, BACKFILL_V5), (7, BACKFILL_V7), (8, backfill_v8(field)), (9, backfill_v9(field, drawn)),
                  (11, backfill_v11(field, drawn, sliced)))
    return tuple(statement for version, statements in by_version if version > found for statement in statements)
