"""The CPU and memory budget of a server: the same for every stack, applied by the launcher, recorded in every row.

Params `server_cpus` (an integer: a count of CPUs; a string: a CPU set such as "2-3", "1,3" or "1" (CPU 1)) and
`server_memory` (such as "2g"):

- the server runs on its CPU set: the Docker launcher sets the container's cpuset, the process launcher the
  server's CPU affinity (inherited by every process it starts);
- a count N takes the host's last N CPUs; with `pin_cpus` the load generator gets CPUs the server does not
  have (a quarter of the host's CPUs, at least one, from the first ones), or runs unpinned when none are left;
- no `server_cpus`: with `pin_cpus` the server gets every CPU the generator does not (a quarter for the
  generator, at least one, when the host has two or more), otherwise it runs unpinned on every CPU;
- `server_memory` is the container's memory limit (swap included: no swap beyond it). The process launcher
  cannot bound a process tree's memory without a container, so its rows record no memory limit;
- each server's own threads and workers follow the CPU count of its set (`ServingOptions.cpus`; the rule per
  server is in docs/servers.md).

The rows record what was applied: `server_cpus` as the CPU set the server could run on ("1", "0-3", "1,3"),
`server_memory` as the limit given to the engine, or null.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from tasks.core.errors import ConfigError

_CPU_SET = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_MEMORY = re.compile(r"^([1-9][0-9]*)([bkmg]?)$", re.IGNORECASE)
MEMORY_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30}
MIN_MEMORY_BYTES = 64 * 2**20  # below this no stack here starts (Docker's own floor is 6 MB)
CPU_SET_PATTERN = _CPU_SET.pattern
MEMORY_PATTERN = r"^[1-9][0-9]*[bkmgBKMG]?$"


def host_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (its affinity), sorted."""
    return tuple(sorted(os.sched_getaffinity(0)))


def parse_cpu_set(text: str) -> tuple[int, ...]:
    """ "0-2,5" -> (0, 1, 2, 5); ConfigError naming server_cpus when malformed."""
    text = text.replace(" ", "")
    if not _CPU_SET.match(text):
        raise ConfigError("server_cpus", text, "must be a CPU count (an integer >= 1) or a CPU set like '1', "
                                               "'2-3' or '0,2'")
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if last < first:
            raise ConfigError("server_cpus", text, f"range {part!r} must go from low to high")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_cpu_set(cpus: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> "0-2,5" (the form cpuset and taskset take)."""
    parts, start, prev = [], None, None
    for cpu in sorted(cpus):
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            parts.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = cpu
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(parts)


def parse_memory(value: str) -> int:
    """ "512m" -> bytes; ConfigError naming server_memory when malformed or below MIN_MEMORY_BYTES."""
    match = _MEMORY.match(str(value).strip())
    if not match:
        raise ConfigError("server_memory", value, "must be a size like '512m' or '4g' (bytes, k, m or g)")
    size = int(match[1]) * MEMORY_UNITS[match[2].lower()]
    if size < MIN_MEMORY_BYTES:
        raise ConfigError("server_memory", value, f"must be at least {MIN_MEMORY_BYTES // 2**20}m")
    return size


def check_budget(server_cpus: int | str | None, server_memory: str | None, pin_cpus: bool,
                 cpus: tuple[int, ...] | None = None) -> None:
    """Refuse a budget this host cannot give (raises ConfigError naming the field)."""
    plan_budget(server_cpus, server_memory, pin_cpus, cpus)


@dataclass(frozen=True)
class ServerBudget:
    """What a server session gets: its CPU set (empty: unpinned), the generator's CPU set, a memory limit."""

    cpus: tuple[int, ...]
    generator_cpus: tuple[int, ...]
    memory: str | None
    host_cpus: tuple[int, ...]

    @property
    def cpu_count(self) -> int:
        """How many CPUs the server can use: the thread and worker counts of each server follow it."""
        return len(self.cpus or self.host_cpus)

    def row_fields(self, launcher: str) -> dict[str, str | None]:
        """The `server_cpus` / `server_memory` columns as applied by `launcher`."""
        memory = self.memory if launcher == "docker" else None  # the process launcher sets no memory limit
        return {"server_cpus": format_cpu_set(self.cpus or self.host_cpus), "server_memory": memory}


def _generator_share(free: tuple[int, ...], host: tuple[int, ...]) -> tuple[int, ...]:
    """The load generator's CPUs: a quarter of the host's (at least one), the first of those the server lacks."""
    return free[:max(1, len(host) // 4)]


def plan_budget(server_cpus: int | str | None, server_memory: str | None, pin_cpus: bool,
                cpus: tuple[int, ...] | None = None) -> ServerBudget:
    """The budget for these Params on a host whose usable CPUs are `cpus` (default: this process's affinity)."""
    cpus = tuple(sorted(cpus)) if cpus is not None else host_cpus()
    memory = None
    if server_memory is not None:
        parse_memory(server_memory)
        memory = str(server_memory).strip().lower()
    if server_cpus is None:
        if not pin_cpus or len(cpus) < 2:
            return ServerBudget((), (), memory, cpus)
        generator = _generator_share(cpus, cpus)
        return ServerBudget(tuple(c for c in cpus if c not in generator), generator, memory, cpus)
    if isinstance(server_cpus, bool):
        raise ConfigError("server_cpus", server_cpus, "must be a CPU count (an integer >= 1) or a CPU set like '2-3'")
    if isinstance(server_cpus, int):  # a count; a string is always a CPU set ("2" is CPU 2)
        count = server_cpus
        if not 1 <= count <= len(cpus):
            raise ConfigError("server_cpus", server_cpus, f"a CPU count must be from 1 to the {len(cpus)} CPUs this "
                                                          f"host gives ({format_cpu_set(cpus)})")
        chosen = cpus[-count:]
    else:
        chosen = parse_cpu_set(str(server_cpus))
        missing = sorted(set(chosen) - set(cpus))
        if missing:
            raise ConfigError("server_cpus", server_cpus, f"CPUs {missing} are not among this host's usable CPUs "
                                                          f"({format_cpu_set(cpus)})")
    rest = tuple(c for c in cpus if c not in chosen)
    return ServerBudget(chosen, _generator_share(rest, cpus) if pin_cpus else (), memory, cpus)
