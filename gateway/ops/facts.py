"""What one request turned out to be, in one place: the canonical log line and the request
metrics both read it (gateway.edge.middleware), and whoever learns a fact writes it there.

The handler names the model and whether it streams; a committed charge adds the provider and the
cost (ChargeFacts), and for a delivered answer the cost headers its response carries if it is
sent after the charge (CostHeaders; speech: priced before it is sent), both charge observers the
app registers (gateway.billing.observers); a WebSocket's end adds its close code and which side
closed it. Carried by the request and its `Caller`, not by the logging context, so a fact
written in another task (a charge recorded under `asyncio.shield`) still reaches the line.
"""

from decimal import Decimal

import msgspec

from gateway.billing.pricing import cost_headers
from ledger.events import RequestCompleted
from ledger.money import from_nano

CLIENT = "client"
PROVIDER = "provider"


class RequestFacts(msgspec.Struct, omit_defaults=True):
    """Mutable by design: filled in as the request goes. Unset facts stay off the log line."""

    model: str | None = None
    stream: bool | None = None
    provider: str | None = None
    cost_inr: str | None = None
    ws_close_code: int | None = None
    closed_by: str | None = None
    cost_headers: dict[str, str] | None = None  # not logged: cost_inr says it there
    failed_over: list[str] | None = None  # providers the request left for another (gateway.routing.failover)

    def update(self, **facts: object) -> None:
        """Set the named facts; a name that is not a field is an AttributeError (a typo fails)."""
        for name, value in facts.items():
            setattr(self, name, value)

    def charged(self, model: str, provider: str, cost_inr: str) -> None:
        """What the ledger recorded; the model the client named, when known, stays the label."""
        self.model = self.model if self.model is not None else model
        self.provider, self.cost_inr = provider, cost_inr

    def closed(self, by: str) -> None:
        """The side that ended a WebSocket session first; later ends do not change it."""
        self.closed_by = self.closed_by or by

    def log_fields(self) -> dict:
        """The facts that are set, by name (the cost headers aside)."""
        fields = msgspec.to_builtins(self)  # omit_defaults: the unset ones are left out
        fields.pop("cost_headers", None)
        return fields


class ChargeFacts:
    """A charge observer: what the ledger recorded (model, provider, cost) goes on the log line."""

    async def charged(self, facts: RequestFacts, event: RequestCompleted) -> None:
        facts.charged(event.model, event.provider, str(from_nano(event.charged_inr_nano)))


class CostHeaders:
    """A charge observer: a delivered answer's response, sent from now on, states its cost."""

    async def charged(self, facts: RequestFacts, event: RequestCompleted) -> None:
        if event.status == 200:
            facts.cost_headers = cost_headers(event.cost_usd_nano, event.cost_inr_nano, Decimal(event.usd_to_inr),
                                              event.charged_inr_nano)
