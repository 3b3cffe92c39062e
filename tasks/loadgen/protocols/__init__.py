"""Request protocols, one codec per file. A server names its protocol; the generator looks it up here."""

from __future__ import annotations

from tasks.core.errors import ConfigError
from tasks.loadgen.protocols.base import Codec
from tasks.loadgen.protocols.bentoml_json import BentoMLJson
from tasks.loadgen.protocols.http_get import HttpGet
from tasks.loadgen.protocols.kserve_v2_grpc import KServeV2Grpc
from tasks.loadgen.protocols.kserve_v2_rest import KServeV2Rest
from tasks.loadgen.protocols.tfserving_rest import TFServingRest
from tasks.loadgen.protocols.torchserve_rest import TorchServeRest

CODECS: dict[str, type[Codec]] = {cls.name: cls for cls in (KServeV2Rest, TorchServeRest, BentoMLJson, TFServingRest,
                                                               HttpGet, KServeV2Grpc)}


def get_codec(name: str) -> type[Codec]:
    if name not in CODECS:
        raise ConfigError("protocol", name, f"must be one of {sorted(CODECS)}")
    return CODECS[name]


__all__ = ["CODECS", "Codec", "get_codec"]
