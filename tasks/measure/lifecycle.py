"""How a server lives, per server life (a start, its load points, its stop): the figures the rows it measured carry
(schema 1.6) and the record of them in the session's timeline (`logs/sessions.json`, key `lifecycle`).

    start ──ready (startup_s)──▶ first answer that passes the served-output check (first_correct_s)
        ──idle reading (idle_rss_mb, server_processes, server_threads)──▶ capability probes
        ──every load point: its peak RSS, and a reading after it (the server idle again)──▶ stop

`session_rss_peak_mb` is the highest of the idle reading, every point's peak and every reading after a point;
`rss_growth_mb` is the reading after the life's last point less the reading after its first (null with fewer than
two points): memory the server kept from the night's load, not the buffers a higher load needs while it runs. A
restarted server is a new life with its own figures. Nothing here judges: tasks/validate checks the figures'
shape, and a capability finding never fails a row (tasks/measure/capabilities.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tasks.core.metrics import number
from tasks.loadgen.resources import Footprint
from tasks.measure.capabilities import CapabilityCheck, checks_record
from tasks.serve.launchers.base import RuntimeSize
from tasks.serve.lines import LineCount

LIFECYCLE_COLUMNS = ("first_correct_s", "idle_rss_mb", "session_rss_peak_mb", "rss_growth_mb", "server_processes",
                     "server_threads", "runtime_size_mb")


@dataclass
class ServerLifeProfile:
    """What one server life showed: its start-up, its first correct answer, its idle size, its memory over its load
    points, what it runs from, what it can do (probed) and what the project wrote to serve it."""

    startup_s: float
    first_correct_s: float | None
    idle: Footprint | None
    runtime: RuntimeSize
    lines: LineCount | None
    capabilities: list[CapabilityCheck] = field(default_factory=list)
    points: list[dict] = field(default_factory=list)  # per load point: its cell, peak RSS and the reading after it
    rows: list[dict] = field(default_factory=list)  # the rows this life produced (they get its figures at the end)

    def after_point(self, row: dict, footprint: Footprint | None) -> None:
        """A load point of this life ended: its row, and the server's size read after it."""
        self.rows.append(row)
        self.points.append({"cell": _cell_label(row), "peak_rss_mb": number(row.get("server_rss_mb")),
                            "after": footprint.to_dict() if footprint else None})

    def rss_growth_mb(self) -> float | None:
        after = [p["after"]["rss_mb"] for p in self.points if p["after"] and p["after"]["rss_mb"] is not None]
        return after[-1] - after[0] if len(after) >= 2 else None

    def rss_peak_mb(self) -> float | None:
        values = [self.idle.rss_mb if self.idle else None, *(p["peak_rss_mb"] for p in self.points),
                  *(p["after"]["rss_mb"] for p in self.points if p["after"])]
        present = [v for v in values if v is not None]
        return max(present) if present else None

    def row_fields(self) -> dict:
        """The columns every row of this life carries."""
        size = self.runtime.size_bytes
        return {
            "first_correct_s": self.first_correct_s,
            "idle_rss_mb": self.idle.rss_mb if self.idle else None,
            "session_rss_peak_mb": self.rss_peak_mb(),
            "rss_growth_mb": self.rss_growth_mb(),
            "server_processes": self.idle.processes if self.idle else None,
            "server_threads": self.idle.threads if self.idle else None,
            "runtime_size_mb": size / 2**20 if size is not None else None,
            **feature_fields(self.capabilities, self.lines),
        }

    def record(self) -> dict:
        """This life in the session's timeline: every figure and every reading it came from."""
        return {"startup_s": self.startup_s, "first_correct_s": self.first_correct_s,
                "idle": self.idle.to_dict() if self.idle else None, "points": self.points,
                "session_rss_peak_mb": self.rss_peak_mb(), "rss_growth_mb": self.rss_growth_mb(),
                "runtime_size": self.runtime.to_dict(),
                "findings": [c.to_dict() for c in self.capabilities if c.finding]}

    def apply(self) -> None:
        """Put this life's figures on every row it produced."""
        fields = self.row_fields()
        for row in self.rows:
            row.update(fields)


def feature_fields(capabilities: list[CapabilityCheck], lines: LineCount | None) -> dict:
    """The features and ease-of-use columns: the capability checks and the lines of config and code."""
    return {
        "capabilities": checks_record(capabilities) if capabilities else None,
        "capability_findings": sum(c.finding for c in capabilities) if capabilities else None,
        "config_lines": lines.config_lines if lines else None,
        "code_lines": lines.code_lines if lines else None,
        "serving_files": json.dumps(lines.to_dict(), sort_keys=True) if lines else None,
    }


def _cell_label(row: dict) -> str:
    return f"{row.get('protocol')} b{row.get('batch_size')} {row.get('mode')} {row.get('load')}"
