"""The integration folder: every test here starts something real (a serving stack, a container, an Airflow run,
the browser, the moto S3 server), so the whole folder is `integration` and `make test-fast` leaves it out."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)
