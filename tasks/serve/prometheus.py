"""Reading the Prometheus text exposition format a server's metrics endpoint serves: the few sums the project
reads (request counters, histograms' `_sum` and `_count`, Triton's counts), not a client library."""

from __future__ import annotations

import re
import urllib.request

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')
SCRAPE_TIMEOUT_S = 2.0


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line; comments and unreadable lines are skipped."""
    out = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if not match:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        labels = {m["key"]: m["value"] for m in LABEL.finditer(match["labels"] or "")}
        out.append((match["name"], labels, value))
    return out


def total(text_or_samples: str | list, name: str, **labels: str) -> float | None:
    """The sum of `name`'s samples whose labels include `labels`; None when there is no such sample."""
    found = samples(text_or_samples) if isinstance(text_or_samples, str) else text_or_samples
    values = [v for n, have, v in found if n == name and all(have.get(k) == want for k, want in labels.items())]
    return sum(values) if values else None


def scrape(url: str, timeout_s: float = SCRAPE_TIMEOUT_S) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return resp.read().decode()
