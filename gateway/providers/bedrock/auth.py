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
from pathlib import Path

from aiobotocore.credentials import AioCredentials
from aiobotocore.session import AioSession
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import BotoCoreError

from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.providers.tokens import names_itself

SERVICE = "bedrock"
BEARER_VARIABLE = "AWS_BEARER_TOKEN_BEDROCK"  # where AWS's own SDKs find a Bedrock API key
DEFAULT_REGION = "us-east-1"
JSON = "application/json"


# Where the credential chain finds credentials without asking the network; the instance metadata
# service answers only on EC2, which names itself in the machine's DMI tables.
CHAIN_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                   "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", BEARER_VARIABLE)
EC2_VENDOR = (Path("/sys/class/dmi/id/sys_vendor"), "Amazon EC2")


def credentials_findable(config: ProviderConfig) -> bool:
    """Whether this provider has a key or the chain has a source to read: else the shipped
    provider stands unused, and a model's other providers must not fail over to it."""
    environ = os.environ
    if config.api_key or any(environ.get(name) for name in CHAIN_VARIABLES):
        return True
    files = (environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials",
             environ.get("AWS_CONFIG_FILE") or "~/.aws/config")
    return any(Path(name).expanduser().is_file() for name in files) or names_itself(*EC2_VENDOR)


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
