"""The recorder contract: what every ledger backend (SQLite, PostgreSQL) must do.

A recorder stores events in per-organization streams with gapless versions and a global,
gapless position, chains each stream with SHA-256, and updates the projection tables in the
same transaction as the events that change them. Backends differ only in SQL plumbing; the
rules (versions, positions, hashes) are decided here, in plain Python, once.
"""

import abc
from contextlib import AbstractAsyncContextManager
import hashlib
import operator
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence

import msgspec

from ledger.events import (
    LEGACY_LEASE_US, CreditsAdded, CreditsHeld, Event, HoldReleased, RequestCompleted, encode_event, event_type,
)
from ledger.turns import Turn

# The amounts and counts of a RequestCompleted that can never be below zero.
REQUEST_AMOUNTS = ("cost_usd_nano", "cost_inr_nano", "charged_inr_nano", "prompt_tokens", "completion_tokens")
_request_amounts = operator.attrgetter(*REQUEST_AMOUNTS)

GENESIS_HASH = bytes(32)
# The version of the stored schema this code needs. Bump it with every schema change; a
# migrating open (`gateway ledger migrate`, or any command on first use) brings a store up to it.
SCHEMA_VERSION = 14
SCHEMA_VERSIONS = "CREATE TABLE IF NOT EXISTS ledger_schema (version INTEGER NOT NULL, applied_at_us BIGINT NOT NULL)"
CURRENT_VERSION = "SELECT COALESCE(MAX(version), 0) FROM ledger_schema"


class LedgerError(Exception):
    """Base of what the ledger raises. Backends translate their driver's exceptions into these
    types, so no caller ever catches a `sqlite3` or `asyncpg` error."""


class DatabaseError(LedgerError):
    """The database refused a statement for another reason than an outage: a bug, or a store
    altered outside the ledger."""


class SchemaOutOfDate(LedgerError):
    """The store's schema is older than this code needs and opening it was not to migrate it."""


def out_of_date(found: int) -> SchemaOutOfDate:
    return SchemaOutOfDate(f"the ledger schema is at version {found}, this code needs version"
                           f" {SCHEMA_VERSION}: run `gateway ledger migrate`")


class CorruptEvent(LedgerError):
    """A stored event that no longer decodes: the log was altered outside the ledger."""


class ConcurrencyError(LedgerError):
    """The stream was not at the version the append expected."""


class InsufficientCredit(LedgerError):
    """A hold the organization's available balance cannot cover."""


class BudgetExceeded(LedgerError):
    """A hold its key's budget has no room for in the budget's period."""

    def __init__(self, key_id: str, room_inr_nano: int, wanted_inr_nano: int) -> None:
        super().__init__(f"key {key_id} has {room_inr_nano} nano-INR of its budget left, not {wanted_inr_nano}")
        self.key_id, self.room_inr_nano = key_id, room_inr_nano


class HoldNotHeld(LedgerError):
    """A release or a draw of more than its hold still holds (it ended already: released, or
    expired while its holder was away), or an expiry of a hold whose lease has not lapsed."""


class AppendRejected(LedgerError):
    """The unit broke a database constraint (for example a request id recorded twice)."""


class LedgerUnavailable(LedgerError):
    """The database could not be reached, or did not answer in time. Backends translate their
    driver's connection and timeout errors into this one; what was being written was not."""


class CommitInDoubt(LedgerUnavailable):
    """COMMIT was sent and never answered: the units may be recorded (once) or not. Any other
    failure of an append means nothing of it was recorded."""


class RecorderClosed(LedgerUnavailable):
    """The recorder is not open: not yet, or no longer (a request still running at shutdown).
    To a client it is like a database that is away: unavailable, retry."""


def prefix_range(prefix: str) -> tuple[str, str]:
    """The ids beginning with `prefix` as a key range [low, high): read through the key's index."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


class Content(msgspec.Struct, frozen=True):
    """Personal text kept beside the ledger so it can be purged without breaking a chain."""

    content_id: str
    body: bytes
    sha256: str


class Secret(msgspec.Struct, frozen=True):
    """A value sealed by its owner (for example a provider key), kept beside the ledger under
    (stream, name) and never in an event. `sealed` None removes it."""

    name: str
    sealed: bytes | None


class Append(msgspec.Struct, frozen=True):
    """One all-or-nothing unit: events for one stream, plus the text and secrets they reference."""

    stream_id: str
    events: Sequence[Event]
    expected_version: int | None = None  # None: append whatever the stream's version is
    contents: Sequence[Content] = ()
    secrets: Sequence[Secret] = ()


class Recorded(msgspec.Struct, frozen=True):
    """An event as stored: where it sits in the log and in its stream, and its chain hash."""

    position: int
    stream_id: str
    version: int
    recorded_at_us: int
    kind: str  # the event's tag as stored beside it, checked against the decoded event
    event: Event
    data: bytes
    hash: bytes


Outcome = list[Recorded] | Exception


def chain_hash(prev: bytes, position: int, stream_id: str, version: int, kind: str,
               recorded_at_us: int, data: bytes) -> bytes:
    """The hash that links an event to its predecessor; covers every stored column."""
    header = f"{position}\n{stream_id}\n{version}\n{kind}\n{recorded_at_us}\n".encode()
    return hashlib.sha256(prev + header + data).digest()


def wall_clock_us() -> int:
    """Now, in microseconds since the epoch: the time every recorded event carries."""
    return time.time_ns() // 1000


Clock = Callable[[], int]  # a recorder's source of `recorded_at_us` (tests drive their own)


def held_by(unit: Append) -> int:
    """The credit a unit reserves (nano-INR); such a unit needs the funds to be there."""
    return sum(e.amount_inr_nano for e in unit.events if isinstance(e, CreditsHeld))


def held_by_key(unit: Append) -> dict[str, int]:
    """The credit a unit reserves per key; such a unit needs room in each key's budget."""
    held: dict[str, int] = {}
    for event in unit.events:
        if isinstance(event, CreditsHeld) and event.key_id:
            held[event.key_id] = held.get(event.key_id, 0) + event.amount_inr_nano
    return held


def taken_from(event: Event) -> list[tuple[str, int, str]]:
    """(hold id, amount, how: "release", "expiry" or "draw") of each part of a hold `event` ends."""
    if isinstance(event, HoldReleased):
        return [(event.hold_id, event.amount_inr_nano, "expiry" if event.expired else "release")]
    if isinstance(event, RequestCompleted) and event.draws:
        return [(draw.hold_id, draw.amount_inr_nano, "draw") for draw in event.draws]
    return []


def holds_taken(units: Sequence[Append]) -> set[str]:
    """Every hold some unit releases or draws from: whose remainder plan() needs."""
    return {hold_id for unit in units for event in unit.events for hold_id, _, _ in taken_from(event)}


Holds = dict[str, tuple[int, int]]  # hold id -> (what it still holds, when it lapses), for plan()


def _untenable(unit: Append, holds: Holds, now_us: int) -> HoldNotHeld | None:
    """Why `unit` takes from a hold what it does not hold (None: it does not, and `holds` is
    updated): a hold ends at most once, expires only when lapsed and whole, and a draw leaves some
    of it (only a release ends a hold, so the projection drops a row exactly when it is ended)."""
    left: Holds = {}
    for event in unit.events:
        if isinstance(event, CreditsHeld):
            amount, _ = left.get(event.hold_id) or holds.get(event.hold_id, (0, 0))
            left[event.hold_id] = (amount + event.amount_inr_nano, now_us + (event.lease_us or LEGACY_LEASE_US))
        for hold_id, amount, how in taken_from(event):
            have, lapses = left.get(hold_id) or holds.get(hold_id, (0, 0))
            if amount > have or (how == "draw" and amount == have) or (
                    how == "expiry" and (lapses > now_us or amount != have)):
                return HoldNotHeld(f"stream {unit.stream_id}: hold {hold_id} holds {have} nano-INR; a {how} of"
                                   f" {amount} {'must leave some' if how == 'draw' else 'is refused'}"
                                   f"{' (its lease has not lapsed)' if how == 'expiry' and lapses > now_us else ''}")
            left[hold_id] = (have - amount, lapses)
    holds.update(left)
    return None


def holding_keys(units: Sequence[Append]) -> set[str]:
    """Every key some unit holds credit for: whose budget room plan() needs."""
    return {key for unit in units for key in held_by_key(unit)}


def _refusal(unit: Append, version: int, available: dict[str, int], room: dict[str, int],
             holds: Holds | None, now_us: int) -> LedgerError | None:
    """Why `unit` cannot be recorded now (None: it can, and what it holds is taken off
    `available` and `room`, what it takes from holds off `holds`)."""
    if unit.expected_version is not None and unit.expected_version != version:
        return ConcurrencyError(f"stream {unit.stream_id} is at version {version}, expected {unit.expected_version}")
    if problems := [problem for event in unit.events if (problem := unsound(event))]:
        return AppendRejected(f"stream {unit.stream_id}: {'; '.join(problems)}")
    hold = held_by(unit)
    if hold and available.get(unit.stream_id, 0) < hold:
        return InsufficientCredit(f"stream {unit.stream_id} cannot cover a hold of {hold}")
    if holds is not None and (untenable := _untenable(unit, holds, now_us)):
        return untenable
    if not hold:
        return None
    by_key = held_by_key(unit)
    for key_id, amount in by_key.items():
        if key_id in room and room[key_id] < amount:
            return BudgetExceeded(key_id, room[key_id], amount)
    available[unit.stream_id] -= hold
    for key_id, amount in by_key.items():
        if key_id in room:
            room[key_id] -= amount
    return None


def unsound(event: Event) -> str | None:
    """Why the ledger refuses `event` whoever sends it (None: it does not): a charge or a
    token count below zero, or a credit, hold or release that moves no money. The last line of
    defence, after the gateway's own checks, against money minted by a bad number."""
    if isinstance(event, RequestCompleted):
        if min(_request_amounts(event)) >= 0 and not event.draws:  # one C call: this runs for every charge
            return None
        if min(_request_amounts(event)) >= 0:
            if not all(d.amount_inr_nano > 0 for d in event.draws):
                return f"request {event.request_id} has a draw that is not positive"
            return None if event.drawn_inr_nano <= event.charged_inr_nano else \
                f"request {event.request_id} draws more than it is charged"
        negative = [name for name in REQUEST_AMOUNTS if getattr(event, name) < 0]
        return f"request {event.request_id} has negative {', '.join(negative)}"
    if isinstance(event, CreditsAdded | CreditsHeld | HoldReleased) and event.amount_inr_nano <= 0:
        return f"{event_type(event)} of {event.amount_inr_nano} nano-INR: the amount must be positive"
    return None


def plan(units: Sequence[Append], heads: dict[str, tuple[int, bytes]], last_position: int,
         now_us: int | None = None, available: dict[str, int] | None = None,
         room: dict[str, int] | None = None, holds: Holds | None = None) -> list[Outcome]:
    """Assign versions, positions and hashes to `units`, given each stream's head.

    Must run while the caller holds the database's write lock, so `heads`, `available` (each
    holding stream's credits - spent - held), `room` (each holding key's budget - spent in its
    period at `now_us` - held; a key with no budget is absent), `holds` (what each hold a unit
    takes from still holds, and when it lapses: ledger.recorder.holds_taken) and `last_position`
    cannot move underneath it (None: no unit takes from a hold). `heads`, `available`, `room` and
    `holds` are updated in place.
    """
    now_us = now_us if now_us is not None else wall_clock_us()
    available = {} if available is None else available
    room = {} if room is None else room
    outcomes: list[Outcome] = []
    for unit in units:
        version, prev = heads.get(unit.stream_id, (0, GENESIS_HASH))
        if (refused := _refusal(unit, version, available, room, holds, now_us)) is not None:
            outcomes.append(refused)
            continue
        recorded = []
        for event in unit.events:
            version, last_position = version + 1, last_position + 1
            data, kind = encode_event(event), event_type(event)
            prev = chain_hash(prev, last_position, unit.stream_id, version, kind, now_us, data)
            recorded.append(Recorded(last_position, unit.stream_id, version, now_us, kind, event, data, prev))
        heads[unit.stream_id] = (version, prev)
        outcomes.append(recorded)
    return outcomes


async def isolating_rejections(units: Sequence[Append],
                               write: Callable[[Sequence[Append]], Awaitable[list[Outcome]]],
                               rejections: tuple[type[BaseException], ...]) -> list[Outcome]:
    """`write(units)` in one transaction; when the database rejects it whole (a constraint that
    one unit broke), each unit again alone, so only the guilty one fails (AppendRejected)."""
    if not units:
        return []
    try:
        return await write(units)
    except rejections as exc:
        if len(units) == 1:
            return [AppendRejected(str(exc))]
    return [outcome for unit in units for outcome in await isolating_rejections([unit], write, rejections)]


def accepted(units: Sequence[Append], outcomes: Sequence[Outcome]) -> Iterable[tuple[Append, list[Recorded]]]:
    """The units a plan accepted, with their recorded events."""
    return ((u, o) for u, o in zip(units, outcomes, strict=True) if not isinstance(o, Exception))


class Recorder(abc.ABC):
    """A ledger backend. All methods are safe to call from one event loop concurrently."""

    clock: Clock  # when an append records its events; budget periods are read at the same time
    url: str  # what ledger.backends.recorder_for opens the same store by (in another process)

    @abc.abstractmethod
    async def open(self, migrate: bool = True) -> None:
        """Connect. With `migrate`, create the schema or bring it up to SCHEMA_VERSION
        (idempotent, safe from several processes at once); without, raise SchemaOutOfDate
        unless the store is already at SCHEMA_VERSION, and change nothing."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release every connection."""

    @abc.abstractmethod
    async def append(self, units: Sequence[Append]) -> list[Outcome]:
        """Record `units` durably, in one transaction where possible.

        Returns one outcome per unit, in order: its recorded events, or the exception that
        rejected it (ConcurrencyError, InsufficientCredit, AppendRejected). A unit holding
        credit (CreditsHeld) is accepted only if the org's available balance, read under the
        write lock, covers it: concurrent holds can never overspend. A rejected unit leaves no trace; the
        other units are unaffected. Projections, content and secrets change in the same transaction
        as events; a unit's secrets replace (or, when `sealed` is None, remove) the stored ones.
        """

    @abc.abstractmethod
    async def read(self, after: int = 0, limit: int = 1000) -> list[Recorded]:
        """Events with position > `after`, in position order, at most `limit`."""

    @abc.abstractmethod
    async def read_stream(self, stream_id: str) -> list[Recorded]:
        """All events of one stream, in version order."""

    @abc.abstractmethod
    async def read_streams(self, after: int, span: int, low: str, high: str | None) -> list[Recorded]:
        """Events at positions after `after` up to `after + span` of the streams named from `low`
        up to, not including, `high` (None: no end), in position order: one share of a parallel
        replay (possibly none of them, though more follow)."""

    @abc.abstractmethod
    async def _fetch(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """Run a read-only query (qmark placeholders) against projections or content. Private
        to the ledger: everyone else reads through ledger.queries and ledger.log_queries."""

    @abc.abstractmethod
    async def remove_text(self, before_us: int, now_us: int, limit: int = 1000) -> int:
        """Purge the body of up to `limit` content rows recorded before `before_us`, oldest
        first, marking them removed at `now_us`; returns how many. Events and their hashes
        are untouched, so every chain still verifies. The only change ever made to content."""

    @abc.abstractmethod
    async def put_tiles(self, from_size: int, to_size: int, tiles: Mapping[tuple[int, int], bytes]) -> bool:
        """Grow the Merkle tree's stored tiles (ledger.tree) from `from_size` leaves to `to_size`,
        writing `tiles` ((tile level, index) -> hashes) in one transaction; False, writing nothing,
        when the stored tree is no longer `from_size` leaves (another process grew it first)."""

    @abc.abstractmethod
    async def remove_text_of(self, content_prefix: str, now_us: int) -> int:
        """Purge the body of every content row whose id begins with `content_prefix` (a batch's
        lines, once its output file holds them, for an org that keeps no text), as remove_text."""

    @abc.abstractmethod
    async def rebuild(self, events: AsyncIterable[list[Recorded]]) -> None:
        """Apply the projection of already recorded events to this store's projection tables (a
        scratch store's: verify and replay build there, and replay swaps the result in).

        Events are not written; only projection tables change. `events` (batches of them) is
        consumed while holding the write lock, so no append commits meanwhile.
        """

    @abc.abstractmethod
    def exclusive(self) -> "AbstractAsyncContextManager[None]":
        """While entered, no append commits, in this process or another: the write lock is held."""

    @abc.abstractmethod
    async def absorb(self, others: Sequence["Recorder"], tables: Sequence[str]) -> None:
        """Of a scratch store: add the rows of `others`' `tables` (scratch stores of this backend,
        other shares of the streams) to its own, and make it ready to be swapped in."""

    @abc.abstractmethod
    async def swap_in(self, rebuilt: "Recorder", tables: Sequence[str], catch_up: Callable[[], Awaitable[int]]
                      ) -> int:
        """Make `tables` hold exactly the rows of `rebuilt`'s (a scratch store of this backend, a
        replay of the log). Each step holds the write lock (`exclusive()`) and first awaits
        `catch_up`, which brings `rebuilt` up to the last position and returns it; returns the
        position the tables hold at the end. Readers go on throughout; appends wait for a step."""

    @abc.abstractmethod
    async def take_turn(self, job: str) -> Turn | None:
        """This process's turn at `job`, if no other process sharing the ledger has it (else None).
        A turn ends when released, or when its process dies (even by SIGKILL)."""

    @abc.abstractmethod
    def snapshot(self) -> "AbstractAsyncContextManager[None]":
        """While entered, `read`, `read_stream` and `_fetch` all see one consistent state."""

    @abc.abstractmethod
    def opener(self) -> Callable[[str], "Recorder"]:
        """What opens this store again from `url` in another process: a backend class's
        `from_url` (a scratch store's too: there it is a plain store of its backend)."""

    @abc.abstractmethod
    def scratch(self) -> "Recorder":
        """A new, empty recorder of the same backend for a verification replay."""

