"""How a server should serve (`ServingOptions`): the same meaning for every server that honours an option.

Knobs (tasks/serve/knobs.py) name fields of it; servers (tasks/serve/servers/) read it; the plan step's Params set
its defaults (batching, device, the server's CPUs, the image source).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from tasks.core.errors import ConfigError
from tasks.runtimes.venvs import BUILDERS

DEVICES = ("cpu", "gpu")
IMAGE_SOURCES = ("project", "official")  # Docker launcher: images built here, or a registry's official image


@dataclass(frozen=True)
class ServingOptions:
    """How the server should serve: the same meaning for every server that supports the option."""

    max_batch_size: int = 8
    dynamic_batching: bool = False
    batch_delay_us: int = 1000
    instances: int = 1
    device: str = "cpu"
    cpus: int = 0  # how many CPUs the server is given (tasks/serve/budget.py); 0: unknown, one thread per instance
    images: str = "project"  # Docker launcher: "project" images built here, or "official" ones from a registry
    threads: int = 0  # intra-op threads of each instance; 0: the server's CPUs shared among its instances
    preferred_batch_sizes: tuple[int, ...] = ()  # batch sizes a dynamic batcher should aim for (Triton)
    max_latency_ms: int = 0  # a batcher's latency budget (BentoML's max_latency_ms); 0: the server's default
    # Where the runtime's files come from (its entry scripts and requirements.txt): "" this checkout's
    # docker/<runtime>/, else a regression reference's snapshot of that folder (tasks/measure/duet.py); and the
    # image a container of it runs ("" the server's own; else an image id a reference ran on).
    runtime_dir: str = ""
    runtime_image: str = ""
    runtime_builder: str = ""  # the venv's builder ("": tonight's; "pip": a reference built before the switch)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError("device", self.device, f"must be one of {list(DEVICES)}")
        if self.runtime_builder not in ("", *BUILDERS):
            raise ConfigError("runtime_builder", self.runtime_builder, f"must be one of {['', *BUILDERS]}")
        if self.images not in IMAGE_SOURCES:
            raise ConfigError("images", self.images, f"must be one of {list(IMAGE_SOURCES)}")
        for name in ("max_batch_size", "instances"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "must be >= 1")
        if self.batch_delay_us < 0:
            raise ConfigError("batch_delay_us", self.batch_delay_us, "must be >= 0")
        if self.cpus < 0:
            raise ConfigError("cpus", self.cpus, "must be >= 0")
        if self.threads < 0:
            raise ConfigError("threads", self.threads, "must be >= 0 (0: the server's CPUs shared among instances)")
        if any(b < 1 or b > self.max_batch_size for b in self.preferred_batch_sizes):
            raise ConfigError("preferred_batch_sizes", list(self.preferred_batch_sizes),
                              f"each must be from 1 to max_batch_size ({self.max_batch_size})")

    @property
    def threads_per_instance(self) -> int:
        """Intra-op threads of each instance (a worker process or a model instance): `threads` when set, else the
        server's CPUs shared among its instances, at least one."""
        if self.threads:
            return self.threads
        return max(1, self.cpus // self.instances) if self.cpus else 1

    @property
    def process_threads(self) -> int:
        """Intra-op threads of a server that runs all its instances in one process (KServe, the custom service)."""
        return self.instances * self.threads_per_instance

    @property
    def thread_env(self) -> dict[str, str]:
        """OpenMP/MKL pools sized like the server's own threads (torch and onnxruntime read them at start)."""
        threads = str(self.threads_per_instance)
        return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


# The options that say how a stack serves (a cell's `serving` inputs, tasks/measure/inputs.py): not where a runtime's
# files come from, which a regression reference's side sets.
OPTION_FIELDS = tuple(f.name for f in fields(ServingOptions) if f.name not in ("runtime_dir", "runtime_builder"))


def serving_fingerprint(options: ServingOptions, protocol: str | None) -> dict:
    """How the server was asked to serve (the same meaning for every stack)."""
    values = asdict(options)
    return {**{k: list(v) if isinstance(v, tuple) else v for k, v in values.items() if k in OPTION_FIELDS},
            "protocol": protocol}
