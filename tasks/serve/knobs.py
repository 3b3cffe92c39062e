"""Serving knobs: what a configuration search may change on a server, declared by each server class.

A knob sets one field of `ServingOptions` (the same meaning for every server that declares it) and names the
values a search tries. A configuration is a mapping of knob name to value; the server's defaults are the
`ServingOptions` the run would use untuned. Configurations are identified by `config_id`: "default" for the
defaults, else a short hash of the knob values that differ from them, so the same values always get the same
id, on every night and host.

A knob may matter only under another knob's value (`requires`: a batching delay does nothing while batching is
off). `canonical` sets such a knob back to its default wherever it does not matter, so that two configurations
that serve alike are one configuration, measured once, with one id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields, replace
from typing import Any

from tasks.core.errors import ConfigError
from tasks.core.results import DEFAULT_CONFIG_ID
from tasks.serve.options import ServingOptions

WITH_BATCHING = ("dynamic_batching", True)  # `Knob.requires` of the knobs that shape the batches a batcher forms


@dataclass(frozen=True)
class Knob:
    """One knob of one server: the `ServingOptions` field it sets, the values a search tries, what it means."""

    field: str
    values: tuple[Any, ...]
    label: str
    requires: tuple[str, Any] | None = None  # (knob, value): this knob changes nothing unless that one has it

    def __post_init__(self) -> None:
        if self.field not in {f.name for f in fields(ServingOptions)}:
            raise ConfigError("Knob.field", self.field, "must name a ServingOptions field")
        if not self.values:
            raise ConfigError(f"knob {self.field}: values", self.values, "must list at least one value")

    def to_dict(self) -> dict:
        return {"field": self.field, "values": [_plain(v) for v in self.values], "label": self.label,
                "requires": list(self.requires) if self.requires else None}

    def matters(self, config: dict[str, Any]) -> bool:
        """Whether this knob's value changes how the server serves in `config`."""
        return self.requires is None or config.get(self.requires[0]) == _plain(self.requires[1])


def canonical(config: dict[str, Any], knobs: tuple[Knob, ...], defaults: dict[str, Any]) -> dict[str, Any]:
    """`config` with plain (JSON) values, and every knob that does not matter in it at its default."""
    plain = {name: _plain(value) for name, value in config.items()}
    return {**plain, **{k.field: _plain(defaults[k.field]) for k in knobs
                        if k.field in plain and k.field in defaults and not k.matters(plain)}}


def knob_values(options: Any, knobs: tuple[Knob, ...]) -> dict[str, Any]:
    """The knobs' values in `options` (a ServingOptions): a configuration, JSON-ready."""
    return {k.field: _plain(getattr(options, k.field)) for k in knobs}


def apply_config(options: Any, config: dict[str, Any], knobs: tuple[Knob, ...]) -> Any:
    """`options` with the configuration's values set; a knob the server does not declare is refused."""
    declared = {k.field for k in knobs}
    for name in config:
        if name not in declared:
            raise ConfigError("config", name, f"is not a knob of this server; its knobs are {sorted(declared)}")
    return replace(options, **{k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})


def config_id(config: dict[str, Any], defaults: dict[str, Any]) -> str:
    """ "default" when `config` equals the defaults, else 8 hex digits of the values that differ."""
    changed = {k: _plain(v) for k, v in sorted(config.items()) if _plain(defaults.get(k)) != _plain(v)}
    if not changed:
        return DEFAULT_CONFIG_ID
    return hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:8]


def describe(config: dict[str, Any], defaults: dict[str, Any]) -> str:
    """The values that differ from the defaults, e.g. "instances=2, dynamic_batching=True"; "defaults"."""
    changed = [f"{k}={v}" for k, v in sorted(config.items()) if _plain(defaults.get(k)) != _plain(v)]
    return ", ".join(changed) or "defaults"


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
