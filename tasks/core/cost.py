"""What serving costs: a row's server CPU-core-seconds (and GPU-seconds) per 1,000 inferences, and with prices, the
price of a million inferences (issue 26, item 1).

An inference is one sample: a request of batch size b carries b of them, so stacks measured at different batch
sizes compare per prediction, as a team pays for them.

- CPU: `server_cpu_us_per_request` (the server's measured CPU time per request, summed over its process tree or
  container: what it used, not what it was given) / batch size, per 1,000. The one figure of CPU per request the
  rows already carry is the one this reads, so the two never disagree.
- GPU: a GPU is held whole while it serves (it is rented by the hour, busy or not), so a row on `device=gpu`
  costs one GPU for the time its inferences take: 1,000 / `throughput_sps` GPU-seconds per 1,000. CPU rows have
  none.
- Price: core-hours x `price_per_core_hour` + GPU-hours x `price_per_gpu_hour` for 1,000,000 inferences, in
  whatever currency the prices are in. No price is shown unless every resource the row used has one (a GPU row
  without a GPU price has none): a cost that leaves out its largest part would read as cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.core.errors import ConfigError
from tasks.core.metrics import number

INFERENCES_PER_FIGURE = 1_000  # core-seconds and GPU-seconds are per this many inferences
INFERENCES_PER_PRICE = 1_000_000  # the price is of this many inferences
SECONDS_PER_HOUR = 3600.0
GPUS_PER_SERVER = 1  # a `device=gpu` server is given one GPU (tasks/serve/options.py)


@dataclass(frozen=True)
class Prices:
    """What a run was told compute costs: per core-hour and per GPU-hour (None: not given, no money shown)."""

    per_core_hour: float | None = None
    per_gpu_hour: float | None = None

    def __post_init__(self) -> None:
        for name, value in (("price_per_core_hour", self.per_core_hour), ("price_per_gpu_hour", self.per_gpu_hour)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
                                      or number(value) is None):
                raise ConfigError(name, value, "must be a number >= 0 (the price of one hour, in any currency) or "
                                               "null (no money shown)")


def core_s_per_1k(server_cpu_us_per_request: object, batch_size: object) -> float | None:
    """Server CPU-core-seconds per 1,000 inferences from the CPU time per request and the samples in a request."""
    per_request_us, batch = number(server_cpu_us_per_request), number(batch_size)
    if per_request_us is None or not batch or batch < 1:
        return None
    return per_request_us / batch / 1e6 * INFERENCES_PER_FIGURE


def gpu_s_per_1k(device: object, throughput_sps: object) -> float | None:
    """GPU-seconds per 1,000 inferences of a GPU row (one GPU held whole while it serves); None on a CPU."""
    sps = number(throughput_sps)
    if device != "gpu" or not sps or sps <= 0:
        return None
    return GPUS_PER_SERVER * INFERENCES_PER_FIGURE / sps


def price_per_million(core_s: float | None, gpu_s: float | None, device: object, prices: Prices) -> float | None:
    """The price of 1,000,000 inferences, or None where a resource the row used has no figure or no price."""
    if core_s is None or prices.per_core_hour is None:
        return None
    if device == "gpu" and (gpu_s is None or prices.per_gpu_hour is None):
        return None
    scale = INFERENCES_PER_PRICE / INFERENCES_PER_FIGURE / SECONDS_PER_HOUR  # figure-seconds -> hours per million
    price = core_s * scale * prices.per_core_hour
    if device == "gpu":
        price += gpu_s * scale * prices.per_gpu_hour
    return price


def cost_fields(row: dict, prices: Prices) -> dict[str, float | None]:
    """The cost columns of a measured row (null where its figures are missing) and the prices they were read at."""
    core_s = core_s_per_1k(row.get("server_cpu_us_per_request"), row.get("batch_size"))
    gpu_s = gpu_s_per_1k(row.get("device"), row.get("throughput_sps"))
    return {"server_core_s_per_1k": core_s, "gpu_s_per_1k": gpu_s,
            "price_per_million": price_per_million(core_s, gpu_s, row.get("device"), prices),
            "price_per_core_hour": prices.per_core_hour, "price_per_gpu_hour": prices.per_gpu_hour}
