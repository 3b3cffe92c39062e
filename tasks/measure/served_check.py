"""The served-output check: before any load, the live server computes the model's seeded parity inputs and its
answers are compared with the reference outputs the artifact carries (`reference.npz`, made by the converter
from the source model), with the artifact's own tolerances.

A server that answers with the right shapes but wrong values (a wrong artifact, a broken handler, a bad
dtype cast) would otherwise pass every load point; here it fails its cells. The one number reported is the
worst |served - reference| / (atol + rtol * |reference|) over every output and batch size: <= 1 passes.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from pathlib import Path

from tasks.convert import Artifact
from tasks.convert.parity import REFERENCE_FILE, compare, load_reference
from tasks.core.spec import ModelSpec, make_inputs
from tasks.loadgen.protocols import get_codec
from tasks.serve.base import Endpoint

REQUEST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ServedCheck:
    err_ratio: float  # worst |a - b| / (atol + rtol * |b|); inf when an answer was missing or malformed
    passed: bool
    batch_sizes: tuple[int, ...]
    reference: str  # what the reference outputs are (e.g. "torch eager, fp32")
    detail: str  # where the worst ratio was, or why no answer could be compared

    def to_dict(self) -> dict:
        return {"err_ratio": self.err_ratio, "passed": self.passed, "batch_sizes": list(self.batch_sizes),
                "reference": self.reference, "detail": self.detail}


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


def check_served_outputs(protocol: str, endpoint: Endpoint, spec: ModelSpec, artifact: Artifact,
                         max_batch_size: int) -> ServedCheck:
    """Send the parity inputs of every parity batch size the server accepts (<= `max_batch_size`, at least 1)
    over `protocol` (the server's REST codec) and compare the answers with the artifact's reference."""
    directory = reference_dir(artifact)
    atol = float(artifact.record.get("atol", spec.parity_atol))
    rtol = float(artifact.record.get("rtol", spec.parity_rtol))
    described = str(artifact.record.get("reference", "the source model"))
    if not (directory / REFERENCE_FILE).is_file():
        return ServedCheck(float("inf"), False, (), described, f"the artifact has no {REFERENCE_FILE} to compare with")
    reference = load_reference(directory, spec)
    sizes = tuple(b for b in spec.parity_batch_sizes if b <= max_batch_size) or (1,)
    names = [t.name for t in spec.outputs]
    worst, where = 0.0, ""
    codec_cls = get_codec(protocol)
    for batch_size in sizes:
        shapes = {t.name: (batch_size, *t.shape[1:]) for t in spec.outputs}
        codec = codec_cls(endpoint.host, endpoint.port, endpoint.model_name, make_inputs(spec, batch_size), shapes)
        try:
            status, body = post_raw(endpoint.host, endpoint.port, codec.request_bytes())
        except OSError as exc:
            return ServedCheck(float("inf"), False, sizes, described, f"batch {batch_size}: no answer ({exc})")
        if status != 200:
            text = body[:300].decode(errors="replace")
            return ServedCheck(float("inf"), False, sizes, described, f"batch {batch_size}: HTTP {status}: {text}")
        try:
            decoded = codec.decode(body)
            served = [decoded[name] for name in names]
        except (KeyError, ValueError, TypeError) as exc:
            return ServedCheck(float("inf"), False, sizes, described,
                               f"batch {batch_size}: the answer lacks outputs {names} or cannot be read ({exc})")
        result = compare(spec, batch_size, reference[batch_size], served, atol, rtol)
        if not result["shapes_match"]:
            return ServedCheck(float("inf"), False, sizes, described,
                               f"batch {batch_size}: output shapes {result['shapes']['actual']} differ from the "
                               f"reference's {result['shapes']['reference']}")
        if result["max_err_ratio"] >= worst:
            worst = result["max_err_ratio"]
            where = (f"batch {batch_size}: max |a-b| {result['max_abs_err']:.3g} (atol {atol:g}, rtol {rtol:g}), "
                     f"worst |a-b|/(atol+rtol*|b|) {worst:.3g}")
    return ServedCheck(worst, worst <= 1.0, sizes, described, where)
