"""`make test`'s order (tests/prebuild.py): the tests that use images after the others, the host-judging ones last."""

from __future__ import annotations

from types import SimpleNamespace

from tests.prebuild import order_items


def test_image_tests_run_after_the_others_and_host_judging_tests_last_each_group_in_its_order() -> None:
    names = ["integration/test_compose.py", "integration/test_contention.py", "integration/test_docker_images.py",
             "integration/test_cli_run.py", "reliability/test_stopping.py", "integration/test_loadgen_servers.py",
             "unit/measure/test_hoststate.py", "integration/test_docker_faults.py"]
    items = [SimpleNamespace(fspath=f"/repo/tests/{name}") for name in names]
    ordered = [item.fspath.removeprefix("/repo/tests/") for item in order_items(items)]
    assert ordered == ["integration/test_cli_run.py", "reliability/test_stopping.py", "unit/measure/test_hoststate.py",
                       "integration/test_docker_images.py", "integration/test_docker_faults.py",
                       "integration/test_compose.py", "integration/test_contention.py",
                       "integration/test_loadgen_servers.py"]
