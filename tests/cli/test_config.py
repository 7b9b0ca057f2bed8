"""devicecontrol.config.load_settings: each DEVICECONTROL_* variable, its default, its checks."""

from __future__ import annotations

import pytest

from devicecontrol.config import DEFAULT_DATABASE_URL, Settings, SettingsError, load_settings

DEFAULTS = {
    "database_url": "sqlite:///./devicecontrol.db",
    "access_token_ttl": 86400,
    "refresh_token_ttl": 2592000,
    "default_page_size": 100,
    "max_page_size": 500,
    "log_level": "info",
}
INTEGER_VARIABLES = {
    "DEVICECONTROL_ACCESS_TOKEN_TTL": "access_token_ttl",
    "DEVICECONTROL_REFRESH_TOKEN_TTL": "refresh_token_ttl",
    "DEVICECONTROL_DEFAULT_PAGE_SIZE": "default_page_size",
    "DEVICECONTROL_MAX_PAGE_SIZE": "max_page_size",
}


def fields(settings: Settings) -> dict[str, object]:
    return {name: getattr(settings, name) for name in DEFAULTS}


def test_with_no_variables_every_setting_has_its_documented_default():
    assert fields(load_settings({})) == DEFAULTS
    assert DEFAULTS["database_url"] == DEFAULT_DATABASE_URL


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_variable_means_its_default(blank):
    environ = {name: blank for name in INTEGER_VARIABLES}
    environ |= {"DEVICECONTROL_DATABASE_URL": blank, "DEVICECONTROL_LOG_LEVEL": blank}
    assert fields(load_settings(environ)) == DEFAULTS


def test_database_url_is_read_from_its_variable_without_surrounding_space():
    settings = load_settings({"DEVICECONTROL_DATABASE_URL": " postgresql://pg@db.internal/dc "})
    assert settings.database_url == "postgresql://pg@db.internal/dc"


@pytest.mark.parametrize(("variable", "field"), INTEGER_VARIABLES.items())
def test_each_integer_setting_is_read_from_its_variable(variable, field):
    settings = load_settings({variable: "321"})
    assert getattr(settings, field) == 321
    assert fields(settings) == DEFAULTS | {field: 321}


@pytest.mark.parametrize("variable", INTEGER_VARIABLES)
@pytest.mark.parametrize("raw", ["abc", "1.5", "0", "-1", "12s"])
def test_an_integer_setting_must_be_a_positive_integer(variable, raw):
    with pytest.raises(SettingsError, match=variable):
        load_settings({variable: raw})


@pytest.mark.parametrize("level", ["critical", "error", "warning", "info", "debug"])
def test_log_level_accepts_the_level_names_in_any_case(level):
    assert load_settings({"DEVICECONTROL_LOG_LEVEL": level.upper()}).log_level == level


@pytest.mark.parametrize("level", ["loud", "trace", "verbose", "20"])
def test_log_level_rejects_anything_else(level):
    with pytest.raises(SettingsError, match="DEVICECONTROL_LOG_LEVEL"):
        load_settings({"DEVICECONTROL_LOG_LEVEL": level})


def test_default_page_size_must_not_exceed_max_page_size():
    with pytest.raises(SettingsError, match="DEVICECONTROL_DEFAULT_PAGE_SIZE"):
        load_settings({"DEVICECONTROL_DEFAULT_PAGE_SIZE": "600"})
    settings = load_settings(
        {"DEVICECONTROL_DEFAULT_PAGE_SIZE": "20", "DEVICECONTROL_MAX_PAGE_SIZE": "20"}
    )
    assert (settings.default_page_size, settings.max_page_size) == (20, 20)


def test_variables_without_the_prefix_are_ignored():
    assert fields(load_settings({"DATABASE_URL": "sqlite:///other.db", "LOG_LEVEL": "x"})) == (
        DEFAULTS
    )


def test_the_process_environment_is_read_when_no_mapping_is_given(monkeypatch):
    monkeypatch.setenv("DEVICECONTROL_ACCESS_TOKEN_TTL", "77")
    assert load_settings().access_token_ttl == 77


def test_the_cli_database_url_replaces_only_the_database():
    settings = load_settings({"DEVICECONTROL_ACCESS_TOKEN_TTL": "60"})
    moved = settings.with_database_url("sqlite:///moved.db")
    assert moved.database_url == "sqlite:///moved.db"
    assert moved.access_token_ttl == 60
    assert settings.with_database_url(None) == settings


THROTTLE_VARIABLES = {
    "DEVICECONTROL_THROTTLE_LOGIN_PER_USERNAME": ("throttle_login_per_username", (5, 900)),
    "DEVICECONTROL_THROTTLE_LOGIN_PER_ADDRESS": ("throttle_login_per_address", (20, 60)),
    "DEVICECONTROL_THROTTLE_CLAIM_PER_CONTROLLER": ("throttle_claim_per_controller", (5, 900)),
    "DEVICECONTROL_THROTTLE_CLAIM_PER_USER": ("throttle_claim_per_user", (10, 900)),
}


@pytest.mark.parametrize(("variable", "field_and_default"), THROTTLE_VARIABLES.items())
def test_each_throttle_rule_has_its_default_and_is_read_as_count_slash_seconds(
    variable, field_and_default
):
    field, (limit, window) = field_and_default
    default = getattr(load_settings({}), field)
    assert (default.limit, default.window_s) == (limit, window)
    changed = getattr(load_settings({variable: "3/30"}), field)
    assert (changed.limit, changed.window_s) == (3, 30)


@pytest.mark.parametrize("variable", THROTTLE_VARIABLES)
@pytest.mark.parametrize("raw", ["5", "5/", "/900", "a/b", "0/900", "5/0", "-1/60"])
def test_a_throttle_rule_must_be_two_positive_integers(variable, raw):
    with pytest.raises(SettingsError, match=variable):
        load_settings({variable: raw})


def test_trusted_proxies_are_networks_and_default_to_none():
    assert load_settings({}).trusted_proxies == ()
    proxies = load_settings({"DEVICECONTROL_TRUSTED_PROXIES": "10.0.0.1, 192.168.0.0/16,::1"})
    assert [str(network) for network in proxies.trusted_proxies] == [
        "10.0.0.1/32",
        "192.168.0.0/16",
        "::1/128",
    ]
    with pytest.raises(SettingsError, match="DEVICECONTROL_TRUSTED_PROXIES"):
        load_settings({"DEVICECONTROL_TRUSTED_PROXIES": "proxy.internal"})


def test_purge_interval_defaults_to_an_hour_and_is_read_from_its_variable():
    assert load_settings({}).purge_interval_s == 3600
    assert load_settings({"DEVICECONTROL_PURGE_INTERVAL": " "}).purge_interval_s == 3600
    assert load_settings({"DEVICECONTROL_PURGE_INTERVAL": "60"}).purge_interval_s == 60
    assert load_settings({"DEVICECONTROL_PURGE_INTERVAL": "1"}).purge_interval_s == 1


@pytest.mark.parametrize("raw", ["0", "-5", "abc", "1.5", "60s"])
def test_purge_interval_must_be_a_positive_integer(raw):
    with pytest.raises(SettingsError, match="DEVICECONTROL_PURGE_INTERVAL"):
        load_settings({"DEVICECONTROL_PURGE_INTERVAL": raw})


def test_token_cache_defaults_to_half_a_second_and_may_be_turned_off():
    assert load_settings({}).token_cache_ms == 500
    assert load_settings({"DEVICECONTROL_TOKEN_CACHE_MS": " "}).token_cache_ms == 500
    assert load_settings({"DEVICECONTROL_TOKEN_CACHE_MS": "0"}).token_cache_ms == 0
    assert load_settings({"DEVICECONTROL_TOKEN_CACHE_MS": "1000"}).token_cache_ms == 1000


@pytest.mark.parametrize("raw", ["-1", "1001", "abc", "0.5", "500ms"])
def test_token_cache_must_stay_within_a_second(raw):
    with pytest.raises(SettingsError, match="DEVICECONTROL_TOKEN_CACHE_MS"):
        load_settings({"DEVICECONTROL_TOKEN_CACHE_MS": raw})


# --- DEVICECONTROL_MQTT_URL: the external broker (contract §9) ---------------------------------


def test_without_mqtt_url_the_embedded_broker_is_used():
    assert load_settings({}).mqtt_url is None


@pytest.mark.parametrize(
    ("raw", "tls", "host", "port", "username", "password"),
    [
        ("mqtt://svc:pw@broker.internal:1999", False, "broker.internal", 1999, "svc", "pw"),
        ("mqtt://svc:pw@broker", False, "broker", 1883, "svc", "pw"),
        ("MQTTS://svc:pw@broker", True, "broker", 8883, "svc", "pw"),
        ("mqtt://dev%40ops:p%3As%2Fw%40rd@[::1]:1884/", False, "::1", 1884, "dev@ops", "p:s/w@rd"),
    ],
)
def test_mqtt_url_names_scheme_host_port_and_the_decoded_user_and_password(
    raw, tls, host, port, username, password
):
    url = load_settings({"DEVICECONTROL_MQTT_URL": f" {raw} "}).mqtt_url
    assert url is not None
    assert (url.tls, url.host, url.port, url.username, url.password) == (
        tls, host, port, username, password
    )  # fmt: skip
    assert password not in f"{url} {url!r}"  # what logs and errors may name


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("http://u:hidden-pw@broker", "scheme"),
        ("broker:1883", "scheme"),
        ("mqtt://broker", "user and password"),
        ("mqtt://u@broker", "user and password"),
        ("mqtt://u:@broker", "user and password"),
        ("mqtt://u:hidden-pw@broker:0", "port"),
        ("mqtt://u:hidden-pw@broker:65536", "port"),
        ("mqtt://u:hidden-pw@broker:x", "port"),
        ("mqtt://u:hidden-pw@:1883", "host"),
        ("mqtt://u:hidden-pw@broker/topic", "path"),
        ("mqtt://u:hidden-pw@broker?x=1", "query"),
    ],
)
def test_a_bad_mqtt_url_is_refused_without_echoing_it(raw, problem):
    with pytest.raises(SettingsError, match="DEVICECONTROL_MQTT_URL") as refused:
        load_settings({"DEVICECONTROL_MQTT_URL": raw})
    assert problem in str(refused.value)
    assert "hidden-pw" not in str(refused.value)


def test_the_embedded_brokers_tls_files_with_mqtt_url_are_refused(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("x")
    key.write_text("x")
    environ = {
        "DEVICECONTROL_MQTT_URL": "mqtts://u:p@broker",
        "DEVICECONTROL_MQTT_TLS_CERT": str(cert),
        "DEVICECONTROL_MQTT_TLS_KEY": str(key),
    }
    with pytest.raises(SettingsError, match="DEVICECONTROL_MQTT_TLS_CERT"):
        load_settings(environ)


def test_mqtt_ca_is_a_file_for_an_mqtts_url_only(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    settings = load_settings({"DEVICECONTROL_MQTT_URL": "mqtts://u:p@broker",
                              "DEVICECONTROL_MQTT_CA": str(ca)})  # fmt: skip
    assert settings.mqtt_ca == str(ca)
    with pytest.raises(SettingsError, match="DEVICECONTROL_MQTT_CA"):
        load_settings({"DEVICECONTROL_MQTT_URL": "mqtt://u:p@broker",
                       "DEVICECONTROL_MQTT_CA": str(ca)})  # fmt: skip
    with pytest.raises(SettingsError, match="DEVICECONTROL_MQTT_CA"):
        load_settings({"DEVICECONTROL_MQTT_URL": "mqtts://u:p@broker",
                       "DEVICECONTROL_MQTT_CA": str(tmp_path / "missing.pem")})  # fmt: skip


def test_schedule_grace_and_check_default_to_ten_minutes_and_five_seconds():
    defaults = load_settings({})
    assert (defaults.schedule_grace_s, defaults.schedule_check_s) == (600, 5)
    chosen = load_settings(
        {"DEVICECONTROL_SCHEDULE_GRACE": "0", "DEVICECONTROL_SCHEDULE_CHECK": "1"}
    )
    assert (chosen.schedule_grace_s, chosen.schedule_check_s) == (0, 1)


@pytest.mark.parametrize(
    ("variable", "raw"),
    [("SCHEDULE_GRACE", "-1"), ("SCHEDULE_GRACE", "604801"), ("SCHEDULE_GRACE", "10m"),
     ("SCHEDULE_CHECK", "0"), ("SCHEDULE_CHECK", "6"), ("SCHEDULE_CHECK", "1.5")],
)  # fmt: skip
def test_a_bad_schedule_setting_is_refused_naming_it(variable, raw):
    with pytest.raises(SettingsError, match=f"DEVICECONTROL_{variable}"):
        load_settings({f"DEVICECONTROL_{variable}": raw})


HOOK_TOKEN = "a" * 31 + "-_.~Z9"


def test_the_broker_hook_is_off_by_default_and_listens_with_its_token():
    assert load_settings({}).broker_hook_listen is None
    settings = load_settings(
        {
            "DEVICECONTROL_BROKER_HOOK_LISTEN": "127.0.0.1:8883",
            "DEVICECONTROL_BROKER_HOOK_TOKEN": HOOK_TOKEN,
        }
    )
    assert (settings.broker_hook_listen, settings.broker_hook_token) == (
        "127.0.0.1:8883",
        HOOK_TOKEN,
    )
    assert HOOK_TOKEN not in repr(settings)


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({"DEVICECONTROL_BROKER_HOOK_LISTEN": "127.0.0.1:8883"}, "needs DEVICECONTROL_BROKER"),
        ({"DEVICECONTROL_BROKER_HOOK_TOKEN": "a" * 31}, "at least 32 characters"),
        ({"DEVICECONTROL_BROKER_HOOK_TOKEN": "a" * 32 + "/"}, "at least 32 characters"),
        ({"DEVICECONTROL_BROKER_HOOK_LISTEN": "8883"}, "must be HOST:PORT"),
    ],
)
def test_a_hook_without_a_usable_token_or_address_is_refused_without_echoing_it(environ, problem):
    with pytest.raises(SettingsError, match=problem) as refused:
        load_settings(environ)
    assert "a" * 31 not in str(refused.value)


def test_the_hooks_certificate_and_key_go_together(tmp_path):
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    with pytest.raises(SettingsError, match=r"BROKER_HOOK_TLS_CERT and .*go together"):
        load_settings({"DEVICECONTROL_BROKER_HOOK_TLS_CERT": str(cert)})
    with pytest.raises(SettingsError, match="no such file"):
        load_settings({"DEVICECONTROL_BROKER_HOOK_TLS_KEY": str(tmp_path / "missing.pem")})


def test_amqp_url_names_rabbitmq_for_the_link_and_excludes_mqtt_url():
    settings = load_settings({"DEVICECONTROL_AMQP_URL": "amqps://link:s%40cret@rabbit.example"})
    url = settings.amqp_url
    assert url is not None and (url.tls, url.host, url.port) == (True, "rabbit.example", 5671)
    assert (url.username, url.password) == ("link", "s@cret")
    assert str(url) == "amqps://link@rabbit.example:5671" and "s@cret" not in repr(settings)
    assert settings.link_account == url and not settings.pushes_device_accounts
    with pytest.raises(SettingsError, match="set one"):
        load_settings(
            {
                "DEVICECONTROL_AMQP_URL": "amqp://link:secret@127.0.0.1",
                "DEVICECONTROL_MQTT_URL": "mqtt://link:secret@127.0.0.1",
            }
        )
    with pytest.raises(SettingsError, match="neither amqp nor amqps") as refused:
        load_settings({"DEVICECONTROL_AMQP_URL": "mqtt://link:secret@127.0.0.1"})
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize("raw", ["1", "2/2", "-1/2", "0/0", "0/65", "a/b", "1/2/3"])
def test_a_link_shard_is_i_of_n(raw):
    assert load_settings({}).link_shard == (0, 1)
    assert load_settings({"DEVICECONTROL_LINK_SHARD": "1/2"}).link_shard == (1, 2)
    with pytest.raises(SettingsError, match="DEVICECONTROL_LINK_SHARD must be I/N"):
        load_settings({"DEVICECONTROL_LINK_SHARD": raw})


def test_the_mqtt_ca_also_checks_an_amqps_link_and_an_https_management_api(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    amqps = {"DEVICECONTROL_AMQP_URL": "amqps://link:secret@rabbit.example"}
    assert load_settings({**amqps, "DEVICECONTROL_MQTT_CA": str(ca)}).mqtt_ca == str(ca)
    plain = {"DEVICECONTROL_AMQP_URL": "amqp://link:secret@rabbit.example"}
    with pytest.raises(SettingsError, match="DEVICECONTROL_MQTT_CA is for"):
        load_settings({**plain, "DEVICECONTROL_MQTT_CA": str(ca)})
    https = {**plain, "DEVICECONTROL_RABBITMQ_MANAGEMENT_URL": "https://rabbit.example:15671"}
    assert load_settings({**https, "DEVICECONTROL_MQTT_CA": str(ca)}).mqtt_ca == str(ca)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("ftp://rabbit.example", "a scheme and a host"),
        ("http://", "a scheme and a host"),
        ("http://admin:pw@rabbit.example:15672", "no user"),
        ("http://rabbit.example:99999", "port"),
    ],
)
def test_the_rabbitmq_management_url_goes_with_the_amqp_url_and_holds_no_user(raw, why):
    amqp = {"DEVICECONTROL_AMQP_URL": "amqp://link:secret@rabbit.example"}
    url = "http://rabbit.example:15672/"
    settings = load_settings({**amqp, "DEVICECONTROL_RABBITMQ_MANAGEMENT_URL": url})
    assert settings.rabbitmq_management_url == "http://rabbit.example:15672"
    assert load_settings(amqp).rabbitmq_management_url is None
    with pytest.raises(SettingsError, match="goes with DEVICECONTROL_AMQP_URL"):
        load_settings({"DEVICECONTROL_RABBITMQ_MANAGEMENT_URL": url})
    with pytest.raises(SettingsError, match=why) as refused:
        load_settings({**amqp, "DEVICECONTROL_RABBITMQ_MANAGEMENT_URL": raw})
    assert "pw" not in str(refused.value)
