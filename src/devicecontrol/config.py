"""One settings object, read once from DEVICECONTROL_* environment variables."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import unquote, urlsplit

# the longest a revoked token may still work on another process (docs/SECURITY.md)
MAX_TOKEN_CACHE_MS = 1000
DEFAULT_DATABASE_URL = "sqlite:///./devicecontrol.db"
DEFAULT_MQTT_LISTEN = "127.0.0.1:1884"
# DEVICECONTROL_MQTT_URL: the external broker's schemes and their default ports
MQTT_URL_PORTS = {"mqtt": 1883, "mqtts": 8883}
# DEVICECONTROL_AMQP_URL: RabbitMQ, which the link then reads over AMQP
AMQP_URL_PORTS = {"amqp": 5672, "amqps": 5671}
MIN_HOOK_TOKEN = 32
MAX_LINK_SHARDS = 64
HOOK_TOKEN_CHARACTERS = re.compile(r"[A-Za-z0-9._~-]+")
MAX_COMMAND_TTL_S = 86400
# a device's packets: room for a 4 KiB payload and its topic, up to MQTT's own maximum
MIN_MQTT_PACKET = 4352
MAX_MQTT_PACKET = 268435455
MAX_SEND_WAIT_MS = 30000
MAX_SCHEDULE_GRACE_S = 7 * 86400  # a week: past it every firing comes round again anyway
ENV_PREFIX = "DEVICECONTROL_"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
# json: one JSON object per line, for log collectors; text: key=value lines, for people
LOG_FORMATS = ("json", "text")
# argon2id's parameters: the library's recommended ones, or the lowest it accepts, which
# only a test suite may use (its servers and CLI runs would otherwise spend most of their
# time hashing); a process that runs with the latter says so in its log at start-up
PASSWORD_HASHING = ("standard", "test-only-minimal")


class SettingsError(ValueError):
    """A configuration value that cannot be used; the message names the variable."""


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class ThrottleRule:
    """At most ``limit`` failures within ``window_s`` seconds; then 429 until one ages out."""

    limit: int
    window_s: int


@dataclass(frozen=True, slots=True)
class MqttUrl:
    """An external broker (``DEVICECONTROL_MQTT_URL``): the device link is its client.

    The password never shows in ``repr`` or ``str``: both are the URL without it, which is
    what logs and error messages name.
    """

    tls: bool
    host: str
    port: int
    username: str
    password: str = field(repr=False)
    protocol: str = "mqtt"  # or "amqp" (``DEVICECONTROL_AMQP_URL``)

    def __str__(self) -> str:
        scheme = self.protocol + ("s" if self.tls else "")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{self.username}@{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    access_token_ttl: int = 86400
    refresh_token_ttl: int = 2592000
    default_page_size: int = 100
    max_page_size: int = 500
    log_level: str = "info"
    log_format: str = "json"
    throttle_login_per_username: ThrottleRule = ThrottleRule(5, 900)
    throttle_login_per_address: ThrottleRule = ThrottleRule(20, 60)
    throttle_claim_per_controller: ThrottleRule = ThrottleRule(5, 900)
    throttle_claim_per_user: ThrottleRule = ThrottleRule(10, 900)
    # failed client authentication (unknown client id or wrong secret): published apps carry
    # short secrets, so these are guessable without a throttle; a client id is shared by all
    # of an app's users, hence a limit high enough that one address alone cannot lock it out
    throttle_client_per_id: ThrottleRule = ThrottleRule(30, 60)
    throttle_client_per_address: ThrottleRule = ThrottleRule(20, 60)
    # the device link (contract §9): failed device connects, per serial and per address
    throttle_device_per_serial: ThrottleRule = ThrottleRule(10, 60)
    throttle_device_per_address: ThrottleRule = ThrottleRule(30, 60)
    # messages a device may send per window before the rest are dropped (ordinary bursts pass)
    device_message_rate: ThrottleRule = ThrottleRule(20, 1)
    # host:port of the embedded broker; not 1883, which a system broker may already hold
    mqtt_listen: str = DEFAULT_MQTT_LISTEN
    # contract §9 Limits: the largest packet a device may send (refused from its fixed
    # header), and the keep-alive a device gets when it asks for none or for more
    mqtt_max_packet: int = 16384
    mqtt_max_keepalive_s: int = 300
    mqtt_tls_cert: str | None = None
    mqtt_tls_key: str | None = None
    # an external broker instead of the embedded one (contract §9), and the CA file that
    # checks its certificate (mqtts; the system's store when None)
    mqtt_url: MqttUrl | None = None
    mqtt_ca: str | None = None
    # RabbitMQ instead (its MQTT plugin for the devices): the link reads and publishes over
    # AMQP; the devices' identity is the broker hook's
    amqp_url: MqttUrl | None = None
    # this link's share of the devices' messages on RabbitMQ or Mosquitto: shard i of n (0 of
    # 1: all of them); shard 0 also follows who is connected, delivers commands and keeps the
    # upkeep
    link_shard: tuple[int, int] = (0, 1)
    # RabbitMQ's management API (http[s]://HOST:PORT): how the link closes a device's
    # connection made with a secret since rotated; it logs in as the AMQP URL's user
    rabbitmq_management_url: str | None = None
    # the broker hook (contract §9, brokers that ask the service): its own listener, off by
    # default, and the token its broker presents
    broker_hook_listen: str | None = None
    broker_hook_token: str | None = field(default=None, repr=False)
    broker_hook_tls_cert: str | None = None
    broker_hook_tls_key: str | None = None
    command_ttl_s: int = 300
    send_wait_ms: int = 3000
    # commands are pushed (notifications.py); this slow sweep finds what a lost
    # announcement would have missed
    command_sweep_s: int = 5
    reading_retention_days: int = 30
    trusted_proxies: tuple[IPNetwork, ...] = ()
    purge_interval_s: int = 3600
    # schedules (contract §12): how late a firing missed while no process ran may still
    # fire at start-up, and how often each process looks for schedules others wrote
    schedule_grace_s: int = 600
    schedule_check_s: int = 5
    token_cache_ms: int = 500
    password_hashing: str = PASSWORD_HASHING[0]  # "standard"
    # no variable sets it: every serve has the web app. The API's in-process tests build an
    # app per test, and Litestar registering the web app's routes doubled that cost
    web_app: bool = True

    @property
    def link_account(self) -> MqttUrl | None:
        """The external broker's URL whose user and password are the link's own."""
        return self.amqp_url or self.mqtt_url

    @property
    def pushes_device_accounts(self) -> bool:
        """Whether provisioning sends each device's account to the external broker
        (Mosquitto's dynamic security); a broker that asks the hook needs none."""
        return self.mqtt_url is not None and self.broker_hook_listen is None

    def with_database_url(self, url: str | None) -> Settings:
        """The same settings on another database (the CLI's --database-url)."""
        return self if not url else replace(self, database_url=url)


def _positive_int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(ENV_PREFIX + name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{ENV_PREFIX}{name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise SettingsError(f"{ENV_PREFIX}{name} must be at least 1, got {value}")
    return value


def _milliseconds(environ: Mapping[str, str], name: str, default: int, *, maximum: int) -> int:
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{ENV_PREFIX}{name} must be an integer, got {raw!r}") from None
    if not 0 <= value <= maximum:
        raise SettingsError(f"{ENV_PREFIX}{name} must be 0 to {maximum} (ms), got {value}")
    return value


def _throttle_rule(environ: Mapping[str, str], name: str, default: ThrottleRule) -> ThrottleRule:
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return default
    limit, _, window = raw.partition("/")
    try:
        rule = ThrottleRule(int(limit), int(window))
    except ValueError:
        raise SettingsError(
            f"{ENV_PREFIX}{name} must be COUNT/SECONDS such as 5/900, got {raw!r}"
        ) from None
    if rule.limit < 1 or rule.window_s < 1:
        raise SettingsError(f"{ENV_PREFIX}{name} needs a count and seconds of at least 1")
    return rule


def _networks(environ: Mapping[str, str], name: str) -> tuple[IPNetwork, ...]:
    raw = environ.get(ENV_PREFIX + name, "")
    try:
        return tuple(
            ipaddress.ip_network(part.strip(), strict=False)
            for part in raw.split(",")
            if part.strip()
        )
    except ValueError as exc:
        raise SettingsError(f"{ENV_PREFIX}{name}: {exc}") from None


def _listen_address(environ: Mapping[str, str], name: str, default: str) -> str:
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return default
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise SettingsError(
            f"{ENV_PREFIX}{name} must be HOST:PORT such as 0.0.0.0:1884, got {raw!r}"
        )
    return raw


def _bounded_int(
    environ: Mapping[str, str], name: str, default: int, *, low: int, high: int
) -> int:
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{ENV_PREFIX}{name} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise SettingsError(f"{ENV_PREFIX}{name} must be {low} to {high}, got {value}")
    return value


def _tls_file(environ: Mapping[str, str], name: str) -> str | None:
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if raw and not os.path.isfile(raw):
        raise SettingsError(f"{ENV_PREFIX}{name}: no such file {raw!r}")
    return raw or None


def _shard(environ: Mapping[str, str], name: str) -> tuple[int, int]:
    """I/N: this link process's shard of N (0 <= I < N <= MAX_LINK_SHARDS)."""
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return (0, 1)
    index, slash, count = raw.partition("/")
    if (
        not slash
        or not index.isdigit()
        or not count.isdigit()
        or not 0 <= int(index) < int(count) <= MAX_LINK_SHARDS
    ):
        raise SettingsError(
            f"{ENV_PREFIX}{name} must be I/N, this link's shard of N (0 <= I < N <= "
            f"{MAX_LINK_SHARDS}), got {raw!r}"
        )
    return (int(index), int(count))


def _management_url(environ: Mapping[str, str], name: str) -> str | None:
    """http[s]://HOST[:PORT][/PREFIX], without credentials (the AMQP URL's are used)."""
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return None
    shape = f"{ENV_PREFIX}{name} must be http://HOST[:PORT] or https://..."
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise SettingsError(f"{shape} (the port is not a number from 1 to 65535)") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{shape} (a scheme and a host)")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise SettingsError(
            f"{shape} (no user, query or fragment: the user is {ENV_PREFIX}AMQP_URL's)"
        )
    return raw.rstrip("/")


def _hook_token(environ: Mapping[str, str], name: str) -> str | None:
    """At least 32 of the characters a URL path keeps as they are: RabbitMQ's HTTP backend
    sends it as the first segment of the hook's paths."""
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return None
    if len(raw) < MIN_HOOK_TOKEN or not HOOK_TOKEN_CHARACTERS.fullmatch(raw):
        raise SettingsError(
            f"{ENV_PREFIX}{name} must be at least {MIN_HOOK_TOKEN} characters of A-Z, a-z, "
            "0-9, '-', '_', '.' and '~' (python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))' makes one)"
        )
    return raw


def _mqtt_url(
    environ: Mapping[str, str], name: str, ports: Mapping[str, int] = MQTT_URL_PORTS
) -> MqttUrl | None:
    """mqtt://user:pass@host[:port] or mqtts://... (amqp:// or amqps:// for ``ports``
    AMQP_URL_PORTS); user and password URL-decoded.

    A bad value is reported without echoing it: it may hold the broker's password.
    """
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return None
    plain, secure = ports
    shape = f"{ENV_PREFIX}{name} must be {plain}://USER:PASSWORD@HOST[:PORT] or {secure}://..."
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError:
        raise SettingsError(f"{shape} (the port is not a number from 1 to 65535)") from None
    scheme = parts.scheme.lower()
    if scheme not in ports:
        raise SettingsError(f"{shape} (the scheme is neither {plain} nor {secure})")
    if not parts.hostname:
        raise SettingsError(f"{shape} (no host)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise SettingsError(f"{shape} (no path, query or fragment)")
    if not parts.username or not parts.password:
        raise SettingsError(f"{shape} (the broker user and password are needed)")
    if port == 0:
        raise SettingsError(f"{shape} (the port is not a number from 1 to 65535)")
    return MqttUrl(
        tls=scheme == secure,
        host=parts.hostname,
        port=port or ports[scheme],
        username=unquote(parts.username),
        password=unquote(parts.password),
        protocol=plain,
    )


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and check every DEVICECONTROL_* variable; raise SettingsError on a bad one."""
    env = os.environ if environ is None else environ
    defaults = Settings()
    log_level = env.get(ENV_PREFIX + "LOG_LEVEL", "info").strip().lower() or "info"
    if log_level not in LOG_LEVELS:
        raise SettingsError(f"{ENV_PREFIX}LOG_LEVEL must be a log level name, got {log_level!r}")
    log_format = env.get(ENV_PREFIX + "LOG_FORMAT", "json").strip().lower() or "json"
    if log_format not in LOG_FORMATS:
        raise SettingsError(f"{ENV_PREFIX}LOG_FORMAT must be json or text, got {log_format!r}")
    password_hashing = env.get(ENV_PREFIX + "PASSWORD_HASHING", "").strip() or "standard"
    if password_hashing not in PASSWORD_HASHING:
        raise SettingsError(
            f"{ENV_PREFIX}PASSWORD_HASHING must be one of {', '.join(PASSWORD_HASHING)}, "
            f"got {password_hashing!r}"
        )
    settings = Settings(
        database_url=env.get(ENV_PREFIX + "DATABASE_URL", "").strip() or DEFAULT_DATABASE_URL,
        access_token_ttl=_positive_int(env, "ACCESS_TOKEN_TTL", defaults.access_token_ttl),
        refresh_token_ttl=_positive_int(env, "REFRESH_TOKEN_TTL", defaults.refresh_token_ttl),
        default_page_size=_positive_int(env, "DEFAULT_PAGE_SIZE", defaults.default_page_size),
        max_page_size=_positive_int(env, "MAX_PAGE_SIZE", defaults.max_page_size),
        log_level=log_level,
        log_format=log_format,
        throttle_login_per_username=_throttle_rule(
            env, "THROTTLE_LOGIN_PER_USERNAME", defaults.throttle_login_per_username
        ),
        throttle_login_per_address=_throttle_rule(
            env, "THROTTLE_LOGIN_PER_ADDRESS", defaults.throttle_login_per_address
        ),
        throttle_claim_per_controller=_throttle_rule(
            env, "THROTTLE_CLAIM_PER_CONTROLLER", defaults.throttle_claim_per_controller
        ),
        throttle_claim_per_user=_throttle_rule(
            env, "THROTTLE_CLAIM_PER_USER", defaults.throttle_claim_per_user
        ),
        throttle_client_per_id=_throttle_rule(
            env, "THROTTLE_CLIENT_PER_ID", defaults.throttle_client_per_id
        ),
        throttle_client_per_address=_throttle_rule(
            env, "THROTTLE_CLIENT_PER_ADDRESS", defaults.throttle_client_per_address
        ),
        throttle_device_per_serial=_throttle_rule(
            env, "THROTTLE_DEVICE_PER_SERIAL", defaults.throttle_device_per_serial
        ),
        throttle_device_per_address=_throttle_rule(
            env, "THROTTLE_DEVICE_PER_ADDRESS", defaults.throttle_device_per_address
        ),
        device_message_rate=_throttle_rule(
            env, "DEVICE_MESSAGE_RATE", defaults.device_message_rate
        ),
        mqtt_listen=_listen_address(env, "MQTT_LISTEN", defaults.mqtt_listen),
        mqtt_max_packet=_bounded_int(
            env,
            "MQTT_MAX_PACKET",
            defaults.mqtt_max_packet,
            low=MIN_MQTT_PACKET,
            high=MAX_MQTT_PACKET,
        ),
        mqtt_max_keepalive_s=_bounded_int(
            env, "MQTT_MAX_KEEPALIVE", defaults.mqtt_max_keepalive_s, low=1, high=65535
        ),
        mqtt_tls_cert=_tls_file(env, "MQTT_TLS_CERT"),
        mqtt_tls_key=_tls_file(env, "MQTT_TLS_KEY"),
        mqtt_url=_mqtt_url(env, "MQTT_URL"),
        mqtt_ca=_tls_file(env, "MQTT_CA"),
        amqp_url=_mqtt_url(env, "AMQP_URL", AMQP_URL_PORTS),
        link_shard=_shard(env, "LINK_SHARD"),
        rabbitmq_management_url=_management_url(env, "RABBITMQ_MANAGEMENT_URL"),
        broker_hook_listen=_listen_address(env, "BROKER_HOOK_LISTEN", "") or None,
        broker_hook_token=_hook_token(env, "BROKER_HOOK_TOKEN"),
        broker_hook_tls_cert=_tls_file(env, "BROKER_HOOK_TLS_CERT"),
        broker_hook_tls_key=_tls_file(env, "BROKER_HOOK_TLS_KEY"),
        command_ttl_s=_bounded_int(
            env, "COMMAND_TTL", defaults.command_ttl_s, low=1, high=MAX_COMMAND_TTL_S
        ),
        send_wait_ms=_bounded_int(
            env, "SEND_WAIT_MS", defaults.send_wait_ms, low=0, high=MAX_SEND_WAIT_MS
        ),
        command_sweep_s=_bounded_int(
            env, "COMMAND_SWEEP", defaults.command_sweep_s, low=1, high=3600
        ),
        reading_retention_days=_positive_int(
            env, "READING_RETENTION", defaults.reading_retention_days
        ),
        trusted_proxies=_networks(env, "TRUSTED_PROXIES"),
        purge_interval_s=_positive_int(env, "PURGE_INTERVAL", defaults.purge_interval_s),
        schedule_grace_s=_bounded_int(
            env, "SCHEDULE_GRACE", defaults.schedule_grace_s, low=0, high=MAX_SCHEDULE_GRACE_S
        ),
        schedule_check_s=_bounded_int(
            env, "SCHEDULE_CHECK", defaults.schedule_check_s, low=1, high=5
        ),
        # the promise a revoked token keeps on other processes: see auth/token_cache.py
        token_cache_ms=_milliseconds(
            env, "TOKEN_CACHE_MS", defaults.token_cache_ms, maximum=MAX_TOKEN_CACHE_MS
        ),
        password_hashing=password_hashing,
    )
    if bool(settings.mqtt_tls_cert) != bool(settings.mqtt_tls_key):
        raise SettingsError(
            f"{ENV_PREFIX}MQTT_TLS_CERT and {ENV_PREFIX}MQTT_TLS_KEY go together: set both or none"
        )
    if settings.mqtt_url is not None and settings.mqtt_tls_cert:
        raise SettingsError(
            f"{ENV_PREFIX}MQTT_TLS_CERT and _KEY are the embedded broker's; with "
            f"{ENV_PREFIX}MQTT_URL the external broker holds the devices' TLS: unset them"
        )
    link_broker = settings.link_account
    secure_management = (settings.rabbitmq_management_url or "").lower().startswith("https:")
    if settings.mqtt_ca and not (
        (link_broker is not None and link_broker.tls) or secure_management
    ):
        raise SettingsError(
            f"{ENV_PREFIX}MQTT_CA is for an mqtts:// {ENV_PREFIX}MQTT_URL, an amqps:// "
            f"{ENV_PREFIX}AMQP_URL or an https:// {ENV_PREFIX}RABBITMQ_MANAGEMENT_URL only"
        )
    if settings.rabbitmq_management_url and settings.amqp_url is None:
        raise SettingsError(
            f"{ENV_PREFIX}RABBITMQ_MANAGEMENT_URL goes with {ENV_PREFIX}AMQP_URL, whose user "
            "it logs in as"
        )
    if bool(settings.broker_hook_tls_cert) != bool(settings.broker_hook_tls_key):
        raise SettingsError(
            f"{ENV_PREFIX}BROKER_HOOK_TLS_CERT and {ENV_PREFIX}BROKER_HOOK_TLS_KEY go "
            "together: set both or none"
        )
    if settings.amqp_url is not None and settings.mqtt_url is not None:
        raise SettingsError(
            f"{ENV_PREFIX}AMQP_URL and {ENV_PREFIX}MQTT_URL name the link's broker: set one"
        )
    if settings.broker_hook_listen and not settings.broker_hook_token:
        raise SettingsError(
            f"{ENV_PREFIX}BROKER_HOOK_LISTEN needs {ENV_PREFIX}BROKER_HOOK_TOKEN: the token "
            "its broker presents"
        )
    if settings.default_page_size > settings.max_page_size:
        raise SettingsError(
            f"{ENV_PREFIX}DEFAULT_PAGE_SIZE ({settings.default_page_size}) must not exceed "
            f"{ENV_PREFIX}MAX_PAGE_SIZE ({settings.max_page_size})"
        )
    return settings
