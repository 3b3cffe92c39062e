"""Where things are: the repository, the runtimes' folders, and this host's cache and work folders.

The cache (`$SERVING_EVAL_CACHE`, else ~/.cache/serving-eval) is outside the repository and shared by every run
on the host: runtime venvs, images' build state, converted artifacts, and one work folder per run.
"""

from __future__ import annotations

import os
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.core.names import safe_component

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO_ROOT / "docker"
MODELS_DIR = REPO_ROOT / "models"
CACHE_ENV = "SERVING_EVAL_CACHE"
ARTIFACTS_ENV = "SERVING_EVAL_ARTIFACTS"
RUNTIMES_ENV = "SERVING_EVAL_RUNTIMES"  # folders of runtime folders that take the place of docker/<runtime>/


def cache_root() -> Path:
    """The host-wide cache for runtimes and artifacts (`$SERVING_EVAL_CACHE`, else ~/.cache/serving-eval)."""
    root = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "serving-eval")
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(CACHE_ENV, root, f"the work and cache folder must be a writable folder ({exc})") from exc
    return path


def runtime_home(name: str) -> Path:
    """A runtime's folder (requirements.txt, entry scripts, Dockerfile): the first folder named `name` in the
    folders of `$SERVING_EVAL_RUNTIMES` (separated by the path separator), else this checkout's docker/<name>/.
    The override lets a night serve an edited runtime (a package bumped or added) without editing the checkout:
    its inputs record the folder's files as usual, and a later night's duet serves it again from the store."""
    for root in filter(None, os.environ.get(RUNTIMES_ENV, "").split(os.pathsep)):
        folder = Path(root) / name
        if folder.is_dir():
            return folder
    return DOCKER_DIR / name


def runs_root() -> Path:
    """Where the runs' work folders are on this host, under the cache."""
    return cache_root() / "runs"


def run_dir(run_id: str) -> Path:
    """A run's private work folder on this host (server logs, load-point scratch), under the cache."""
    return runs_root() / safe_component(run_id)


def artifacts_root() -> Path:
    """Where converted artifacts are cached (`$SERVING_EVAL_ARTIFACTS`, else <cache>/artifacts)."""
    path = Path(os.environ.get(ARTIFACTS_ENV) or cache_root() / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path
