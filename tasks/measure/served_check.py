"""The served-output check: before any load, the live server computes the model's seeded parity inputs and its
answers are compared with the reference outputs the artifact carries (`reference.npz`, made by the converter
from the source model), with the artifact's own tolerances. It speaks the cell's own wire: the codec the load
will use, on its port (REST JSON, binary tensors over REST, or one gRPC call), so a wire that decodes or encodes
the tensors wrongly fails its own cells before any load.

A server that answers with the right shapes but wrong values (a wrong artifact, a broken handler, a bad
dtype cast) would otherwise pass every load point; here it fails its cells. The one number reported is the
worst |served - reference| / (atol + rtol * |reference|) over every output and batch size: <= 1 passes.
"""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass
from pathlib import Path

from tasks.convert import Artifact
from tasks.convert.parity import REFERENCE_FILE, compare, load_reference
from tasks.core.spec import ModelSpec, make_inputs
from tasks.loadgen.protocols import Codec, get_codec
from tasks.serve.base import Endpoint
from tasks.validate.outcome import SERVED_RATIO_LIMIT

REQUEST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ServedCheck:
    err_ratio: float  # worst |a - b| / (atol + rtol * |b|); inf when an answer was missing or malformed
    passed: bool
    batch_sizes: tuple[int, ...]
    reference: str  # what the reference outputs are (e.g. "torch eager, fp32")
    detail: str  # where the worst ratio was, or why no answer could be compared
    protocol: str = ""  # the codec the check spoke
    first_correct_at: float | None = None  # time.monotonic() when the first answer within tolerance came back

    def to_dict(self) -> dict:
        return {"err_ratio": self.err_ratio, "passed": self.passed, "batch_sizes": list(self.batch_sizes),
                "reference": self.reference, "detail": self.detail, "protocol": self.protocol}


def reference_dir(artifact: Artifact) -> Path:
    """The artifact's folder (its file, or SavedModel folder, lies in it with reference.npz)."""
    return Path(artifact.path).parent


def post_raw(host: str, port: int, raw: bytes, timeout_s: float = REQUEST_TIMEOUT_S) -> tuple[int, bytes]:
    """Send one pre-encoded HTTP/1.1 request (a codec's `request_bytes`); (status, body)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    headers.pop("Host", None)
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def call_grpc(host: str, port: int, method: str, request: bytes, timeout_s: float = REQUEST_TIMEOUT_S) -> bytes:
    """One unary call with a pre-encoded message (a gRPC codec's `request_bytes`); the reply's bytes."""
    import grpc

    options = (("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1))
    with grpc.insecure_channel(f"{host}:{port}", options=options) as channel:
        return channel.unary_unary(method)(request, timeout=timeout_s)


def exchange(codec: Codec, endpoint: Endpoint) -> tuple[int, bytes]:
    """(status, body) of one request in `codec`'s wire: an HTTP status, or 200 for a gRPC call that returned
    (a gRPC error status raises grpc.RpcError)."""
    if codec.transport == "grpc":
        return 200, call_grpc(endpoint.host, endpoint.port, codec.grpc_method, codec.request_bytes())
    return post_raw(endpoint.host, endpoint.port, codec.request_bytes())


def check_served_outputs(protocol: str, endpoint: Endpoint, spec: ModelSpec, artifact: Artifact,
                         max_batch_size: int) -> ServedCheck:
    """Send the parity inputs of every parity batch size the server accepts (<= `max_batch_size`, at least 1)
    over `protocol` (a codec of the server's; `endpoint` where it is spoken) and compare the answers with the
    artifact's reference."""
    directory = reference_dir(artifact)
    atol = float(artifact.record.get("atol", spec.parity_atol))
    rtol = float(artifact.record.get("rtol", spec.parity_rtol))
    described = str(artifact.record.get("reference", "the source model"))
    if not (directory / REFERENCE_FILE).is_file():
        return ServedCheck(float("inf"), False, (), described, f"the artifact has no {REFERENCE_FILE} to compare with",
                           protocol)
    reference = load_reference(directory, spec)
    sizes = tuple(b for b in spec.parity_batch_sizes if b <= max_batch_size) or (1,)
    names = [t.name for t in spec.outputs]
    worst, where = 0.0, ""
    first_correct_at = None
    codec_cls = get_codec(protocol)
    dtypes = {t.name: t.dtype for t in spec.outputs}

    def failed(detail: str) -> ServedCheck:
        return ServedCheck(float("inf"), False, sizes, described, detail, protocol)

    for batch_size in sizes:
        shapes = {t.name: (batch_size, *t.shape[1:]) for t in spec.outputs}
        codec = codec_cls(endpoint.host, endpoint.port, endpoint.model_name, make_inputs(spec, batch_size), shapes,
                          dtypes)
        try:
            status, body = exchange(codec, endpoint)
            answered_at = time.monotonic()
        except OSError as exc:
            return failed(f"batch {batch_size}: no answer ({exc})")
        except Exception as exc:  # noqa: BLE001 - grpc.RpcError: the call's status and details are the reason
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            return failed(f"batch {batch_size}: gRPC {getattr(code, 'name', code)}: {str(details)[:300]}")
        if status != 200:
            return failed(f"batch {batch_size}: HTTP {status}: {body[:300].decode(errors='replace')}")
        try:
            decoded = codec.decode(body)
            served = [decoded[name] for name in names]
        except Exception as exc:  # noqa: BLE001 - KeyError/ValueError/TypeError, protobuf's DecodeError: unreadable
            return failed(f"batch {batch_size}: the answer lacks outputs {names} or cannot be read "
                          f"({type(exc).__name__}: {exc})")
        result = compare(spec, batch_size, reference[batch_size], served, atol, rtol)
        if not result["shapes_match"]:
            return failed(f"batch {batch_size}: output shapes {result['shapes']['actual']} differ from the "
                          f"reference's {result['shapes']['reference']}")
        if first_correct_at is None and result["max_err_ratio"] <= SERVED_RATIO_LIMIT:
            first_correct_at = answered_at
        if result["max_err_ratio"] >= worst:
            worst = result["max_err_ratio"]
            where = (f"batch {batch_size}: max |a-b| {result['max_abs_err']:.3g} (atol {atol:g}, rtol {rtol:g}), "
                     f"worst |a-b|/(atol+rtol*|b|) {worst:.3g}")
    return ServedCheck(worst, worst <= SERVED_RATIO_LIMIT, sizes, described, where, protocol, first_correct_at)
