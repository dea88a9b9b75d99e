"""Configuration: a TOML file, overridden key by key by GATEWAY_<SECTION>_<KEY> variables.

Everything is typed with msgspec, so a wrong type or an unknown key stops start-up with a
message naming it. Secrets may be written as `env:NAME` to be read from the environment.
"""

import os
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import msgspec

from ledger.timeouts import CONNECT_TIMEOUT_S, STATEMENT_TIMEOUT_S
from storage.settings import StorageSettings

ENV_PREFIX = "GATEWAY_"


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the offending key."""


class Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every section: unknown keys are errors, not silently ignored.

    Subclasses repeat `frozen=True`: msgspec inherits it, but type checkers read it per class.
    """


class ServerConfig(Section, frozen=True):
    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8080
    workers: Annotated[int, msgspec.Meta(ge=1)] = 1
    # How long SIGTERM waits for in-flight requests and streams (music may wait 240 s upstream).
    shutdown_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    # Request bodies held in memory at once by one process (JSON bodies are read whole; a music
    # request may weigh ~112 MB). Past it a request waits up to body_budget_wait_s for room, then
    # is answered 503 with Retry-After; a body larger than the whole budget is 413.
    max_inflight_body_bytes: Annotated[int, msgspec.Meta(ge=1)] = 256 * 1024 * 1024
    body_budget_wait_s: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    # Slow or idle clients: a request's headers must arrive within header_timeout_s of its first
    # byte; a body may pause at most body_timeout_s (then 408); an idle connection is closed
    # after keepalive_timeout_s (also one that never sends a request).
    header_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 20.0
    body_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    keepalive_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 75.0


class LedgerConfig(Section, frozen=True):
    url: str = "sqlite:///./data/gateway.db"
    # Bring the schema up to date when a server starts; off: refuse to start on an old schema
    # and leave `gateway ledger migrate` to the operator (one step of a rollout).
    migrate_on_start: bool = True
    # The longest wait for the database (one statement, a pooled connection, SQLite's write
    # lock) and for a new PostgreSQL connection; past either the request answers 503.
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = STATEMENT_TIMEOUT_S
    connect_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = CONNECT_TIMEOUT_S


class RedisConfig(Section, frozen=True):
    url: str = ""
    # Redis is an optimisation (rate limits fail open), so it gets little time: a failure skips
    # it for `cooldown_s` rather than adding a timeout to every request of an outage.
    connect_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 0.2
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 0.25
    cooldown_s: Annotated[float, msgspec.Meta(ge=0)] = 2.0


class StorageConfig(StorageSettings, frozen=True):
    """The sweeper's [storage] keys (storage.settings) and the gateway's own."""

    # Key for signing download paths; replicas must share it. Empty: random per process.
    signing_secret: str = ""
    signed_url_ttl_s: Annotated[int, msgspec.Meta(ge=1)] = 3600


class BillingConfig(Section, frozen=True):
    usd_to_inr: Decimal = Decimal("84.0")

    def __post_init__(self) -> None:
        if not self.usd_to_inr.is_finite() or self.usd_to_inr <= 0:
            raise ValueError("billing.usd_to_inr must be a positive number")


class MusicConfig(Section, frozen=True):
    upstream_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 240.0


class SweeperConfig(Section, frozen=True):
    interval_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0


class LimitsConfig(Section, frozen=True):
    # Per-key defaults, per minute; 0: unlimited. A key's own limits (set-key-limits) win.
    requests_per_minute: Annotated[int, msgspec.Meta(ge=0)] = 0
    tokens_per_minute: Annotated[int, msgspec.Meta(ge=0)] = 0


class RetentionConfig(Section, frozen=True):
    # Days logged text (prompts, lyrics, completions) is kept; 0 keeps it forever (spec rule 1).
    text_days: Annotated[int, msgspec.Meta(ge=0)] = 0


class SecretsConfig(Section, frozen=True):
    # Seals organizations' own provider keys (BYOK) at rest; give it as env:NAME. Empty: BYOK off.
    master_key: str = ""


class ProviderConfig(Section, frozen=True):
    base_url: str
    api_key: str = ""
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 600.0  # longest silence from upstream


class ProvidersConfig(Section, frozen=True):
    openai: ProviderConfig = ProviderConfig(
        base_url="https://api.openai.com/v1", api_key="env:OPENAI_API_KEY")
    anthropic: ProviderConfig = ProviderConfig(
        base_url="https://api.anthropic.com", api_key="env:ANTHROPIC_API_KEY")
    google: ProviderConfig = ProviderConfig(
        base_url="https://generativelanguage.googleapis.com", api_key="env:GEMINI_API_KEY")


class CatalogueConfig(Section, frozen=True):
    path: str = ""  # empty: the catalogue shipped with the gateway


class Config(Section, frozen=True):
    server: ServerConfig = ServerConfig()
    ledger: LedgerConfig = LedgerConfig()
    redis: RedisConfig = RedisConfig()
    storage: StorageConfig = StorageConfig()
    billing: BillingConfig = BillingConfig()
    music: MusicConfig = MusicConfig()
    sweeper: SweeperConfig = SweeperConfig()
    retention: RetentionConfig = RetentionConfig()
    limits: LimitsConfig = LimitsConfig()
    secrets: SecretsConfig = SecretsConfig()
    providers: ProvidersConfig = ProvidersConfig()
    catalogue: CatalogueConfig = CatalogueConfig()


def load(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read `path` (if given), apply GATEWAY_* overrides, resolve env: secrets, validate."""
    env = os.environ if environ is None else environ
    raw = _merge(msgspec.to_builtins(Config()), _read_toml(path) if path else {})
    for name, value in env.items():
        if name.startswith(ENV_PREFIX):
            _override(raw, name, value)
    try:
        return msgspec.convert(_resolve_secrets(raw, env), Config, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None


def _merge(base: dict, update: dict) -> dict:
    """`base` with `update` laid over it, table by table (defaults under the file's keys)."""
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_toml(path: str | Path) -> dict:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        return tomllib.loads(text, parse_float=Decimal)  # floats stay exact for money
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def _override(raw: dict, name: str, value: str) -> None:
    """Set the key that GATEWAY_<SECTION>_<KEY> names; an unknown name is an error."""
    path = _env_path(name.removeprefix(ENV_PREFIX).lower())
    if path is None:
        raise ConfigError(f"unknown configuration variable {name}")
    node = raw
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{name} overrides {'.'.join(path)}, but the file sets it to a value")
    node[path[-1]] = value


def _env_path(suffix: str, struct: type = Config) -> tuple[str, ...] | None:
    """Map 'providers_openai_api_key' to ('providers', 'openai', 'api_key') by the schema."""
    for field in msgspec.structs.fields(struct):
        if suffix == field.name:
            return (field.name,) if not _is_section(field.type) else None
        if suffix.startswith(field.name + "_") and _is_section(field.type):
            rest = _env_path(suffix[len(field.name) + 1:], field.type)
            if rest:
                return (field.name, *rest)
    return None


def _is_section(annotation: Any) -> bool:
    """A table of the file (StorageConfig's base comes from storage, not from Section)."""
    return isinstance(annotation, type) and issubclass(annotation, msgspec.Struct)


def _resolve_secrets(node: Any, environ: Mapping[str, str]) -> Any:
    """Replace every 'env:NAME' string with the variable's value ('' when unset)."""
    if isinstance(node, dict):
        return {key: _resolve_secrets(value, environ) for key, value in node.items()}
    if isinstance(node, str) and node.startswith("env:"):
        return environ.get(node.removeprefix("env:"), "")
    return node
