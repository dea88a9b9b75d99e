"""A job one process at a time does for every process sharing a ledger (Recorder.take_turn):
delivering webhooks, say. Each backend ends the turn of a process that dies (ledger.backends.turns)."""

import abc


class Turn(abc.ABC):
    """A process's exclusive turn at a job across every process sharing the ledger."""

    @abc.abstractmethod
    async def held(self) -> bool:
        """Whether the turn is still this process's; once False it stays so (take another)."""

    @abc.abstractmethod
    async def release(self) -> None:
        """End the turn, so another process may take it."""
