"""Request protocols, one codec per file. A server names its codec per wire (`Server.wires`); the generator looks
it up here."""

from __future__ import annotations

from tasks.core.errors import ConfigError
from tasks.loadgen.protocols.base import Codec
from tasks.loadgen.protocols.bentoml_json import BentoMLJson
from tasks.loadgen.protocols.http_get import HttpGet
from tasks.loadgen.protocols.kserve_v2_binary import KServeV2Binary
from tasks.loadgen.protocols.kserve_v2_grpc import KServeV2Grpc
from tasks.loadgen.protocols.kserve_v2_rest import KServeV2Rest
from tasks.loadgen.protocols.tfserving_grpc import TFServingGrpc
from tasks.loadgen.protocols.tfserving_rest import TFServingRest
from tasks.loadgen.protocols.torchserve_grpc import TorchServeGrpc
from tasks.loadgen.protocols.torchserve_raw import TorchServeRaw
from tasks.loadgen.protocols.torchserve_rest import TorchServeRest

CODECS: dict[str, type[Codec]] = {cls.name: cls for cls in (
    KServeV2Rest, KServeV2Binary, KServeV2Grpc, TorchServeRest, TorchServeRaw, TorchServeGrpc, BentoMLJson,
    TFServingRest, TFServingGrpc, HttpGet)}


def get_codec(name: str) -> type[Codec]:
    if name not in CODECS:
        raise ConfigError("protocol", name, f"must be one of {sorted(CODECS)}")
    return CODECS[name]


__all__ = ["CODECS", "Codec", "get_codec"]
