"""Secrets that reach accelbench (a database password, a server's API key, a password in a
Prometheus or server URL) and their removal from whatever it stores, prints or writes.

A shared results database is read by a whole site, so nothing secret may reach a record: the
command line (`argv`), a spec's URLs, the captured environment variables and the user's tags are
cleaned before a result is stored or exported (`clean_record`), and every message the CLI shows
or logs goes through `scrub`. A URL's password is found as libpq finds it (its user-info ends at
the first `@` before any `/`), and where psycopg is installed, by libpq itself.
"""

from __future__ import annotations

import json
import logging
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

MASK = "***"

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
"""A URL inside free text (a message, a command line argument)."""

_SECRET_PARAMS = frozenset(
    {"password", "passwd", "sslpassword", "token", "access_token", "api_key", "apikey", "secret"}
)
"""Query parameters whose values are secrets (libpq's password and sslpassword among them)."""

_SECRET_WORDS = frozenset(
    {"PASSWORD", "PASSWD", "PASS", "SECRET", "TOKEN", "APIKEY", "CREDENTIAL", "CREDENTIALS"}
    | {"AUTH", "AUTHORIZATION", "BEARER", "PRIVATE"}
)
"""Words of a variable's or label's name that say its value is a secret (HF_TOKEN,
NCCL_..._PASSWORD); KEY too, after another word (TORCH_API_KEY, AWS_SECRET_ACCESS_KEY)."""
_PARAM = re.compile(r"[?&]([^=&#?]+)=([^&#\s]*)")
"""A query parameter of a URL: its name and value."""
_known: set[str] = set()
"""Secrets this process was handed (an API key read from its variable): scrubbed wherever they
appear, whatever the text around them."""


def remember(secret: str | None) -> None:
    """Scrub `secret` from every message this process shows from now on."""
    if secret and len(secret) >= 4:  # shorter would mask ordinary words
        _known.add(secret)


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a variable or label named `name` holds a secret, by the words of its name (each
    stored result asks of the same few dozen names: kept)."""
    words = [word for word in re.split(r"[^A-Za-z]+", name.upper()) if word]
    return any(word in _SECRET_WORDS for word in words) or "KEY" in words[1:]


def _userinfo_end(rest: str) -> int | None:
    """Where the user-info of a URL's part after :// ends (its '@'), if it has a password: the
    last '@' before the path, so that one in a password is the password's (libpq ends it at the
    first, which lies within)."""
    at = rest.rfind("@", 0, rest.find("/") if "/" in rest else len(rest))
    return at if at > 0 and ":" in rest[:at] else None


def url_secrets(url: str) -> set[str]:
    """The secrets a URL carries, as written and percent-decoded: the user-info's password, as
    libpq and RFC 3986 each end it, and the values of password-like query parameters."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return set()
    found: set[str] = set()
    if (at := _userinfo_end(rest)) is not None:
        password = rest[:at].split(":", 1)[1]
        # a URL parser's reading, and libpq's, whose password ends at the first '@' and whose
        # host then begins with the rest (which its error messages show)
        found |= {password, *password.split("@")}
    for key, value in _PARAM.findall(rest):
        if key.lower() in _SECRET_PARAMS:
            found.add(value)
    found |= _libpq_password(url) if scheme.startswith("postgres") else set()
    return {s for secret in found for s in (secret, unquote(secret)) if s}


def _libpq_password(url: str) -> set[str]:
    """The password as libpq itself parses the URL, where psycopg is installed."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return set()
    try:
        password = conninfo_to_dict(url).get("password")
    except Exception:  # a URL libpq cannot parse holds no password it would send
        return set()
    return {str(password)} if password else set()


def has_secret(url: str) -> bool:
    return bool(url_secrets(url))


def redact_url(url: str) -> str:
    """The URL with its password and password-like parameters as ***, fit to print or store;
    everything else as written."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    if (at := _userinfo_end(rest)) is not None:
        rest = f"{rest[: rest.index(':') + 1]}{MASK}{rest[at:]}"

    def masked(m: re.Match[str]) -> str:
        secret = m.group(1).lower() in _SECRET_PARAMS
        return f"{m.group(0)[0]}{m.group(1)}={MASK}" if secret else m.group(0)

    return f"{scheme}://{_PARAM.sub(masked, rest)}"


def scrub(text: str) -> str:
    """`text` with every URL's secrets and every remembered secret as ***."""
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    for secret in sorted(_known, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def scrub_argv(argv: list[str]) -> list[str]:
    """A command line fit to store: each argument scrubbed, and the value of an option or a
    KEY=VALUE named like a secret (--password X, --token=X, --tag api_token=X) masked."""
    out: list[str] = []
    for arg in argv:
        option, eq, _ = arg.partition("=")
        if out and out[-1].startswith("--") and "=" not in out[-1] and is_secret_name(out[-1]):
            out.append(MASK)
        elif eq and is_secret_name(option):  # --token=X, or a --tag or --model-arg token=X
            out.append(f"{option}={MASK}")
        else:
            out.append(scrub(arg))
    return out


def clean_record(record: dict[str, Any]) -> dict[str, Any]:
    """A result's JSON (as `Result.model_dump(mode="json")` gives it, of any version) with no
    secret left: the command line, every string's URLs, and the values of environment
    variables and tags named like secrets."""
    record = _scrubbed(record)
    if isinstance(argv := record.get("argv"), list):
        record["argv"] = scrub_argv([str(a) for a in argv])
    env = record.get("env")
    if isinstance(env, dict) and isinstance(env.get("env_vars"), dict):
        env["env_vars"] = masked(env["env_vars"])
    if isinstance(record.get("tags"), dict):
        record["tags"] = masked(record["tags"])
    return record


def masked(mapping: dict[str, Any]) -> dict[str, Any]:
    """The mapping (environment variables, tags) with the values of names like a secret's
    masked."""
    return {k: MASK if is_secret_name(str(k)) else v for k, v in mapping.items()}


def _scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def named(argv: list[str] | None, *mappings: dict[str, str]) -> bool:
    """Whether a command line or a mapping (environment variables, tags) holds something that
    clean_record masks by its name: a record with none, no URL and no remembered secret is
    stored as its text is, unparsed (parsing and walking one takes 0.2 to 4 ms)."""
    return (argv is not None and scrub_argv(argv) != argv) or any(
        is_secret_name(name) for mapping in mappings for name in mapping
    )


def clean_json(text: str, indent: int | None = None, *, by_name: bool = True) -> str:
    """A result's JSON text as `clean_record` leaves it; the same text where nothing was secret.
    `by_name`: False where `named` found nothing to mask by name."""
    if not by_name and "://" not in text and not any(secret in text for secret in _known):
        return text
    record = json.loads(text)
    cleaned = clean_record(json.loads(text)) if isinstance(record, dict) else record
    if cleaned == record:
        return text
    return json.dumps(cleaned, indent=indent, separators=None if indent else (",", ":"))


def scrubbing_filter(record: logging.LogRecord) -> bool:
    """A logging filter that scrubs each message (its arguments merged in) before it is shown."""
    message = record.getMessage()
    if (clean := scrub(message)) != message:
        record.msg, record.args = clean, None
    return True


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read (0600), from the moment it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file of that name keeps its mode otherwise
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
