"""Configuration (DESIGN §7): embedded defaults, the TOML file, GATEWAY_* overrides, env: secrets,
and a ConfigError naming the key for anything unusable."""

import os
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from gateway import config as config_module
from gateway.config import Config, ConfigError, load
from tests.gateway.gateway_helpers import clean_env, ledger_toml, run_cli, write_config


def toml_file(tmp_path: Path, text: str) -> Path:
    return write_config(tmp_path, text, "config.toml")


def value_at(config: Config, dotted: str) -> object:
    node: object = config
    for part in dotted.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return node


def leaves(node: dict, prefix: str = "") -> set[str]:
    """Dotted paths of every non-table key of a config tree."""
    found = set()
    for key, value in node.items():
        path = f"{prefix}{key}"
        found |= leaves(value, path + ".") if isinstance(value, dict) else {path}
    return found


# --- defaults -------------------------------------------------------------------------------


def test_defaults_are_the_embedded_default():
    config = load(None, {})
    assert config.server.host == "127.0.0.1"
    assert config.server.port == 8080
    assert config.server.workers == 1
    assert config.ledger.url == "sqlite:///./data/gateway.db"
    assert config.redis.url == ""
    assert config.storage.s3_endpoint_url == ""
    assert config.storage.s3_bucket == "gateway-media"
    assert config.storage.s3_region == "us-east-1"
    assert config.storage.s3_access_key_id == ""
    assert config.storage.s3_secret_access_key == ""
    assert config.storage.retention_days == 30
    assert config.billing.usd_to_inr == Decimal("84.0")
    assert config.music.upstream_timeout_s == 240
    assert config.sweeper.interval_s == 300
    assert config.providers["openai"].base_url == "https://api.openai.com/v1"
    assert config.providers["anthropic"].base_url == "https://api.anthropic.com"
    assert config.providers["google"].base_url == "https://generativelanguage.googleapis.com"
    assert config.catalogue.path == ""


def test_default_provider_keys_are_read_from_the_documented_variables():
    config = load(None, {"OPENAI_API_KEY": "sk-openai-1", "ANTHROPIC_API_KEY": "sk-ant-2",
                         "GEMINI_API_KEY": "AIza-3"})
    assert config.providers["openai"].api_key == "sk-openai-1"
    assert config.providers["anthropic"].api_key == "sk-ant-2"
    assert config.providers["google"].api_key == "AIza-3"


def test_default_provider_keys_are_empty_when_their_variables_are_unset():
    config = load(None, {})
    assert (config.providers["openai"].api_key, config.providers["anthropic"].api_key,
            config.providers["google"].api_key) == ("", "", "")


def test_load_reads_os_environ_when_no_environ_is_given(monkeypatch):
    for name in [name for name in os.environ if name.startswith("GATEWAY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GATEWAY_SERVER_PORT", "9123")
    assert load().server.port == 9123


# --- the TOML file --------------------------------------------------------------------------


def test_file_values_replace_defaults_and_leave_the_rest(tmp_path):
    path = toml_file(tmp_path, """
[server]
host = "0.0.0.0"
port = 9000

[ledger]
url = "sqlite:////var/lib/gateway/ledger.db"

[redis]
url = "redis://cache:6379/1"

[storage]
s3_endpoint_url = "http://s3.local:9000"
retention_days = 7

[providers.openai]
base_url = "http://sim:1/v1"
api_key = "sk-from-file"
timeout_s = 2.5

[catalogue]
path = "/etc/gateway/catalogue.json"
""")
    config = load(path, {})
    assert config.server.host == "0.0.0.0"
    assert config.server.port == 9000
    assert config.server.workers == 1  # not in the file: default
    assert config.ledger.url == "sqlite:////var/lib/gateway/ledger.db"
    assert config.redis.url == "redis://cache:6379/1"
    assert config.storage.s3_endpoint_url == "http://s3.local:9000"
    assert config.storage.retention_days == 7
    assert config.storage.s3_bucket == "gateway-media"
    assert config.providers["openai"].base_url == "http://sim:1/v1"
    assert config.providers["openai"].api_key == "sk-from-file"
    assert config.providers["openai"].timeout_s == 2.5
    assert config.providers["anthropic"].base_url == "https://api.anthropic.com"
    assert config.catalogue.path == "/etc/gateway/catalogue.json"


def test_a_provider_table_with_only_base_url_keeps_the_default_key_variable(tmp_path):
    path = toml_file(tmp_path, '[providers.openai]\nbase_url = "http://sim:1/v1"\n')
    config = load(path, {"OPENAI_API_KEY": "sk-default-var"})
    assert config.providers["openai"].api_key == "sk-default-var"


def test_toml_float_usd_to_inr_stays_an_exact_decimal(tmp_path):
    path = toml_file(tmp_path, "[billing]\nusd_to_inr = 83.3333\n")
    rate = load(path, {}).billing.usd_to_inr
    assert isinstance(rate, Decimal)
    assert rate == Decimal("83.3333")
    assert str(rate) == "83.3333"


def test_toml_float_for_a_float_key_is_accepted(tmp_path):
    path = toml_file(tmp_path, "[music]\nupstream_timeout_s = 120.5\n[sweeper]\ninterval_s = 60\n")
    config = load(path, {})
    assert config.music.upstream_timeout_s == 120.5
    assert config.sweeper.interval_s == 60.0


# --- GATEWAY_<SECTION>_<KEY> ----------------------------------------------------------------

ENV_OVERRIDES = [
    ("GATEWAY_SERVER_HOST", "0.0.0.0", "server.host", "0.0.0.0"),
    ("GATEWAY_SERVER_PORT", "9001", "server.port", 9001),
    ("GATEWAY_SERVER_WORKERS", "3", "server.workers", 3),
    ("GATEWAY_LEDGER_URL", "sqlite:////tmp/x.db", "ledger.url", "sqlite:////tmp/x.db"),
    ("GATEWAY_LEDGER_MIGRATE_ON_START", "false", "ledger.migrate_on_start", False),
    ("GATEWAY_LEDGER_TIMEOUT_S", "2.5", "ledger.timeout_s", 2.5),
    ("GATEWAY_LEDGER_CONNECT_TIMEOUT_S", "1", "ledger.connect_timeout_s", 1.0),
    ("GATEWAY_LEDGER_CHECKPOINT_INTERVAL_S", "60", "ledger.checkpoint_interval_s", 60.0),
    ("GATEWAY_LEDGER_SIGNING_KEY", "/keys/ledger.pem", "ledger.signing_key", "/keys/ledger.pem"),
    ("GATEWAY_REDIS_URL", "redis://127.0.0.1:6379/2", "redis.url", "redis://127.0.0.1:6379/2"),
    ("GATEWAY_REDIS_CONNECT_TIMEOUT_S", "0.1", "redis.connect_timeout_s", 0.1),
    ("GATEWAY_REDIS_TIMEOUT_S", "0.3", "redis.timeout_s", 0.3),
    ("GATEWAY_REDIS_COOLDOWN_S", "5", "redis.cooldown_s", 5.0),
    ("GATEWAY_STORAGE_S3_ENDPOINT_URL", "http://s3:9000", "storage.s3_endpoint_url", "http://s3:9000"),
    ("GATEWAY_STORAGE_S3_BUCKET", "media-b", "storage.s3_bucket", "media-b"),
    ("GATEWAY_STORAGE_S3_REGION", "eu-west-1", "storage.s3_region", "eu-west-1"),
    ("GATEWAY_STORAGE_S3_ACCESS_KEY_ID", "AKIAEXAMPLE", "storage.s3_access_key_id", "AKIAEXAMPLE"),
    ("GATEWAY_STORAGE_S3_SECRET_ACCESS_KEY", "s3-secret", "storage.s3_secret_access_key", "s3-secret"),
    ("GATEWAY_STORAGE_RETENTION_DAYS", "14", "storage.retention_days", 14),
    ("GATEWAY_STORAGE_SIGNING_SECRET", "sign-me", "storage.signing_secret", "sign-me"),
    ("GATEWAY_STORAGE_SIGNED_URL_TTL_S", "60", "storage.signed_url_ttl_s", 60),
    ("GATEWAY_BILLING_USD_TO_INR", "83.3333", "billing.usd_to_inr", Decimal("83.3333")),
    ("GATEWAY_BILLING_RESERVE", "false", "billing.reserve", False),
    ("GATEWAY_BILLING_HOLD_LEASE_S", "90", "billing.hold_lease_s", 90.0),
    ("GATEWAY_BILLING_ESCROW", "false", "billing.escrow", False),
    ("GATEWAY_BILLING_ESCROW_HORIZON_S", "2.5", "billing.escrow_horizon_s", 2.5),
    ("GATEWAY_BILLING_ESCROW_SHARE_PERCENT", "25", "billing.escrow_share_percent", 25),
    ("GATEWAY_BILLING_ESCROW_IDLE_S", "30", "billing.escrow_idle_s", 30.0),
    ("GATEWAY_BILLING_RECORD_TIMEOUT_S", "4.5", "billing.record_timeout_s", 4.5),
    ("GATEWAY_MUSIC_UPSTREAM_TIMEOUT_S", "90.5", "music.upstream_timeout_s", 90.5),
    ("GATEWAY_SWEEPER_INTERVAL_S", "15", "sweeper.interval_s", 15.0),
    ("GATEWAY_RETENTION_TEXT_DAYS", "90", "retention.text_days", 90),
    ("GATEWAY_SECRETS_MASTER_KEY", "master", "secrets.master_key", "master"),
    ("GATEWAY_LIMITS_REQUESTS_PER_MINUTE", "600", "limits.requests_per_minute", 600),
    ("GATEWAY_SERVER_SHUTDOWN_TIMEOUT_S", "30", "server.shutdown_timeout_s", 30.0),
    ("GATEWAY_SERVER_MAX_INFLIGHT_BODY_BYTES", "1000000", "server.max_inflight_body_bytes", 1_000_000),
    ("GATEWAY_SERVER_BODY_BUDGET_WAIT_S", "2.5", "server.body_budget_wait_s", 2.5),
    ("GATEWAY_SERVER_HEADER_TIMEOUT_S", "15", "server.header_timeout_s", 15.0),
    ("GATEWAY_SERVER_BODY_TIMEOUT_S", "45", "server.body_timeout_s", 45.0),
    ("GATEWAY_SERVER_KEEPALIVE_TIMEOUT_S", "60", "server.keepalive_timeout_s", 60.0),
    ("GATEWAY_LIMITS_TOKENS_PER_MINUTE", "90000", "limits.tokens_per_minute", 90000),
    ("GATEWAY_PROVIDERS_OPENAI_BASE_URL", "http://sim:1/v1", "providers.openai.base_url", "http://sim:1/v1"),
    ("GATEWAY_PROVIDERS_OPENAI_API_KEY", "sk-o", "providers.openai.api_key", "sk-o"),
    ("GATEWAY_PROVIDERS_OPENAI_TIMEOUT_S", "7", "providers.openai.timeout_s", 7.0),
    ("GATEWAY_PROVIDERS_ANTHROPIC_BASE_URL", "http://sim:2", "providers.anthropic.base_url", "http://sim:2"),
    ("GATEWAY_PROVIDERS_ANTHROPIC_API_KEY", "sk-a", "providers.anthropic.api_key", "sk-a"),
    ("GATEWAY_PROVIDERS_ANTHROPIC_TIMEOUT_S", "8", "providers.anthropic.timeout_s", 8.0),
    ("GATEWAY_PROVIDERS_GOOGLE_BASE_URL", "http://sim:3", "providers.google.base_url", "http://sim:3"),
    ("GATEWAY_PROVIDERS_GOOGLE_API_KEY", "g-key", "providers.google.api_key", "g-key"),
    ("GATEWAY_PROVIDERS_GOOGLE_TIMEOUT_S", "9", "providers.google.timeout_s", 9.0),
    ("GATEWAY_CATALOGUE_PATH", "/srv/cat.json", "catalogue.path", "/srv/cat.json"),
    ("GATEWAY_CATALOGUE_SWITCH_DELAY_S", "5", "catalogue.switch_delay_s", 5.0),
    *[(f"GATEWAY_PROVIDERS_{name.upper()}_PROTOCOL", "anthropic", f"providers.{name}.protocol", "anthropic")
      for name in ("openai", "anthropic", "google", "groq", "openrouter")],
    *[(f"GATEWAY_PROVIDERS_{name.upper()}_PROTOCOL", "azure", f"providers.{name}.protocol", "azure")
      for name in ("bedrock", "vertex", "azure")],
    *[(f"GATEWAY_PROVIDERS_{name.upper()}_{key.upper()}", text, f"providers.{name}.{key}", expected)
      for name in ("bedrock", "vertex", "azure")
      for key, text, expected in (("base_url", "http://sim:5", "http://sim:5"), ("api_key", "k-2", "k-2"),
                                  ("timeout_s", "4", 4.0))],
    *[(f"GATEWAY_PROVIDERS_{name.upper()}_{key.upper()}", text, f"providers.{name}.{key}", text)
      for name in ("openai", "anthropic", "google", "groq", "openrouter", "bedrock", "vertex", "azure")
      for key, text in (("region", "eu-west-1"), ("project", "proj-7"), ("credentials_file", "/srv/sa.json"),
                        ("api_version", "2024-10-21"), ("tenant_id", "t-1"), ("client_id", "c-1"),
                        ("client_secret", "s-1"), ("authority_host", "https://login.example"))],
    *[(f"GATEWAY_PROVIDERS_{name.upper()}_{key.upper()}", text, f"providers.{name}.{key}", expected)
      for name in ("groq", "openrouter")
      for key, text, expected in (("base_url", "http://sim:4/v1", "http://sim:4/v1"), ("api_key", "k-1", "k-1"),
                                  ("timeout_s", "3", 3.0))],
    ("GATEWAY_ROUTING_STRATEGY", "latency", "routing.strategy", "latency"),
    ("GATEWAY_ROUTING_MAX_ATTEMPTS", "2", "routing.max_attempts", 2),
    ("GATEWAY_ROUTING_DEADLINE_S", "12.5", "routing.deadline_s", 12.5),
    ("GATEWAY_ROUTING_FAILURE_THRESHOLD", "4", "routing.failure_threshold", 4),
    ("GATEWAY_ROUTING_COOLDOWN_S", "9", "routing.cooldown_s", 9.0),
    ("GATEWAY_WEBHOOKS_ALLOWED_HOSTS", "hooks.internal, 10.0.0.9", "webhooks.allowed_hosts",
     ["hooks.internal", "10.0.0.9"]),
    ("GATEWAY_WEBHOOKS_ALLOW_HTTP", "true", "webhooks.allow_http", True),
    ("GATEWAY_WEBHOOKS_TIMEOUT_S", "3", "webhooks.timeout_s", 3.0),
    ("GATEWAY_WEBHOOKS_MAX_RESPONSE_BYTES", "100", "webhooks.max_response_bytes", 100),
    ("GATEWAY_WEBHOOKS_RETRY_FIRST_S", "0.5", "webhooks.retry_first_s", 0.5),
    ("GATEWAY_WEBHOOKS_RETRY_FOR_S", "60", "webhooks.retry_for_s", 60.0),
    ("GATEWAY_WEBHOOKS_POLL_INTERVAL_S", "0.2", "webhooks.poll_interval_s", 0.2),
    ("GATEWAY_TELEMETRY_OTLP_ENDPOINT", "http://otel:4318", "telemetry.otlp_endpoint", "http://otel:4318"),
    ("GATEWAY_TELEMETRY_SERVICE_NAME", "gw-eu", "telemetry.service_name", "gw-eu"),
    ("GATEWAY_TELEMETRY_CAPTURE_CONTENT", "true", "telemetry.capture_content", True),
    ("GATEWAY_BATCHES_FILES_PATH", "/srv/files", "batches.files_path", "/srv/files"),
    ("GATEWAY_BATCHES_CONCURRENCY", "32", "batches.concurrency", 32),
    ("GATEWAY_LEDGER_LOG_ORIGIN", "ledger.example.com", "ledger.log_origin", "ledger.example.com"),
    ("GATEWAY_BATCHES_POLL_INTERVAL_S", "0.5", "batches.poll_interval_s", 0.5),
    ("GATEWAY_BATCHES_FILE_RETENTION_DAYS", "7", "batches.file_retention_days", 7),
    *[(f"GATEWAY_PROVIDERS_{name.upper()}_BATCH_API", "false", f"providers.{name}.batch_api", False)
      for name in ("openai", "anthropic", "google", "groq", "openrouter", "bedrock", "vertex", "azure")],
]


def test_every_config_key_has_an_override_case():
    assert {case[2] for case in ENV_OVERRIDES} == leaves(msgspec.to_builtins(Config()))


@pytest.mark.parametrize(("variable", "text", "key", "expected"), ENV_OVERRIDES,
                         ids=[case[0] for case in ENV_OVERRIDES])
def test_env_variable_overrides_its_key(variable, text, key, expected):
    value = value_at(load(None, {variable: text}), key)
    assert value == expected
    assert type(value) is type(expected)


def test_env_variable_overrides_the_file(tmp_path):
    path = toml_file(tmp_path, '[server]\nport = 9000\n[providers.openai]\nbase_url = "http://file/v1"\n')
    config = load(path, {"GATEWAY_SERVER_PORT": "9002",
                         "GATEWAY_PROVIDERS_OPENAI_BASE_URL": "http://env/v1"})
    assert config.server.port == 9002
    assert config.providers["openai"].base_url == "http://env/v1"


def test_env_override_of_one_provider_key_leaves_its_siblings(tmp_path):
    path = toml_file(tmp_path, '[providers.openai]\nbase_url = "http://file/v1"\napi_key = "sk-file"\n')
    config = load(path, {"GATEWAY_PROVIDERS_OPENAI_API_KEY": "sk-env"})
    assert config.providers["openai"].base_url == "http://file/v1"
    assert config.providers["openai"].api_key == "sk-env"


def test_a_provider_is_declared_in_the_file_with_its_protocol_headers_and_query(tmp_path):
    path = toml_file(tmp_path, """
[providers.azure-eu]
protocol = "openai"
base_url = "https://eu.example.azure.com/openai/deployments/x"
headers = { api-key = "env:AZURE_KEY" }
query = { api-version = "2024-10-21" }
""")
    config = load(path, {"AZURE_KEY": "az-secret"})
    azure = config.providers["azure-eu"]
    assert (azure.protocol, azure.headers, azure.query) == ("openai", {"api-key": "az-secret"},
                                                            {"api-version": "2024-10-21"})
    assert set(config.providers) == {"openai", "anthropic", "google", "groq", "openrouter", "bedrock", "vertex",
                                     "azure", "azure-eu"}


def test_a_provider_declared_by_variables_alone_needs_its_protocol():
    config = load(None, {"GATEWAY_PROVIDERS_LOCAL_LLM_PROTOCOL": "openai",
                         "GATEWAY_PROVIDERS_LOCAL_LLM_BASE_URL": "http://127.0.0.1:9/v1"})
    assert config.providers["local_llm"].base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigError, match="protocol"):
        load(None, {"GATEWAY_PROVIDERS_OTHER_BASE_URL": "http://127.0.0.1:9/v1"})


@pytest.mark.parametrize("table", ['[providers.x]\nprotocol = "grpc"\nbase_url = "http://h"\n',
                                   '[providers."Bad/Id"]\nprotocol = "openai"\nbase_url = "http://h"\n',
                                   '[routing]\nstrategy = "random"\n', '[routing]\nmax_attempts = 0\n'])
def test_a_bad_provider_or_routing_key_stops_start_up(tmp_path, table):
    with pytest.raises(ConfigError):
        load(toml_file(tmp_path, table), {})


def test_variables_without_the_gateway_prefix_are_ignored():
    assert load(None, {"SERVER_PORT": "1", "GATEWAYX": "1", "PATH": "/bin"}) == load(None, {})


# --- env:NAME secrets -----------------------------------------------------------------------


def test_env_secret_in_the_file_is_read_from_the_environment(tmp_path):
    path = toml_file(tmp_path, """
[providers.openai]
base_url = "http://sim/v1"
api_key = "env:MY_OPENAI_SECRET"

[storage]
s3_secret_access_key = "env:MY_S3_SECRET"
""")
    config = load(path, {"MY_OPENAI_SECRET": "sk-secret-1", "MY_S3_SECRET": "s3-secret-2"})
    assert config.providers["openai"].api_key == "sk-secret-1"
    assert config.storage.s3_secret_access_key == "s3-secret-2"


def test_env_secret_given_by_an_override_variable_is_resolved():
    config = load(None, {"GATEWAY_PROVIDERS_ANTHROPIC_API_KEY": "env:TEAM_ANTHROPIC",
                         "TEAM_ANTHROPIC": "sk-ant-team"})
    assert config.providers["anthropic"].api_key == "sk-ant-team"


def test_env_secret_of_an_unset_variable_is_empty(tmp_path):
    path = toml_file(tmp_path, '[providers.google]\nbase_url = "http://g"\napi_key = "env:NOT_SET_ANYWHERE"\n')
    assert load(path, {}).providers["google"].api_key == ""


def test_env_secret_is_not_resolved_recursively():
    config = load(None, {"GATEWAY_PROVIDERS_OPENAI_API_KEY": "env:A", "A": "env:B", "B": "deep"})
    assert config.providers["openai"].api_key == "env:B"


# --- errors name the key --------------------------------------------------------------------


def config_error(path: Path | None, environ: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        load(path, environ)
    return str(caught.value)


def test_unknown_key_in_the_file_is_an_error_naming_it(tmp_path):
    message = config_error(toml_file(tmp_path, "[server]\nprot = 8080\n"), {})
    assert "`prot`" in message
    assert "$.server" in message


def test_unknown_section_in_the_file_is_an_error_naming_it(tmp_path):
    message = config_error(toml_file(tmp_path, "[serverz]\nport = 8080\n"), {})
    assert "`serverz`" in message


def test_unknown_key_in_a_provider_table_is_an_error_naming_it(tmp_path):
    path = toml_file(tmp_path, '[providers.openai]\nbase_url = "x"\napi-key = "sk"\n')
    message = config_error(path, {})
    assert "`api-key`" in message
    assert "$.providers.openai" in message


def test_a_new_provider_without_its_protocol_is_an_error_naming_it(tmp_path):
    message = config_error(toml_file(tmp_path, '[providers.mistral]\nbase_url = "x"\n'), {})
    assert "`protocol`" in message and "$.providers.mistral" in message


def test_unknown_gateway_variable_is_an_error_naming_it():
    assert config_error(None, {"GATEWAY_SERVER_PROT": "1"}) == \
        "unknown configuration variable GATEWAY_SERVER_PROT"


def test_gateway_variable_naming_a_whole_section_is_an_error():
    assert config_error(None, {"GATEWAY_PROVIDERS_OPENAI": "x"}) == \
        "unknown configuration variable GATEWAY_PROVIDERS_OPENAI"


def test_wrong_type_in_the_file_is_an_error_naming_the_key(tmp_path):
    message = config_error(toml_file(tmp_path, '[server]\nport = "eighty"\n'), {})
    assert "$.server.port" in message
    assert "Expected `int`" in message


def test_fractional_port_in_the_file_is_an_error_naming_the_key(tmp_path):
    message = config_error(toml_file(tmp_path, "[server]\nport = 8080.5\n"), {})
    assert "$.server.port" in message


def test_a_table_given_as_a_scalar_is_an_error_naming_it(tmp_path):
    message = config_error(toml_file(tmp_path, "server = 1\n"), {})
    assert "$.server" in message


def test_wrong_type_in_an_env_variable_is_an_error_naming_the_key():
    message = config_error(None, {"GATEWAY_SERVER_PORT": "eighty"})
    assert "$.server.port" in message
    assert "Expected `int`" in message


def test_garbage_usd_to_inr_in_an_env_variable_is_an_error_naming_the_key():
    assert "$.billing.usd_to_inr" in config_error(None, {"GATEWAY_BILLING_USD_TO_INR": "lots"})


def test_out_of_range_value_is_an_error_naming_the_key():
    message = config_error(None, {"GATEWAY_SERVER_WORKERS": "0"})
    assert "$.server.workers" in message
    assert ">= 1" in message


def test_invalid_toml_is_an_error_naming_the_file(tmp_path):
    path = toml_file(tmp_path, "[server\nport = 1\n")
    message = config_error(path, {})
    assert message.startswith(f"config file {path} is not valid TOML: ")
    assert "line 1" in message


def test_missing_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "absent.toml"
    assert config_error(path, {}) == f"cannot read config file {path}: No such file or directory"


@pytest.mark.parametrize("rate", ["0", "0.0", "-83.5", "nan", "inf"])
def test_non_positive_or_non_finite_usd_to_inr_in_the_file_is_an_error(tmp_path, rate):
    message = config_error(toml_file(tmp_path, f"[billing]\nusd_to_inr = {rate}\n"), {})
    assert "billing.usd_to_inr must be a positive number" in message


@pytest.mark.parametrize("rate", ["0", "-1"])
def test_non_positive_usd_to_inr_from_the_environment_is_an_error(rate):
    message = config_error(None, {"GATEWAY_BILLING_USD_TO_INR": rate})
    assert "billing.usd_to_inr must be a positive number" in message


def test_env_override_into_a_key_the_file_set_to_a_scalar_is_an_error(tmp_path):
    message = config_error(toml_file(tmp_path, "server = 1\n"), {"GATEWAY_SERVER_PORT": "1"})
    assert message == "GATEWAY_SERVER_PORT overrides server.port, but the file sets it to a value"


def test_config_error_is_a_value_error():
    assert issubclass(config_module.ConfigError, ValueError)


# --- through the CLI ------------------------------------------------------------------------


def test_cli_exits_2_naming_an_unknown_file_key(tmp_path):
    bad = write_config(tmp_path, ledger_toml(tmp_path / "ledger.db", "[server]\nprot = 1\n"), "bad.toml")
    result = run_cli("admin", "balance", "x", "--config", str(bad))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("gateway: error: invalid configuration: ")
    assert "`prot`" in result.stderr
    assert not (tmp_path / "ledger.db").exists()


def test_cli_exits_2_naming_a_wrongly_typed_variable(tmp_path):
    good = write_config(tmp_path, ledger_toml(tmp_path / "ledger.db"))
    result = run_cli("admin", "balance", "x", "--config", str(good),
                     env=clean_env(GATEWAY_SERVER_PORT="eighty"))
    assert result.returncode == 2
    assert "$.server.port" in result.stderr


def test_cli_exits_2_naming_an_unknown_variable(tmp_path):
    good = write_config(tmp_path, ledger_toml(tmp_path / "ledger.db"))
    result = run_cli("admin", "balance", "x", "--config", str(good),
                     env=clean_env(GATEWAY_LEDGER_PATH="/tmp/x"))
    assert result.returncode == 2
    assert result.stderr == "gateway: error: unknown configuration variable GATEWAY_LEDGER_PATH\n"


def test_cli_exits_2_naming_a_missing_config_file(tmp_path):
    result = run_cli("admin", "balance", "x", "--config", str(tmp_path / "nope.toml"))
    assert result.returncode == 2
    missing = tmp_path / "nope.toml"
    assert result.stderr == f"gateway: error: cannot read config file {missing}: No such file or directory\n"


def test_batch_api_defaults_to_the_shipped_openai_provider_and_the_anthropic_protocol():
    from gateway.config import batch_api
    config = load(None, {"GATEWAY_PROVIDERS_GROQ_BATCH_API": "true", "GATEWAY_PROVIDERS_BEDROCK_BATCH_API": "true"})
    on = {name for name, provider in config.providers.items() if batch_api(name, provider)}
    assert on == {"openai", "anthropic", "groq"}  # bedrock's protocol has no batch API the gateway speaks
    assert not batch_api("openai", load(None, {"GATEWAY_PROVIDERS_OPENAI_BATCH_API": "false"}).providers["openai"])
