"""Provider adapters, one folder per wire protocol, and the contract they share.

- A folder per protocol (PROTOCOLS): `openai`, `anthropic`, `google`, and the clouds `bedrock`,
  `vertex`, `azure`. Each holds its adapter and its wire formats, and says (its offer) what a
  provider of its protocol serves; a new protocol is a folder, a line here and catalogue rows.
- `base`: the calls, replies and streams between the gateway and an adapter; `capabilities`: which
  adapter can do what (Offer, Providers); `shapes`: the shapes answers are checked against;
  `usage`: what an upstream reports it used (Usage) and the checks a report passes.
- `http`: the pooled client session and an upstream's errors; `stream`: an upstream's server-sent
  events read one by one, its failures mapped in one place (UpstreamEventStream); `tokens`: a
  cloud's short-lived credentials, renewed before they lapse.
"""

from collections.abc import Callable, Mapping
from types import MappingProxyType

from gateway.config import ProviderConfig
from gateway.providers import anthropic, azure, bedrock, google, openai, vertex
from gateway.providers.capabilities import ChatProvider, Offer, Providers
from gateway.providers.http import Upstream

__all__ = ["PROTOCOLS", "ChatProvider", "Providers", "Upstream", "build"]

# The one statement of which folder speaks each configured protocol.
PROTOCOLS: Mapping[str, Callable[[str, ProviderConfig, Upstream], Offer]] = MappingProxyType({
    "openai": openai.offer,
    "anthropic": anthropic.offer,
    "google": google.offer,
    "bedrock": bedrock.offer,
    "vertex": vertex.offer,
    "azure": azure.offer,
})


def build(configs: Mapping[str, ProviderConfig], upstream: Upstream) -> Providers:
    """An adapter for every configured provider, by the protocol it speaks, sharing one client
    session, listed under each capability its protocol offers."""
    return Providers.gathered({provider_id: PROTOCOLS[config.protocol](provider_id, config, upstream)
                               for provider_id, config in configs.items()})
