"""Evaluation suites: `suites/<name>.yaml`, a mapping of Params that people review like code.

A suite names what a run measures (models, formats, stacks, loads, sweeps, durations: the same fields as the
DAG's Params, checked by the same rules in `tasks.plan.config.RunConfig`). A run's values are resolved in this order:
the RunConfig defaults, then its suite's values, then every value given explicitly (the trigger form's filled
fields, a CLI `--conf`); a value of None counts as not given. The nightly schedule runs `nightly`; the trigger
form picks a suite and may override any field.
"""

from __future__ import annotations

from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.core.paths import REPO_ROOT

SUITES_DIR = REPO_ROOT / "suites"
SCHEDULED_SUITE = "nightly"  # what the 02:00 schedule runs (the DAG's default suite)


def suite_names(directory: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (directory or SUITES_DIR).glob("*.yaml"))


def load_suite(name: str, directory: Path | None = None) -> dict:
    """The suite's Params, with `suite` set to its name (its keys are checked where Params are resolved,
    `tasks.plan.config.resolve_params`, naming the file and key)."""
    import yaml  # lazy: PyYAML only when a suite is read

    path = (directory or SUITES_DIR) / f"{name}.yaml"
    if not isinstance(name, str) or not name or "/" in name or name.startswith(".") or not path.is_file():
        raise ConfigError("suite", name, f"must be one of {suite_names(directory)} (files suites/<name>.yaml)")
    try:
        params = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError("suite", name, f"{path.name} is not valid YAML: {exc}") from exc
    if not isinstance(params, dict):
        raise ConfigError("suite", name, f"{path.name} must be a mapping of Params, not {type(params).__name__}")
    return {**params, "suite": name}


def suites_markdown(directory: Path | None = None) -> str:
    """A table of every suite's values, for the DAG's documentation in the UI."""
    lines = ["| suite | values |", "|---|---|"]
    for name in suite_names(directory):
        values = {k: v for k, v in load_suite(name, directory).items() if k != "suite"}
        lines.append(f"| `{name}` | " + ", ".join(f"{k}={v}" for k, v in values.items()) + " |")
    return "\n".join(lines)
