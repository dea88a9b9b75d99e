"""The sweeper reads its sections of the gateway's config file, with the same overrides."""

import pytest

from sweeper.settings import Settings, SettingsError, load


def write(tmp_path, text: str):
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


def test_defaults_match_the_gateways():
    settings = load(None, environ={})
    assert settings == Settings()
    assert (settings.ledger.url, settings.storage.retention_days, settings.sweeper.interval_s,
            settings.retention.text_days) == ("sqlite:///./data/gateway.db", 30, 300.0, 0)


def test_its_sections_are_read_and_the_gateways_keys_passed_over(tmp_path):
    path = write(tmp_path, '[server]\nport = 1\n[providers.openai]\nbase_url = "x"\n'
                           '[storage]\nretention_days = 14\nsigning_secret = "s"\n[sweeper]\ninterval_s = 60\n')
    settings = load(path, environ={})
    assert (settings.storage.retention_days, settings.sweeper.interval_s) == (14, 60.0)


def test_environment_overrides_and_env_secrets(tmp_path):
    path = write(tmp_path, '[storage]\ns3_secret_access_key = "env:MY_S3_SECRET"\n[ledger]\nsigning_key = "env:KEY"\n')
    settings = load(path, environ={"MY_S3_SECRET": "hidden", "KEY": "-----BEGIN PRIVATE KEY-----",
                                   "GATEWAY_RETENTION_TEXT_DAYS": "90",
                                   "GATEWAY_STORAGE_RETENTION_DAYS": "7", "GATEWAY_SERVER_PORT": "1"})
    assert settings.storage.s3_secret_access_key == "hidden"
    assert settings.ledger.signing_key == "-----BEGIN PRIVATE KEY-----"  # the gateway's key, for its checkpoints
    assert (settings.retention.text_days, settings.storage.retention_days) == (90, 7)


@pytest.mark.parametrize("text, named", [
    ("[storage]\nretention_days = 0\n", "retention_days"),
    ('[sweeper]\ninterval_s = "soon"\n', "interval_s"),
    ("retention = 3\n", "[retention]"),
    ("[ledger\n", "not valid TOML"),
])
def test_bad_settings_name_the_problem(tmp_path, text, named):
    with pytest.raises(SettingsError, match=named.replace("[", r"\[").replace("]", r"\]")):
        load(write(tmp_path, text), environ={})


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(SettingsError, match="cannot read config file"):
        load(tmp_path / "absent.toml", environ={})
