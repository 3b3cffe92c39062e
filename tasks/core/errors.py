"""Exceptions whose messages name the field, the value and the rule, so a user can act on them."""

from __future__ import annotations


class ServingEvalError(Exception):
    """Base class of every error this project raises on purpose."""


class ConfigError(ServingEvalError, ValueError):
    """A run input broke a rule; raised before any work starts."""

    def __init__(self, field: str, value: object, rule: str) -> None:
        self.field, self.value, self.rule = field, value, rule
        super().__init__(f"{field}={value!r}: {rule}")


class RuntimeBuildError(ServingEvalError):
    """A runtime environment could not be built."""


class ConversionError(ServingEvalError):
    """A model could not be converted, or the artifact failed its parity check."""


class ServerStartError(ServingEvalError):
    """A server exited during start-up or did not become ready in time."""


class LoadTestError(ServingEvalError):
    """The load generator could not run a load point."""


class StoreError(ServingEvalError):
    """The result store (S3) cannot be used as configured."""
