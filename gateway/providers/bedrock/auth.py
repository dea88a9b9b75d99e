"""How a request to Bedrock proves who sends it: a Bedrock API key as a bearer token (an
organization's own, else the configured one, else AWS_BEARER_TOKEN_BEDROCK as AWS's SDKs read
it), else a SigV4 signature (service `bedrock`) from the standard AWS credential chain.

The chain is aiobotocore's: environment, shared profile, web identity, container and instance
roles, session tokens. It is looked up on the first signed request, not at start-up (a gateway
with no AWS credentials still starts), and its temporary credentials are renewed by botocore
before they expire, never once per request. Signing is botocore's SigV4Auth over the exact
bytes and encoded URL that are sent.
"""

import asyncio
import os

from aiobotocore.credentials import AioCredentials
from aiobotocore.session import AioSession
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import BotoCoreError

from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError

SERVICE = "bedrock"
BEARER_VARIABLE = "AWS_BEARER_TOKEN_BEDROCK"  # where AWS's own SDKs find a Bedrock API key
DEFAULT_REGION = "us-east-1"
JSON = "application/json"


class BedrockAuth:
    def __init__(self, config: ProviderConfig) -> None:
        self.region = config.region or DEFAULT_REGION
        self._api_key = config.api_key or os.environ.get(BEARER_VARIABLE, "")
        self._chain: AioCredentials | None = None
        # One lookup of the chain at a time: a first burst would otherwise each read the files
        # and ask the instance metadata service.
        self._lookup = asyncio.Lock()

    async def headers(self, url: str, body: bytes, api_key: str = "") -> dict[str, str]:
        """The headers that authenticate a POST of `body` to `url` (already percent-encoded)."""
        if key := api_key or self._api_key:
            return {"Content-Type": JSON, "Authorization": f"Bearer {key}"}
        request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": JSON})
        SigV4Auth(await self._credentials(), SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())

    async def _credentials(self):  # botocore's ReadOnlyCredentials (it has no type hints)
        try:
            chain = self._chain or await self._looked_up()
            return await chain.get_frozen_credentials()  # renewed here when close to expiring
        except BotoCoreError as exc:  # the chain's messages name sources, never secrets
            raise UpstreamError(502, f"bedrock could not get AWS credentials: {exc}", reason="connection") from None

    async def _looked_up(self) -> AioCredentials:
        async with self._lookup:
            if self._chain is None:
                chain = await AioSession().get_credentials()
                if chain is None:
                    raise UpstreamError(502, "bedrock has no credentials: set api_key (a Bedrock API key) or"
                                             " provide AWS credentials (environment, profile or role)",
                                        reason="connection")
                self._chain = chain
            return self._chain
