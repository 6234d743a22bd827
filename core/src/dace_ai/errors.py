"""Exception types of dace-ai.

Every error a user can see derives from :class:`DaceAIError`, so a program can
catch "anything dace-ai refused" in one place. Each subclass names a concern;
the message always names the culprit (the plugin and its distribution, the
setting and its source, the answer field, the node).
"""

from __future__ import annotations


class DaceAIError(Exception):
    """Base class of every error raised by dace-ai."""


class PluginError(DaceAIError):
    """A plugin failed to import, registered something invalid, or clashed with another."""


class SettingsError(DaceAIError, ValueError):
    """A setting has a value that is not allowed; the message names key, value and source."""


class AnswerError(DaceAIError, ValueError):
    """A model's answer could not be parsed or validated against the answer schema."""


class ProviderError(DaceAIError):
    """A provider could not answer: missing SDK or key, refusal, exhausted retries."""


class CheckFailed(DaceAIError):
    """Generated code failed its checks even after every allowed repair round."""


class MissingAnswer(DaceAIError):
    """The manual provider has no answer yet for a prompt; the message says where to put it."""


class AIUsageError(DaceAIError, ValueError):
    """A ``dace_ai.ai(...)`` call or an ``AINode`` was written in a way that cannot work."""


class NativeKept(CheckFailed):
    """Every candidate was slower than the native expansion under ``bench=gate``: the native one is kept."""


class UnverifiedWarning(UserWarning):
    """Generated code could not be compared with a reference (none given, or it could not run)."""
