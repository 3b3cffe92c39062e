"""The process launcher pins a real server to its CPUs."""

from __future__ import annotations

import psutil
import pytest

from tasks.serve.options import ServingOptions


@pytest.mark.integration
def test_process_launcher_pins_the_server_to_its_cpus(mlp_onnx, mlp_spec, log_dir):
    """The process launcher applies the CPU set as the server's affinity (its children inherit it)."""
    from tasks.serve.launchers.process import ProcessLauncher
    from tasks.serve.servers import get_server
    from tasks.serve.session import SessionSettings, server_session

    cpus = (max(psutil.Process().cpu_affinity()),)
    with server_session(get_server("custom", ServingOptions(cpus=1)), mlp_onnx, mlp_spec, ProcessLauncher(),
                        SessionSettings(run_id="test-budget", session_id="budget-custom", log_dir=log_dir, cpus=cpus,
                                        memory="1g")) as live:
        assert psutil.Process(live.handle.pid).cpu_affinity() == list(cpus)
        assert live.runtime_image_kind == "venv"
