"""Resource sampling for the duration of a load point: the server's process tree (psutil) or its container
(docker stats), and the GPU (NVML) where one exists. `sampler_for(handle)` picks by the launch handle."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import psutil

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


class DockerStatsSampler(ProcessTreeSampler):
    """Samples a container through the Docker stats stream (cgroup CPU and memory) plus NVML.

    The stream yields about one reading per second; CPU % is computed as `docker stats` does (container CPU
    time delta over system CPU time delta, times the online CPUs; 100 = one core).
    """

    def __init__(self, container_id: str, client=None, period_s: float = SAMPLE_PERIOD_S) -> None:
        super().__init__(pid=0, period_s=period_s)
        self.container_id = container_id
        self._client = client

    def _loop(self) -> None:
        gpu = _Gpu()
        try:
            client = self._client
            if client is None:
                from tasks.serve.launchers.docker import docker_client

                client = self._client = docker_client()
            stream = client.api.stats(self.container_id, stream=True, decode=True)
        except Exception:  # noqa: BLE001 - no engine or no container: no server figures (the cell still runs)
            return
        for stats in stream:
            if self._stop.is_set():
                break
            cpu = container_cpu_pct(stats)
            if cpu is not None:
                self._cpu.append(cpu)
            usage = (stats.get("memory_stats") or {}).get("usage")
            if usage is not None:
                self._rss.append(usage / 2**20)
            reading = gpu.read()
            if reading is not None:
                self._gpu.append(reading)
        if hasattr(stream, "close"):
            stream.close()


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
    """The sampler for a launched server: docker stats for a container, psutil for a process tree."""
    if getattr(handle, "container_id", ""):
        return DockerStatsSampler(handle.container_id, client=client)
    return ProcessTreeSampler(handle.pid)
