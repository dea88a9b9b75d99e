"""Configuration: a TOML file, overridden key by key by GATEWAY_<SECTION>_<KEY> variables.

Everything is typed with msgspec, so a wrong type or an unknown key stops start-up with a
message naming it. Secrets may be written as `env:NAME` to be read from the environment.
"""

import os
import re
import tomllib
import typing
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from ledger.backends.timeouts import CONNECT_TIMEOUT_S, STATEMENT_TIMEOUT_S
from storage.settings import StorageSettings

ENV_PREFIX = "GATEWAY_"
PROVIDER_ID = re.compile(r"[a-z0-9][a-z0-9_.-]*")


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
    # How often the gateway (and the sweeper) verifies what was appended since the last checkpoint
    # and records a new one (ledger.checkpoints), signed with `signing_key`; 0: never.
    checkpoint_interval_s: Annotated[float, msgspec.Meta(ge=0)] = 300.0
    # The Ed25519 private key checkpoints are signed with (ledger.signing): PEM, as env:NAME or a
    # file's path. Empty: checkpoints are recorded unsigned. A new key leaves old checkpoints
    # verifiable: each carries the public key that signed it.
    signing_key: str = ""
    # The log's name in its checkpoints (C2SP signed notes, ledger.notes): their first line and the
    # signing key's name. No spaces, no "+".
    log_origin: str = "ai-gateway/ledger"

    def __post_init__(self) -> None:
        if not self.log_origin or any(c.isspace() or c == "+" for c in self.log_origin):
            raise ValueError("ledger.log_origin must be non-empty, without spaces or '+'")


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
    # Every paid request reserves its worst case before its upstream call (gateway.billing.
    # reservations). False: only a key with a budget reserves; the org balance is checked, not held.
    reserve: bool = True
    # A hold lapses this long after it was taken or renewed; a live process renews its holds every
    # third of it, and any process (or the sweeper) releases a lapsed one (ledger.leases).
    hold_lease_s: Annotated[float, msgspec.Meta(ge=1)] = 60.0
    # Escrow (gateway.billing.escrow): each process reserves a slice of an org's available balance
    # (and of a budgeted key's room) ahead, sized to cover `escrow_horizon_s` of its recent spend,
    # never above `escrow_share_percent` of what is available, and admits requests against it in
    # memory. A slice idle for `escrow_idle_s` is returned. False: every request holds on its own.
    escrow: bool = True
    escrow_horizon_s: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    escrow_share_percent: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    escrow_idle_s: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    # The longest a request's record may wait in the ledger's queue: one still queued then is
    # withdrawn unwritten and the request answered as failed, nothing charged (gateway.billing.charging).
    record_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 10.0

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


class WebhooksConfig(Section, frozen=True):
    """Where alerts may be delivered (gateway.webhooks): HTTPS to public addresses only, unless
    the operator allows a host (its private addresses too) or plain HTTP."""

    # Host names (or literal addresses) allowed to resolve anywhere; GATEWAY_WEBHOOKS_ALLOWED_HOSTS
    # lists them separated by commas.
    allowed_hosts: list[str] | str = []
    allow_http: bool = False
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=60)] = 10.0  # one delivery, connect to last byte
    max_response_bytes: Annotated[int, msgspec.Meta(ge=0)] = 65_536  # read of a receiver's answer, at most
    retry_first_s: Annotated[float, msgspec.Meta(gt=0)] = 5.0  # the first retry's delay, doubling to an hour
    retry_for_s: Annotated[float, msgspec.Meta(gt=0)] = 86_400.0  # then the endpoint is disabled
    poll_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 1.0  # how often the ledger is read for alerts

    def __post_init__(self) -> None:
        if isinstance(self.allowed_hosts, str):
            hosts = [host.strip() for host in self.allowed_hosts.split(",") if host.strip()]
            msgspec.structs.force_setattr(self, "allowed_hosts", hosts)


class TelemetryConfig(Section, frozen=True):
    """Traces (gateway.telemetry): exported over OTLP HTTP/protobuf when an endpoint is set here or
    by the standard OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT variables (which win); else none."""

    otlp_endpoint: str = ""  # the collector's base URL (/v1/traces is added) or its full traces URL
    service_name: str = "ai-gateway"  # OTEL_SERVICE_NAME wins
    capture_content: bool = False  # prompt and answer text on spans: only when the operator says so


Protocol = Literal["openai", "anthropic", "google", "bedrock", "vertex", "azure"]
# A cloud region goes into a host name and a path: letters, digits and dashes only.
REGION = re.compile(r"[a-z0-9][a-z0-9-]*")


class ProviderConfig(Section, frozen=True):
    """One upstream, `[providers.<id>]`: the wire protocol it speaks and where it is. `headers`
    and `query` are sent with every request (an OpenAI-compatible host's extras). The clouds add
    their own keys: `region` (bedrock, vertex), `project` (vertex), `api_version` and Entra ID's
    `tenant_id`, `client_id`, `client_secret`, `authority_host` (azure)."""

    protocol: Protocol
    base_url: str = ""  # empty: the protocol's own (bedrock and vertex, from the region); else required
    api_key: str = ""
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 600.0  # longest silence from upstream
    headers: dict[str, str] = {}
    query: dict[str, str] = {}
    region: str = ""  # bedrock: us-east-1 when empty; vertex: us-east5 when empty, or "global"
    project: str = ""  # vertex: empty takes the project of the Application Default Credentials
    credentials_file: str = ""  # vertex: a service account file; empty: Application Default Credentials
    api_version: str = ""  # azure: set, the deployments path with ?api-version=; empty, the v1 API
    tenant_id: str = ""  # azure: Entra ID client credentials, all three (checked by the adapter) or none
    client_id: str = ""
    client_secret: str = ""
    authority_host: str = ""  # azure: empty, https://login.microsoftonline.com
    # Batches go to the provider's own batch API (the openai protocol's Files + Batches, the
    # anthropic protocol's Message Batches); None: `batch_api` says the default.
    batch_api: bool | None = None

    def __post_init__(self) -> None:
        if self.region and not REGION.fullmatch(self.region):
            raise ValueError(f"region {self.region!r} must be lower-case letters, digits and '-'")
        if not self.base_url and self.protocol not in ("bedrock", "vertex", "azure"):
            raise ValueError(f"a {self.protocol} provider needs a base_url")


def batch_api(provider_id: str, config: ProviderConfig) -> bool:
    """Whether a provider's batches run on its own batch API: as configured, else true for the
    shipped `openai` provider and any provider of the anthropic protocol."""
    if config.batch_api is not None:
        return config.batch_api and config.protocol in ("openai", "anthropic")
    return config.protocol == "anthropic" or (provider_id == "openai" and config.protocol == "openai")


def _shipped_providers() -> dict[str, ProviderConfig]:
    """The providers every gateway knows unless its file says otherwise. `groq` and
    `openrouter` are the shipped catalogue's second providers of the open-weight models; the
    clouds serve the shipped catalogue's Claude, Gemini, GPT and Titan rows, each with its
    credentials from where that cloud's own tools find them (an Azure resource needs base_url)."""
    return {
        "openai": ProviderConfig(protocol="openai", base_url="https://api.openai.com/v1",
                                 api_key="env:OPENAI_API_KEY"),
        "anthropic": ProviderConfig(protocol="anthropic", base_url="https://api.anthropic.com",
                                    api_key="env:ANTHROPIC_API_KEY"),
        "google": ProviderConfig(protocol="google", base_url="https://generativelanguage.googleapis.com",
                                 api_key="env:GEMINI_API_KEY"),
        "groq": ProviderConfig(protocol="openai", base_url="https://api.groq.com/openai/v1",
                               api_key="env:GROQ_API_KEY"),
        "openrouter": ProviderConfig(protocol="openai", base_url="https://openrouter.ai/api/v1",
                                     api_key="env:OPENROUTER_API_KEY"),
        "bedrock": ProviderConfig(protocol="bedrock", region="us-east-1", api_key="env:AWS_BEARER_TOKEN_BEDROCK"),
        "vertex": ProviderConfig(protocol="vertex", region="us-east5", project="env:GOOGLE_CLOUD_PROJECT"),
        "azure": ProviderConfig(protocol="azure", base_url="env:AZURE_OPENAI_BASE_URL",
                                api_key="env:AZURE_OPENAI_API_KEY"),
    }


Strategy = Literal["priority", "price", "latency"]


class RoutingConfig(Section, frozen=True):
    """How a model served by several providers picks one, and when it moves to the next."""

    strategy: Strategy = "priority"
    max_attempts: Annotated[int, msgspec.Meta(ge=1)] = 3  # providers tried for one request, at most
    deadline_s: Annotated[float, msgspec.Meta(gt=0)] = 600.0  # from the request's start, over every attempt
    failure_threshold: Annotated[int, msgspec.Meta(ge=1)] = 5  # consecutive failures that open a circuit
    cooldown_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0  # how long an open circuit skips its provider


class BatchesConfig(Section, frozen=True):
    """Batches (gateway.batches): lines a gateway-run batch has in flight at once, how often a
    native batch's upstream is asked how it stands, and how long uploaded and produced files last."""

    concurrency: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 8
    poll_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    file_retention_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] = 30
    # Where uploaded and produced files live without object storage ([storage]); empty: a `files`
    # directory beside a SQLite ledger file, else ./data/files (storage.files.local_root).
    files_path: str = ""


class CatalogueConfig(Section, frozen=True):
    path: str = ""  # empty: the catalogue shipped with the gateway
    # A changed catalogue without a stated instant takes effect this long after it is published
    # (SIGHUP, `gateway admin reload-catalogue`), so every worker and replica has it by then.
    switch_delay_s: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 2.0


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
    providers: dict[str, ProviderConfig] = msgspec.field(default_factory=_shipped_providers)
    routing: RoutingConfig = RoutingConfig()
    catalogue: CatalogueConfig = CatalogueConfig()
    webhooks: WebhooksConfig = WebhooksConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    batches: BatchesConfig = BatchesConfig()

    def __post_init__(self) -> None:
        for name in self.providers:
            if not PROVIDER_ID.fullmatch(name):
                raise ValueError(f"provider id {name!r} must be lower-case letters, digits, '-', '_' or '.'"
                                 " (it prefixes model ids as provider/model)")


def load(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read `path` (if given), apply GATEWAY_* overrides, resolve env: secrets, validate."""
    env = os.environ if environ is None else environ
    raw = _merge(msgspec.to_builtins(Config()), _read_toml(path) if path else {})
    for name, value in env.items():
        if name.startswith(ENV_PREFIX):
            _override(raw, name, value)
    resolved = _resolve_secrets(raw, env)
    _check_providers(resolved.get("providers"))
    try:
        return msgspec.convert(resolved, Config, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None


def _check_providers(tables: Any) -> None:
    """Each `[providers.<id>]` table on its own, so an error names the provider (msgspec names a
    table's entries `[...]`)."""
    for name, table in (tables or {}).items() if isinstance(tables, dict) else ():
        try:
            msgspec.convert(table, ProviderConfig, strict=False)
        except msgspec.ValidationError as exc:
            message = str(exc)  # "... - at `$.key`", or no location for the table as a whole
            located = message.replace("`$", f"`$.providers.{name}") if "`$" in message else \
                f"{message} - at `$.providers.{name}`"
            raise ConfigError(f"invalid configuration: {located}") from None


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
        if not suffix.startswith(field.name + "_"):
            continue
        rest = suffix[len(field.name) + 1:]
        path = _env_path(rest, field.type) if _is_section(field.type) else _table_path(rest, field.type)
        if path:
            return (field.name, *path)
    return None


def _table_path(suffix: str, annotation: Any) -> tuple[str, str] | None:
    """In a table of sections by name (`[providers.<id>]`), 'groq_base_url' -> ('groq', 'base_url'):
    the longest key the section has ends the name, whatever precedes it is the table's name."""
    if typing.get_origin(annotation) is not dict or not _is_section(section := typing.get_args(annotation)[1]):
        return None
    for key in sorted((f.name for f in msgspec.structs.fields(section)), key=len, reverse=True):
        name = suffix.removesuffix("_" + key)
        if name != suffix and name:
            return name, key
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
