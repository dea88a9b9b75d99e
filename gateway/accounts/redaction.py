"""Provider keys removed from upstream text by value, whatever they look like.

Providers quote the key they received in their errors ("Incorrect API key provided: ...").
Masking by shape (`mask_secrets`: `gwk_`, `sk-`, `AIza`, `Bearer ...`) misses a key of no
well-known prefix, so every key the gateway holds is also removed by value: the configured ones,
which a `Redactor` knows, and a request's own (an organization's BYOK key or the configured one),
which the request carries. Each in the forms a provider might echo: as it is (also inside
`Bearer <key>`), URL-encoded, and JSON-escaped.
"""

import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus

import orjson

from gateway.config import ProviderConfig

REDACTED = "[redacted]"
# Shorter values are no credential worth the name, and removing them would garble ordinary text.
MIN_KEY_CHARS = 8
CREDENTIAL_HEADERS = ("Authorization", "x-api-key", "x-goog-api-key", "api-key", "X-Amz-Security-Token")
# Our keys (gwk_...), OpenAI-style keys (sk-...), Google keys (AIza...), and bearer tokens.
_SHAPED = re.compile(r"(gwk_[A-Za-z0-9_-]{8,}|sk-[A-Za-z0-9_-]{8,}|AIza[0-9A-Za-z_-]{20,}|"
                     r"(?i:bearer)\s+\S+)")


def mask_secrets(text: str) -> str:
    """`text` with every key-shaped substring replaced."""
    return _SHAPED.sub(REDACTED, text)


def forms_of(keys: Iterable[str]) -> tuple[str, ...]:
    """Every form of each key a provider might echo, longest first (a key inside another goes last)."""
    found = set()
    for key in keys:
        if len(key) >= MIN_KEY_CHARS:
            found |= {key, quote(key, safe=""), quote_plus(key), orjson.dumps(key).decode()[1:-1]}
    return tuple(sorted(found, key=len, reverse=True))


def by_value(text: str, forms: Iterable[str]) -> str:
    """`text` without any of `forms`."""
    for form in forms:
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def redact(text: str, forms: Iterable[str]) -> str:
    """`text` without any of `forms`, and with key-shaped strings masked."""
    return mask_secrets(by_value(text, forms))


def keys_sent(headers: Mapping[str, str], query: Mapping[str, str] | None = None) -> list[str]:
    """The credentials a request to a provider carried: the bearer token (or a SigV4 signature),
    `x-api-key`, `x-goog-api-key`, Azure's `api-key`, an AWS session token, and Gemini's `?key=`."""
    values = [headers.get(name, "") for name in CREDENTIAL_HEADERS] + [(query or {}).get("key", "")]
    scheme, _, token = values[0].partition(" ")
    values[0] = token if scheme.lower() == "bearer" else values[0]
    return [value.strip() for value in values if value.strip()]


class Redactor:
    """The provider keys this process is configured with (built once, from the configuration),
    or those and a request's own (`including`)."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._forms = forms_of(keys)

    @classmethod
    def for_providers(cls, providers: Mapping[str, ProviderConfig]) -> "Redactor":
        """Every configured key and Entra ID client secret, and every extra header's value."""
        return cls(secret for provider in providers.values()
                   for secret in (provider.api_key, provider.client_secret, *provider.headers.values()))

    def including(self, *request_keys: str) -> "Redactor":
        """This redactor, also removing `request_keys` (such as an organization's BYOK key)."""
        combined = Redactor()
        combined._forms = tuple(sorted({*self._forms, *forms_of(request_keys)}, key=len, reverse=True))
        return combined

    def __call__(self, text: str) -> str:
        """`text` without any key known here, and with key-shaped strings masked."""
        return redact(text, self._forms)

    def by_value(self, text: str) -> str:
        """`text` without any key known here (cheap on long text: no pattern is run)."""
        return by_value(text, self._forms)
