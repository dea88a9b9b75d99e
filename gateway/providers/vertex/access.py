"""Google's Application Default Credentials as Vertex AI's access token, and the project they name.

The credentials are a service account file (`credentials_file`, else GOOGLE_APPLICATION_CREDENTIALS)
whose JWT assertions its `token_uri` exchanges for tokens, or the metadata server of the machine
the gateway runs on. google-auth finds and refreshes them; it is synchronous (the requests
transport), so each step runs in a worker thread, never on the event loop. Nothing is read at
start-up: a gateway without Google credentials starts, and only its Vertex requests fail (502).

The token is kept until shortly before it expires (tokens.RenewedCredential): one fetch serves
every request in between, and concurrent requests wait for the one fetch under way.
"""

import asyncio
import datetime
import os
import threading
from pathlib import Path

import google.auth
import google.auth.credentials
import google.auth.transport.requests
import msgspec
from google.auth import exceptions
from google.oauth2 import service_account

from gateway.accounts.redaction import mask_secrets
from gateway.edge.errors import UpstreamError
from gateway.providers.tokens import Lapsing, RenewedCredential, names_itself

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# What google-auth raises when it finds no credentials, or the issuer refuses or cannot be reached;
# and reading a service account file that is missing (OSError) or not one (ValueError: not JSON, no key).
REFUSALS = (exceptions.DefaultCredentialsError, exceptions.RefreshError, exceptions.TransportError, OSError,
            ValueError)
UNKNOWN_LIFETIME_S = 600.0  # for credentials that do not say when their token expires
REASON_CHARS = 300  # of google-auth's account of a failure, kept in the error


# Where Application Default Credentials are found without asking the network: a file, gcloud's
# own (its configuration folder), a named metadata server, or a Google Compute Engine machine,
# which names itself in its DMI tables (as google-auth checks it).
ADC_VARIABLES = ("GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST")
GCLOUD_ADC = "application_default_credentials.json"
GCE_PRODUCT = (Path("/sys/class/dmi/id/product_name"), "Google")


def credentials_findable(credentials_file: str) -> bool:
    """Whether this provider has credentials it could use: else the shipped provider stands
    unused, and a model's other providers must not fail over to it."""
    environ = os.environ
    if credentials_file or any(environ.get(name) for name in ADC_VARIABLES):
        return True
    gcloud = Path(environ.get("CLOUDSDK_CONFIG") or "~/.config/gcloud").expanduser() / GCLOUD_ADC
    return gcloud.is_file() or names_itself(*GCE_PRODUCT)


class Access(msgspec.Struct, frozen=True):
    """An access token and the project of the credentials it came from ("" when they name none)."""

    token: str
    project: str


class GoogleAccess:
    """The access token of one provider's credentials, fetched on first use and renewed before
    it expires; `forget` drops it when Vertex refuses it."""

    def __init__(self, credentials_file: str) -> None:
        self._file = credentials_file
        self._credentials: google.auth.credentials.Credentials | None = None
        self._project = ""
        # A fetch whose request was cancelled leaves its thread running; the next one waits for it.
        self._loading = threading.Lock()
        self._held = RenewedCredential(self._fetch)

    async def get(self) -> Access:
        """A token good for a while yet, and the credentials' project; UpstreamError 502
        (reason "connection", so failover moves on) when none can be had."""
        return await self._held.get()

    def forget(self) -> None:
        """Drop the token held, so the next request fetches a new one."""
        self._held.forget()

    async def _fetch(self) -> Lapsing[Access]:
        try:
            return await asyncio.to_thread(self._refreshed)
        except REFUSALS as exc:
            raise UpstreamError(502, f"vertex could not get an access token: {reason(exc)}",
                                reason="connection") from None

    def _refreshed(self) -> Lapsing[Access]:
        """A new token (in a worker thread: the credentials are loaded once, and never refreshed
        by two threads at once)."""
        with self._loading:
            if self._credentials is None:
                self._credentials, self._project = self._loaded()
            self._credentials.refresh(google.auth.transport.requests.Request())
            access = Access(str(self._credentials.token), self._project)
            return Lapsing.lasting(access, seconds_left(self._credentials.expiry))

    def _loaded(self) -> tuple[google.auth.credentials.Credentials, str]:
        """The configured service account file's credentials, else the Application Default ones
        (GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata server's), and their project."""
        if self._file:  # only a service account: other kinds of file may run commands or call out
            account = service_account.Credentials.from_service_account_file(self._file, scopes=[SCOPE])
            return account, account.project_id or ""
        credentials, project = google.auth.default(scopes=[SCOPE])
        return credentials, project or ""


def seconds_left(expiry: datetime.datetime | None) -> float:
    """How long a token expiring at `expiry` (google-auth's naive UTC datetime) is good for."""
    if expiry is None:
        return UNKNOWN_LIFETIME_S
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    return max(0.0, (expiry - now).total_seconds())


def reason(exc: Exception) -> str:
    """google-auth's account of a failure: its message only (never the response data it carries,
    which a hostile issuer could fill with anything), key-shaped strings masked, cut short."""
    message = str(exc.args[0]) if exc.args else ""
    return mask_secrets(f"{type(exc).__name__}: {message}".strip(": "))[:REASON_CHARS]
