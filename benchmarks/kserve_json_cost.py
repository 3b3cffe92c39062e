"""KServe's own REST v2 path per request, outside inference, timed in the kserve runtime (run by
benchmarks/engine_gap.py as `python kserve_json_cost.py request|response SHAPE`; prints one JSON object).

- request: the JSON body -> `json.loads` -> the `InferenceRequest` pydantic model (FastAPI validates the infer
  route's body into it) -> a numpy array;
- response: the numpy output -> `InferOutput.set_data_from_numpy` + `InferResponse.to_rest` (lists) -> the
  `InferenceResponse` pydantic model (`v2_endpoints.infer`) -> FastAPI's `jsonable_encoder` + `json.dumps` (the
  infer route has no response_model, so FastAPI walks every value in Python).
"""

import json
import sys
import time

import numpy as np
from fastapi.encoders import jsonable_encoder
from kserve import InferOutput, InferResponse
from kserve.protocol.rest.v2_datamodels import InferenceRequest, InferenceResponse


def timed(step, rounds: int = 10) -> tuple[float, object]:
    started = time.perf_counter()
    for _ in range(rounds):
        result = step()
    return (time.perf_counter() - started) / rounds * 1e3, result


def response_cost(y: np.ndarray) -> dict:
    def to_rest() -> dict:
        out = InferOutput(name="out", shape=list(y.shape), datatype="FP32")
        out.set_data_from_numpy(y, binary_data=False)
        return InferResponse(response_id="1", model_name="m", infer_outputs=[out]).to_rest()[0]

    lists_ms, rest = timed(to_rest)
    validate_ms, model = timed(lambda: InferenceResponse.model_validate(rest))
    encode_ms, body = timed(lambda: json.dumps(jsonable_encoder(model)).encode())
    return {"response_mb": len(body) / 1e6, "array_to_lists_ms": lists_ms, "model_validate_ms": validate_ms,
            "jsonable_encoder_dumps_ms": encode_ms}


def request_cost(y: np.ndarray) -> dict:
    body = json.dumps({"inputs": [{"name": "x", "shape": list(y.shape), "datatype": "FP32",
                                   "data": y.ravel().tolist()}]})
    loads_ms, obj = timed(lambda: json.loads(body))
    validate_ms, request = timed(lambda: InferenceRequest.model_validate(obj))
    numpy_ms, _ = timed(lambda: np.asarray(request.inputs[0].data, dtype="float32"))
    return {"request_mb": len(body) / 1e6, "json_loads_ms": loads_ms, "model_validate_ms": validate_ms,
            "to_numpy_ms": numpy_ms}


if __name__ == "__main__":
    kind, shape = sys.argv[1], [int(x) for x in sys.argv[2].split(",")]
    y = np.random.default_rng(0).standard_normal(shape).astype("float32")
    print(json.dumps(response_cost(y) if kind == "response" else request_cost(y)))
