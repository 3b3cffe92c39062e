"""Resource sampling for the duration of a load point: the server's process tree (psutil) or its container
(its cgroup files, or docker stats), and the GPU (NVML) where one exists. `sampler_for(handle)` picks by the
launch handle. `read_footprint(handle)` reads the server's memory, processes and threads once (its idle size)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from tasks.runtimes.docker_engine import docker_client

SAMPLE_PERIOD_S = 0.25


@dataclass(frozen=True)
class ResourceSummary:
    server_cpu_pct: float | None  # mean over samples, summed over the process tree (100 = one core)
    server_rss_mb: float | None  # peak resident memory of the process tree
    gpu_util_pct: float | None
    gpu_mem_mb: float | None
    gpu_power_w: float | None
    samples: int

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in RESOURCE_COLUMNS}


RESOURCE_COLUMNS = ("server_cpu_pct", "server_rss_mb", "gpu_util_pct", "gpu_mem_mb", "gpu_power_w")


class _Gpu:
    """NVML access when a GPU and its driver exist; otherwise every reading is None."""

    def __init__(self) -> None:
        self.handles = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # noqa: BLE001 - no driver, no library or no device: no GPU figures
            self.handles = []

    def read(self) -> tuple[float, float, float] | None:
        if not self.handles:
            return None
        util = sum(self.nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self.handles) / len(self.handles)
        mem = sum(self.nvml.nvmlDeviceGetMemoryInfo(h).used for h in self.handles) / 2**20
        power = sum(self.nvml.nvmlDeviceGetPowerUsage(h) for h in self.handles) / 1000.0
        return util, mem, power


class ProcessTreeSampler:
    """Samples a process and its children in a background thread while the `with` block runs."""

    def __init__(self, pid: int, period_s: float = SAMPLE_PERIOD_S) -> None:
        self.pid, self.period_s = pid, period_s
        self._stop = threading.Event()
        self._cpu: list[float] = []
        self._rss: list[float] = []
        self._gpu: list[tuple[float, float, float]] = []
        self._procs: dict[int, psutil.Process] = {}
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> ProcessTreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _tree(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.pid)
            members = [root, *root.children(recursive=True)]
        except psutil.Error:
            return []
        for proc in members:  # keep Process objects so cpu_percent measures since the previous sample
            self._procs.setdefault(proc.pid, proc)
        return [self._procs[p.pid] for p in members]

    def _loop(self) -> None:
        gpu = _Gpu()
        for proc in self._tree():
            try:
                proc.cpu_percent(None)
            except psutil.Error:
                pass
        while not self._stop.wait(self.period_s):
            cpu = rss = 0.0
            for proc in self._tree():
                try:
                    cpu += proc.cpu_percent(None)
                    rss += proc.memory_info().rss / 2**20
                except psutil.Error:
                    continue
            self._cpu.append(cpu)
            self._rss.append(rss)
            reading = gpu.read()
            if reading is not None:
                self._gpu.append(reading)

    def summary(self) -> ResourceSummary:
        def mean(values: list[float]) -> float | None:
            return sum(values) / len(values) if values else None

        return ResourceSummary(
            server_cpu_pct=mean(self._cpu), server_rss_mb=max(self._rss) if self._rss else None,
            gpu_util_pct=mean([g[0] for g in self._gpu]), gpu_mem_mb=max((g[1] for g in self._gpu), default=None),
            gpu_power_w=mean([g[2] for g in self._gpu]), samples=len(self._cpu),
        )


class CgroupReader:
    """A container's CPU time and memory read from its cgroup files: cgroup v1 (`cpuacct.usage`,
    `memory.usage_in_bytes` less `total_inactive_file`) or v2 (`cpu.stat` usage_usec, `memory.current` less
    `inactive_file`), found through /proc/<pid>/cgroup and this host's cgroup mounts. Memory is counted as
    `docker stats` counts it: the cgroup's usage without its inactive page cache."""

    def __init__(self, cpu_file: Path, memory_file: Path, memory_stat: Path, inactive_key: str,
                 cpu_scale_ns: int) -> None:
        self.cpu_file, self.memory_file, self.memory_stat = cpu_file, memory_file, memory_stat
        self.inactive_key, self.cpu_scale_ns = inactive_key, cpu_scale_ns

    @classmethod
    def for_pid(cls, pid: int, container_id: str = "") -> CgroupReader | None:
        """The reader of the cgroup that process `pid` is in, or None when its files cannot be read here (an
        engine on another host, an unknown layout). With `container_id`, the cgroup path must name it."""
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
            mounts = _cgroup_mounts()
        except OSError:
            return None
        paths: dict[str, str] = {}
        for line in lines:
            _, controllers, path = line.split(":", 2)
            for controller in (controllers.split(",") if controllers else ["unified"]):
                paths[controller] = path
        if container_id and not all(container_id in p for k, p in paths.items() if k in ("cpuacct", "unified")):
            return None
        if "cpuacct" in paths and "memory" in paths and "cpuacct" in mounts and "memory" in mounts:
            cpu_dir = _join(mounts["cpuacct"], paths["cpuacct"])
            mem_dir = _join(mounts["memory"], paths["memory"])
            reader = cls(cpu_dir / "cpuacct.usage", mem_dir / "memory.usage_in_bytes", mem_dir / "memory.stat",
                         "total_inactive_file", 1)
        elif "unified" in paths and "unified" in mounts:
            directory = _join(mounts["unified"], paths["unified"])
            reader = cls(directory / "cpu.stat", directory / "memory.current", directory / "memory.stat",
                         "inactive_file", 1000)
        else:
            return None
        try:
            reader.cpu_ns()
            reader.memory_bytes()
        except (OSError, ValueError, KeyError):
            return None
        return reader

    def cpu_ns(self) -> int:
        text = self.cpu_file.read_text()
        if self.cpu_file.name == "cpu.stat":
            stat = dict(line.split() for line in text.splitlines() if line.strip())
            return int(stat["usage_usec"]) * self.cpu_scale_ns
        return int(text.strip())

    def memory_bytes(self) -> int:
        usage = int(self.memory_file.read_text().strip())
        stat = dict(line.split() for line in self.memory_stat.read_text().splitlines() if line.strip())
        return max(0, usage - int(stat.get(self.inactive_key, 0)))


    def processes(self) -> int:
        """Processes in the cgroup (`cgroup.procs`)."""
        return _count_lines(self.cpu_file.parent / "cgroup.procs")

    def threads(self) -> int:
        """Threads in the cgroup (`cgroup.threads` in v2, `tasks` in v1)."""
        name = "cgroup.threads" if self.cpu_file.name == "cpu.stat" else "tasks"
        return _count_lines(self.cpu_file.parent / name)


def _count_lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


@dataclass(frozen=True)
class Footprint:
    """One reading of a server's size: its resident memory, processes and threads (a process tree's, summed; a
    container's from its cgroup, init included), and where it was read from."""

    rss_mb: float | None
    processes: int | None
    threads: int | None
    source: str  # "process tree", "cgroup" or "docker stats"

    def to_dict(self) -> dict:
        return {"rss_mb": self.rss_mb, "processes": self.processes, "threads": self.threads, "source": self.source}


def read_footprint(handle, client=None) -> Footprint | None:
    """The server's memory, processes and threads now (its process tree, or its container), or None when it cannot
    be read (the server is gone, no engine answers)."""
    if getattr(handle, "container_id", ""):
        return _container_footprint(handle.container_id, client)
    try:
        root = psutil.Process(handle.pid)
        members = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    rss, threads, alive = 0, 0, 0
    for proc in members:
        try:
            with proc.oneshot():
                rss += proc.memory_info().rss
                threads += proc.num_threads()
            alive += 1
        except psutil.Error:
            continue
    return Footprint(rss / 2**20, alive, threads, "process tree") if alive else None


def _container_footprint(container_id: str, client=None) -> Footprint | None:
    try:
        client = client or docker_client()
        pid = int(client.api.inspect_container(container_id)["State"]["Pid"] or 0)
    except Exception:  # noqa: BLE001 - no engine or no container: nothing to read
        return None
    reader = CgroupReader.for_pid(pid, container_id) if pid else None
    if reader is not None:
        try:
            return Footprint(reader.memory_bytes() / 2**20, reader.processes(), reader.threads(), "cgroup")
        except (OSError, ValueError, KeyError):
            pass
    try:  # an engine on another host: its stats (pids_stats counts the container's tasks, i.e. threads)
        stats = client.api.stats(container_id, stream=False)
        processes = len(client.api.top(container_id).get("Processes") or [])
    except Exception:  # noqa: BLE001 - the container ended
        return None
    memory = container_memory_bytes(stats)
    threads = (stats.get("pids_stats") or {}).get("current")
    return Footprint(memory / 2**20 if memory is not None else None, processes or None,
                     int(threads) if threads is not None else None, "docker stats")


def _cgroup_mounts() -> dict[str, tuple[str, str]]:
    """controller ("cpuacct", "memory"; "unified" for cgroup v2) -> (mount root, mount point) on this host."""
    mounts: dict[str, tuple[str, str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, point, fstype, options = fields[3], fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup2":
            mounts.setdefault("unified", (root, point))
        elif fstype == "cgroup":
            for controller in ("cpuacct", "memory"):
                if controller in options:
                    mounts.setdefault(controller, (root, point))
    return mounts


def _join(mount: tuple[str, str], path: str) -> Path:
    root, point = mount
    relative = path[len(root):] if root != "/" and path.startswith(root) else path
    return Path(point) / relative.lstrip("/")


class ContainerSampler(ProcessTreeSampler):
    """Samples a container: its cgroup's files every `period_s` where this host can read them (the engine is
    local), else the Docker stats stream (about one reading a second); plus NVML. CPU % is the container's CPU
    time over wall time (100 = one core); memory is its usage without inactive page cache, as `docker stats`
    shows it (reported as `server_rss_mb`, the peak)."""

    def __init__(self, container_id: str, client=None, period_s: float = SAMPLE_PERIOD_S) -> None:
        super().__init__(pid=0, period_s=period_s)
        self.container_id = container_id
        self._client = client
        self.source = ""  # "cgroup" or "docker stats", once sampling began

    def _loop(self) -> None:
        gpu = _Gpu()
        try:
            client = self._client
            if client is None:
                client = self._client = docker_client()
            pid = int(client.api.inspect_container(self.container_id)["State"]["Pid"] or 0)
        except Exception:  # noqa: BLE001 - no engine or no container: no server figures (the cell still runs)
            return
        reader = CgroupReader.for_pid(pid, self.container_id) if pid else None
        if reader is None:
            self._stats_loop(client, gpu)
            return
        self.source = "cgroup"
        try:
            last_cpu, last_t = reader.cpu_ns(), time.monotonic_ns()
            while not self._stop.wait(self.period_s):
                cpu, now = reader.cpu_ns(), time.monotonic_ns()
                if now > last_t:
                    self._cpu.append(100.0 * (cpu - last_cpu) / (now - last_t))
                last_cpu, last_t = cpu, now
                self._rss.append(reader.memory_bytes() / 2**20)
                reading = gpu.read()
                if reading is not None:
                    self._gpu.append(reading)
        except (OSError, ValueError, KeyError):
            return  # the container ended: its cgroup is gone

    def _stats_loop(self, client, gpu: _Gpu) -> None:
        self.source = "docker stats"
        try:
            stream = client.api.stats(self.container_id, stream=True, decode=True)
        except Exception:  # noqa: BLE001 - no engine or no container: no server figures (the cell still runs)
            return
        for stats in stream:
            if self._stop.is_set():
                break
            cpu = container_cpu_pct(stats)
            if cpu is not None:
                self._cpu.append(cpu)
            memory = container_memory_bytes(stats)
            if memory is not None:
                self._rss.append(memory / 2**20)
            reading = gpu.read()
            if reading is not None:
                self._gpu.append(reading)
        if hasattr(stream, "close"):
            stream.close()


def container_memory_bytes(stats: dict) -> int | None:
    """`docker stats`' memory use: usage less inactive page cache (cgroup v1 `total_inactive_file`, v2
    `inactive_file`)."""
    memory = stats.get("memory_stats") or {}
    if memory.get("usage") is None:
        return None
    detail = memory.get("stats") or {}
    inactive = detail.get("total_inactive_file", detail.get("inactive_file", 0))
    return max(0, int(memory["usage"]) - int(inactive))


def container_cpu_pct(stats: dict) -> float | None:
    """`docker stats`' CPU %: container CPU delta / system CPU delta x online CPUs x 100."""
    cpu, pre = stats.get("cpu_stats") or {}, stats.get("precpu_stats") or {}
    try:
        cpu_delta = cpu["cpu_usage"]["total_usage"] - pre["cpu_usage"]["total_usage"]
        system_delta = cpu["system_cpu_usage"] - pre["system_cpu_usage"]
    except KeyError:
        return None
    online = cpu.get("online_cpus") or len(cpu["cpu_usage"].get("percpu_usage") or []) or 1
    return 100.0 * cpu_delta / system_delta * online if system_delta > 0 else None


def sampler_for(handle, client=None) -> ProcessTreeSampler:
    """The sampler for a launched server: its cgroup (or docker stats) for a container, psutil for a process tree."""
    if getattr(handle, "container_id", ""):
        return ContainerSampler(handle.container_id, client=client)
    return ProcessTreeSampler(handle.pid)
