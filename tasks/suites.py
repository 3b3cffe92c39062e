"""Evaluation suites: `suites/<name>.yaml`, a mapping of Params reviewed like code.

A stand-in until the suite loader of issue 12 item 1 lands (it keeps this name and signature): it reads the
file as a mapping of Params and checks nothing else; `tasks.config.RunConfig` checks the values.
"""

from __future__ import annotations

from pathlib import Path

from tasks.errors import ConfigError
from tasks.runtimes import REPO_ROOT

SUITES_DIR = REPO_ROOT / "suites"


def suite_names(directory: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (directory or SUITES_DIR).glob("*.yaml"))


def load_suite(name: str, directory: Path | None = None) -> dict:
    """The suite's Params, with `suite` set to its name."""
    import yaml

    path = (directory or SUITES_DIR) / f"{name}.yaml"
    if not name or "/" in name or not path.is_file():
        raise ConfigError("suite", name, f"must be one of {suite_names(directory)} (files suites/<name>.yaml)")
    try:
        params = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError("suite", name, f"{path.name} is not valid YAML: {exc}") from exc
    if not isinstance(params, dict):
        raise ConfigError("suite", name, f"{path.name} must be a mapping of Params, not {type(params).__name__}")
    return {**params, "suite": name}
