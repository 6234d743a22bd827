"""Exception types of dace-ai.

Every error a user can see derives from :class:`DaceAIError`, so a program can
catch "anything dace-ai refused" in one place. Each subclass names a concern;
the message always names the culprit (the plugin and its distribution, the
setting and its source, the answer field, the node).
"""

from __future__ import annotations

import os as _os
import re as _re
from pathlib import Path as _Path


class DaceAIError(Exception):
    """Base class of every error raised by dace-ai."""

    #: Where the full traceback was logged once the error reached the user (``"-"``: it could not be),
    #: so an error passing several expansion layers is logged once.
    trace_log: str = ""


class PluginError(DaceAIError):
    """A plugin failed to import, registered something invalid, or clashed with another."""


class SettingsError(DaceAIError, ValueError):
    """A setting has a value that is not allowed; the message names key, value and source."""


class AnswerError(DaceAIError, ValueError):
    """A model's answer could not be parsed or validated against the answer schema."""


class ProviderError(DaceAIError):
    """A provider could not answer: missing SDK or key, refusal, exhausted retries."""


class CheckFailed(DaceAIError):
    """Generated code failed its checks even after every allowed repair round.

    ``node`` and ``session`` (when known) name the node and its session folder, so a
    fallback warning can point at them.
    """

    def __init__(self, message: str, *, node: str = "", session: str = "") -> None:
        super().__init__(message)
        self.node, self.session = node, session


class DaceAIWarning(UserWarning):
    """Base class of every warning dace-ai gives: something did not go as asked but the program goes on
    (nodes without an answer, a cache not written, a check that could not decide)."""


class InconclusiveCheckWarning(DaceAIWarning):
    """An answer was accepted although a check could not decide (``on_inconclusive=warn``)."""


class NativeFallbackWarning(DaceAIWarning):
    """No answer passed its checks; the node was expanded natively (``on_failure=native``)."""


class MissingAnswer(DaceAIError):
    """The manual provider has no answer yet for a prompt; the message says where to put it.

    ``prompt_path`` and ``response_path`` name the prompt file written and the answer file
    expected (``None`` where a provider raises it without files).
    """

    def __init__(self, message: str, *, prompt_path: _Path | None = None, response_path: _Path | None = None) -> None:
        super().__init__(message)
        self.prompt_path = prompt_path
        self.response_path = response_path


class AIUsageError(DaceAIError, ValueError):
    """A ``dace_ai.ai(...)`` call or an ``AINode`` was written in a way that cannot work."""


# --------------------------------------------------------------------- secrets
_URL_USERINFO = _re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@?#]+@")
_QUERY_SECRET = _re.compile(
    r"(?P<name>[?&](?:api[-_]?key|key|token|access[-_]?token|auth|password|secret|signature|sig)=)[^&\s#'\"]+",
    _re.IGNORECASE,
)
_HEADER_SECRET = _re.compile(
    r"(?P<name>\b(?:proxy-)?authorization|\bx-api-key|\bapi-key|\bx-goog-api-key)(?P<sep>['\"]?\s*[:=]\s*['\"]?)"
    r"(?P<scheme>(?:bearer|basic|token)\s+)?[^\s'\",}]+",
    _re.IGNORECASE,
)
_SECRET_VARIABLE = _re.compile(r"(API_KEY|AUTH_TOKEN|ACCESS_TOKEN|SECRET|PASSWORD|_TOKEN|_KEY)$", _re.IGNORECASE)
_URL_VARIABLE = _re.compile(r"(BASE_URL|API_BASE|_URL|_ENDPOINT)$", _re.IGNORECASE)
_USERINFO = _re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://(?P<user>[^/\s@?#:]*)(?::(?P<password>[^/\s@?#]*))?@")
REDACTED = "***"
_known_secrets: set[str] = set()


def remember_secret(text: str | None) -> None:
    """Remember the credentials in ``text`` (a URL with user info, e.g. a configured base URL), so that
    :func:`redact` also hides them where they appear on their own (a server echoing them in an error)."""
    for match in _USERINFO.finditer(text or ""):
        for part in (match.group("password"), match.group("user")):
            if part and len(part) >= 8:
                _known_secrets.add(part)


def _secret_values() -> list[str]:
    values = set(_known_secrets)
    for name, value in _os.environ.items():
        if len(value) >= 8 and _SECRET_VARIABLE.search(name):
            values.add(value)
        elif "@" in value and _URL_VARIABLE.search(name):
            remember_secret(value)
            values |= _known_secrets
    return sorted(values, key=len, reverse=True)


def is_secret_variable(name: str, value: str) -> bool:
    """Whether environment variable ``name`` holds a credential: a key-like name, or a URL with user info."""
    if _SECRET_VARIABLE.search(name):
        return True
    return bool(_URL_VARIABLE.search(name) and _USERINFO.search(value or ""))


def redact(text: str) -> str:
    """``text`` with credentials removed: URL user info, key-like query parameters, auth headers,
    and the value of every key-like environment variable (``*_API_KEY``, ``*_TOKEN``, ...).

    Applied to everything dace-ai records or reports that could carry a secret
    (request records, error messages, logs), so a key in a base URL or in an SDK's
    error text never reaches a file or a terminal.
    """
    if not isinstance(text, str) or not text:
        return text
    remember_secret(text)
    for value in _secret_values():
        if value in text:
            text = text.replace(value, REDACTED)
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m.group('name')}{REDACTED}", text)
    text = _HEADER_SECRET.sub(lambda m: f"{m.group('name')}{m.group('sep')}{m.group('scheme') or ''}{REDACTED}", text)
    return text


class UnverifiedWarning(InconclusiveCheckWarning):
    """Generated code could not be compared with a reference (none given, or it could not run); once per program."""


class RuntimeCheckFailed(DaceAIError):
    """A run-time spot check found a generated tasklet's output wrong inside the user's own program.

    ``node`` names the node, ``session`` its session; the answer's cache entry is moved aside.
    """

    def __init__(self, message: str, *, node: str = "", session: str = "") -> None:
        super().__init__(message)
        self.node, self.session = node, session


class RuntimeCheckWarning(DaceAIWarning):
    """A run-time spot check found a wrong output (``runtime_check_action=warn``) or could not run."""


class NativeKept(CheckFailed):
    """Every candidate was slower than the native expansion under ``bench=gate``: the native one is kept."""
