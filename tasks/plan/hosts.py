"""The measuring hosts of a deployment: each one Celery queue and one one-slot pool, so hosts measure side by side
while one host never runs two servers.

    SERVING_EVAL_HOSTS="gpu-a,cpu-b"   the deployment's measuring hosts (the same value on every Airflow component:
                                       the DAG's per-host tasks are made from it at parse time)
    SERVING_EVAL_HOST=gpu-a            on a measuring worker: which of them this machine is (tasks/core/metadata.py)

    host      queue                        pool                         DAG tasks
    gpu-a     serving_eval_host_gpu-a      serving_eval_host_gpu-a      sweep_gpu-a, sessions_gpu-a, measure_gpu-a,
                                                                        duet_gpu-a, sweep_run_gpu-a
    (all)     Airflow's default queue      default_pool                 plan, convert, collect, validate, publish ...

Without `SERVING_EVAL_HOSTS` the deployment has one host, `local`, whose tasks stay on Airflow's default queue
(a LocalExecutor or a one-queue Celery deployment needs nothing more) with the pool `serving_eval_host_local`.
Airflow fixes a task's queue and pool per task, not per mapped instance, hence one measuring task per host.

The plan step spreads a run's server sessions over its target hosts (Param `hosts`, default all): longest
first, each to the host with the least planned time (ties: the host listed first), so the same matrix on the
same hosts lands the same way every night (regressions compare a cell with its own history on the same
hardware). Nothing here reads a database or a connection: the DAG file calls `deployed_hosts` at parse time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from tasks.core.errors import ConfigError
from tasks.core.metadata import HOST_ENV

HOSTS_ENV = "SERVING_EVAL_HOSTS"
DEFAULT_HOST = "local"
POOL_PREFIX = "serving_eval_host_"
HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")  # a task id, queue and pool name part
HOST_NAME_RULE = "each must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"


@dataclass(frozen=True)
class Host:
    """A measuring host as Airflow routes to it: its Celery queue (None: Airflow's default queue) and its pool."""

    name: str
    queue: str | None
    pool: str

    @property
    def pool_description(self) -> str:
        return f"one server session at a time on measuring host {self.name}"


def deployed_hosts(environ: Mapping[str, str] | None = None) -> tuple[Host, ...]:
    """The deployment's measuring hosts from `SERVING_EVAL_HOSTS` (comma-separated, in order), else `local`."""
    environ = os.environ if environ is None else environ
    text = environ.get(HOSTS_ENV, "").strip()
    if not text:
        return (Host(DEFAULT_HOST, None, POOL_PREFIX + DEFAULT_HOST),)
    names = [n.strip() for n in text.split(",")]
    for name in names:
        if not HOST_NAME.match(name):
            raise ConfigError(HOSTS_ENV, text, f"{HOST_NAME_RULE} (bad: {name!r})")
    if len(set(names)) != len(names):
        raise ConfigError(HOSTS_ENV, text, "must not name a host twice")
    return tuple(Host(n, POOL_PREFIX + n, POOL_PREFIX + n) for n in names)


def is_distributed(environ: Mapping[str, str] | None = None) -> bool:
    """True when `SERVING_EVAL_HOSTS` names the hosts: measuring tasks run on their own machines, so what one host
    made (artifacts, server logs, work folders) is not on another's disk."""
    environ = os.environ if environ is None else environ
    return bool(environ.get(HOSTS_ENV, "").strip())


def host_names(environ: Mapping[str, str] | None = None) -> list[str]:
    return [h.name for h in deployed_hosts(environ)]


def check_hosts(hosts: tuple[str, ...] | None, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The run's target hosts (None: every deployed host), each checked against the deployment."""
    deployed = host_names(environ)
    if hosts is None:
        return tuple(deployed)
    if not hosts:
        raise ConfigError("hosts", list(hosts), f"must name at least one of the deployment's hosts {deployed}")
    for name in hosts:
        if name not in deployed:
            raise ConfigError("hosts", name, f"must be one of the deployment's measuring hosts {deployed} "
                                             f"({HOSTS_ENV})")
    if len(set(hosts)) != len(hosts):
        raise ConfigError("hosts", list(hosts), "must not name a host twice")
    return tuple(hosts)


def assign_hosts(costs_s: list[float], hosts: tuple[str, ...]) -> list[str]:
    """The host of each session (its planned seconds in `costs_s`, in plan order): longest first to the least
    loaded host, ties to the host listed first and, between sessions, to plan order. Deterministic."""
    load = dict.fromkeys(hosts, 0.0)
    chosen = [""] * len(costs_s)
    for i in sorted(range(len(costs_s)), key=lambda i: (-costs_s[i], i)):
        host = min(hosts, key=lambda h: (load[h], hosts.index(h)))
        chosen[i] = host
        load[host] += costs_s[i]
    return chosen


def sessions_of(sessions: list[dict], host: str) -> list[dict]:
    """The sessions (as planned, dicts) on `host` (a plan from before hosts existed: every one on the only host)."""
    return [s for s in sessions if s.get("host", host) == host]


def check_worker_host(planned: str, environ: Mapping[str, str] | None = None) -> None:
    """In a multi-host deployment, refuse to measure a session on a worker that is not its host: a worker listening
    on a host's queue must say it is that host (`SERVING_EVAL_HOST`), or its numbers would be filed under another
    machine."""
    environ = os.environ if environ is None else environ
    if not is_distributed(environ):
        return
    actual = environ.get(HOST_ENV, "")
    if actual != planned:
        raise ConfigError(HOST_ENV, actual or None,
                          f"this worker took a session planned on host {planned!r} (queue {POOL_PREFIX}{planned}): a "
                          f"worker on that queue must run with {HOST_ENV}={planned}")
