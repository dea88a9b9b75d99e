"""The sweeper's settings: its sections of the gateway's TOML file, with the same overrides.

The file is shared with the gateway, which validates all of it. The sweeper reads only the
sections it uses ([ledger], [storage], [sweeper], [retention], [batches]), typed with msgspec, and the
GATEWAY_<SECTION>_<KEY> variables of those sections; keys it does not use are the gateway's
business and are passed over. Secrets may be written `env:NAME`.
"""

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import msgspec

from storage.settings import StorageSettings  # the [storage] keys, shared with the gateway


class SettingsError(ValueError):
    """The settings cannot be used; the message names the offending key."""


class Section(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every section the sweeper reads.

    Subclasses repeat `frozen=True`: msgspec inherits it, but type checkers read it per class.
    """


class LedgerSettings(Section, frozen=True):
    url: str = "sqlite:///./data/gateway.db"
    # A pass verifies what was appended since the last checkpoint, and records one, once that is
    # this old (ledger.checkpoints); 0: never.
    checkpoint_interval_s: Annotated[float, msgspec.Meta(ge=0)] = 300.0
    # Signs those checkpoints (ledger.signing): an Ed25519 private key in PEM, as env:NAME or a
    # file's path, the gateway's [ledger] signing_key. Empty: unsigned.
    signing_key: str = ""
    log_origin: str = "ai-gateway/ledger"  # the gateway's [ledger] log_origin: the checkpoints' name


class SweeperSettings(Section, frozen=True):
    interval_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0


class RetentionSettings(Section, frozen=True):
    text_days: Annotated[int, msgspec.Meta(ge=0)] = 0  # 0 keeps logged text forever


class BatchesSettings(Section, frozen=True):
    # Where kept files live without object storage; empty: beside a SQLite ledger file, else
    # ./data/files (storage.files.local_root, as the gateway reads the same key).
    files_path: str = ""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    ledger: LedgerSettings = LedgerSettings()
    storage: StorageSettings = StorageSettings()
    sweeper: SweeperSettings = SweeperSettings()
    retention: RetentionSettings = RetentionSettings()
    batches: BatchesSettings = BatchesSettings()


# section name -> its field names, as the environment variables spell them
FIELDS = {section.name: [f.name for f in msgspec.structs.fields(section.type)]
          for section in msgspec.structs.fields(Settings)}


def load(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the sweeper's sections of `path`, apply GATEWAY_* overrides (from `environ`, the
    process's environment unless given) and env: secrets."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    file = _read_toml(path) if path else {}
    raw = {name: _section(file, name) for name in FIELDS}
    for section, fields in FIELDS.items():
        for field in fields:
            if (value := env.get(f"GATEWAY_{section}_{field}".upper())) is not None:
                raw[section][field] = value
    try:
        return msgspec.convert(_resolve_secrets(raw, env), Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise SettingsError(f"invalid configuration: {exc}") from None


def _section(file: dict, name: str) -> dict:
    value = file.get(name, {})
    if not isinstance(value, dict):
        raise SettingsError(f"invalid configuration: [{name}] must be a table")
    return {key: value[key] for key in FIELDS[name] if key in value}


def _read_toml(path: str | Path) -> dict:
    try:
        return tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None


def _resolve_secrets(raw: dict[str, dict], environ: Mapping[str, str]) -> dict[str, dict]:
    """Every 'env:NAME' value replaced by the variable's value ('' when unset)."""
    return {section: {key: environ.get(value[4:], "") if isinstance(value, str)
                      and value.startswith("env:") else value for key, value in fields.items()}
            for section, fields in raw.items()}
