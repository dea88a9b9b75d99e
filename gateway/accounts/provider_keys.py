"""Organizations' own provider keys (BYOK), opened on first use and kept in memory.

The directory says which organization has a key for which provider (by fingerprint, from the
ledger's events); the sealed key is read from the ledger's secret store and opened here. A key
is cached under its fingerprint, so a rotated or removed key is never used after the directory
has seen the change.
"""

from gateway.accounts.directory import Directory
from gateway.edge.errors import ApiError
from gateway.accounts.sealing import Sealer, SealingError
from ledger import queries
from ledger.recorder import Recorder


class ProviderKeys:
    def __init__(self, recorder: Recorder, sealer: Sealer, directory: Directory) -> None:
        self._recorder, self._sealer, self._directory = recorder, sealer, directory
        self._opened: dict[tuple[str, str], tuple[str, str]] = {}  # (org, provider) -> (fingerprint, key)

    async def key_for(self, org_id: str, provider: str) -> str:
        """The organization's own key for `provider`, or "" when it has none."""
        slot, fingerprint = (org_id, provider), self._directory.provider_key(org_id, provider)
        if fingerprint is None:
            self._opened.pop(slot, None)
            return ""
        if (cached := self._opened.get(slot)) and cached[0] == fingerprint:
            return cached[1]
        key = await self._open(org_id, provider)
        if self._sealer.fingerprint(key) == fingerprint:  # the store may be ahead of the directory
            self._opened[slot] = (fingerprint, key)
        return key

    async def _open(self, org_id: str, provider: str) -> str:
        sealed = await queries.sealed_secret(self._recorder, org_id, provider)
        if sealed is None:
            raise ApiError(500, f"the organization's {provider} key is registered but not stored",
                           type="configuration_error")
        try:
            return self._sealer.open(org_id, provider, sealed)
        except SealingError as exc:
            raise ApiError(500, f"the organization's own {provider} key cannot be used: {exc}",
                           type="configuration_error") from None
