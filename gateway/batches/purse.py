"""A batch's hold, as its lines draw from it: one line's worst case reserved in memory before it
is sent, its true cost drawn in the unit that records it (RequestCompleted.draws), as a request
draws from an escrow slice (gateway.billing.escrow) — only the process running the batch draws
from its hold, so reserving in memory is exact. The hold's keel (its last nano-INR) keeps every
draw from ending it; what remains when the batch ends is released (gateway.batches.finishing).

A batch whose hold is gone (it lapsed while no process ran the batch) reserves nothing: its lines
then hold on their own as single requests do, and are refused with 402 when nothing is left."""

from gateway.billing.escrow import Reservation, Slice
from gateway.services import Caller
from ledger import leases
from ledger.recorder import Recorder


class Purse:
    """The part of a batch's hold not yet drawn nor reserved by a line in flight."""

    def __init__(self, org_id: str, key_id: str, hold_id: str, held_inr_nano: int) -> None:
        self.slice = Slice(org_id, key_id)
        self.slice.hold_id, self.slice.held = hold_id, held_inr_nano
        self.slice.live = held_inr_nano > 0

    @classmethod
    async def of(cls, recorder: Recorder, org_id: str, key_id: str, hold_id: str) -> "Purse":
        """The purse of the batch's hold as the ledger holds it now (empty without one)."""
        hold = await leases.held(recorder, hold_id) if hold_id else None
        return cls(org_id, key_id, hold_id, hold.amount_inr_nano if hold else 0)

    def reserve(self, caller: Caller, amount_inr_nano: int) -> None:
        """Reserve a line's worst case for it, when the purse has room (else it holds on its own)."""
        piece = self.slice
        if amount_inr_nano > 0 and piece.live and piece.free >= amount_inr_nano:
            piece.reserved += amount_inr_nano
            caller.reserved.append(Reservation(piece, amount_inr_nano))
