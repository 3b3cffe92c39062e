"""BentoML JSON API (`POST /predict`): the body of our generated service is the TorchServe handler's body.

The JSON keys of a BentoML request are the `@bentoml.api` method's parameter names; the service written by
`tasks/serve/servers/bentoml.py` names its parameter `inputs` and returns `{"outputs": ...}`.
"""

from __future__ import annotations

from tasks.loadgen.protocols.torchserve_rest import TorchServeRest

API_PATH = "/predict"


class BentoMLJson(TorchServeRest):
    name = "bentoml_json"

    def path(self) -> str:
        return API_PATH
