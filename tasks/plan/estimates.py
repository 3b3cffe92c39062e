"""What each stage of a night costs, estimated before it runs: from the suite's last nights on this host where they
measured it (tasks/plan/past_nights.py), else from the Params and the model's spec (a first night).

    costs = Estimator(config, nights)
    costs.cell(cell)             # Estimate(seconds, source): the cell's load points, warm-ups and longer looks
    costs.session(session)       # the session's own time: start-up, served-output check, probes, stop, the task gap
    costs.conversion(conv)       # none where the artifact cache holds it
    costs.fixed()                # plan, validation, the regression check's reads, publishing (their last actuals)
    costs.regress_point(session) # one changed load point's regression work: a duet's first look and a size's

Each figure is the median over the last nights that measured it (at most ESTIMATE_NIGHTS), so one slow night moves
it little; its `source` says which nights or which default it rests on. Nothing here measures or decides what runs
(tasks/plan/night.py fits the night).

From timelines (logs/sessions.json): a cell's cost is the time from its first load point's start to its last one's
end, longer looks included (a sweep's points are the timeline entries `<cell id>@<load>`); a session's own time is
its measuring task's time (`task_begin` to `task_end`, recorded since budgets exist; before, the server life with
ENGINE_SPEED_S added) less its cells' points.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from tasks.convert.core import artifact_key, check_conversion
from tasks.core.confidence import requests_to_hold
from tasks.core.paths import artifacts_root
from tasks.core.results import OVERLOAD_MODE
from tasks.core.spec import load_spec
from tasks.core.workloads import TRACE_MODE, TRACE_MODES
from tasks.loadgen.overload import phases_for
from tasks.loadgen.sweep import DEFAULT_MAX_POINTS, MAX_CONFIRMS, doubling
from tasks.loadgen.trace import planned_replay_s
from tasks.plan.cells import Cell, Session, lengthens
from tasks.plan.config import RunConfig
from tasks.plan.past_nights import PastNight

ESTIMATE_NIGHTS = 3  # the median of at most this many of the last nights that measured a thing
POINT_OVERHEAD_S = 1.0  # a load point beyond its warm-up and measured time: the generator's start, the health check
SESSION_OVERHEAD_S = 30.0  # a first night's session: start-up, served-output checks, engine speed, probes, stop, gap
ENGINE_SPEED_S = 3.0  # the engine's own speed in process, measured before the server starts (not in its life)
CACHED_CONVERSION_S = 2.0  # a conversion the artifact cache holds: a hash and a record read
FIRST_CONVERSION_S = 60.0  # a first night's uncached conversion (ResNet-50 to ONNX here: 23 s with its source built)
FIXED_DEFAULTS_S = {"plan": 15.0, "validate": 30.0, "regress_check": 30.0, "publish": 90.0}
NEEDED_MARGIN = 1.25  # as tasks/measure/bounds.py: a longer look runs this much beyond the requests that decide it


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # "last nights: <run ids>", or the default it rests on

    def to_dict(self) -> dict:
        return {"seconds": round(self.seconds, 1), "source": self.source}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def cell_span_s(events: dict, cell_id: str) -> float | None:
    """The seconds a timeline's `cells` spent on one planned cell: its own entry's load points and looks, or a
    sweep's points (`<cell id>@<load>`); None where the timeline holds no such point."""
    total, found = 0.0, False
    for key, entry in events.items():
        if key != cell_id and not key.startswith(f"{cell_id}@"):
            continue
        begin = entry.get("load_begin")
        ends = [entry.get("load_end"), *(look.get("end") for look in entry.get("lengthen") or [])]
        ends = [e for e in ends if e is not None]
        if begin is None or not ends:
            continue
        total += max(ends) - begin
        found = True
    return total if found else None


class Estimator:
    """The night's estimates, from `nights` (the suite's last nights on this host, newest first)."""

    def __init__(self, config: RunConfig, nights: list[PastNight]) -> None:
        self.config = config
        self.nights = nights

    # --- load points -------------------------------------------------------------------------------------------
    def _point_s(self) -> float:
        return self.config.warmup_s + self.config.duration_s + POINT_OVERHEAD_S

    def cell(self, cell: Cell) -> Estimate:
        """A cell's load points, warm-ups and longer looks."""
        if cell.skip:
            return Estimate(0.0, "skipped: its server lacks the wire")
        seen = []
        for night in self.nights:
            for timeline in night.timelines:
                span = cell_span_s((timeline or {}).get("cells") or {}, cell.cell_id)
                if span is not None:
                    seen.append((night.run_id, span))
                    break
            if len(seen) >= ESTIMATE_NIGHTS:
                break
        if seen:
            return Estimate(_median([s for _, s in seen]), "last nights: " + ", ".join(r for r, _ in seen))
        return self._first_night_cell(cell)

    def _first_night_cell(self, cell: Cell) -> Estimate:
        config, point = self.config, self._point_s()
        if cell.mode == OVERLOAD_MODE:
            phases = phases_for(1.0, cell.load, config.duration_s)
            return Estimate(phases.total_s + config.request_timeout_s + POINT_OVERHEAD_S,
                            "defaults: one overload phase (before, burst, after) and its timeout")
        if cell.mode in TRACE_MODES:
            searched = cell.mode != TRACE_MODE
            return Estimate(planned_replay_s(cell.workload, cell.load, searched) + POINT_OVERHEAD_S,
                            f"defaults: {'a speed search of the trace' if searched else 'the trace replayed once'}")
        if cell.mode == "concurrency-sweep":
            points, what = len(doubling(config.workers, int(cell.load))), "a doubling sweep's points"
        elif cell.mode == "rate-search":
            points, what = DEFAULT_MAX_POINTS, "a rate search's most points"
        else:
            points, what = 1, "one point"
        seconds = points * point
        if lengthens(cell, config):
            look = config.warmup_s + self.look_s(cell.model)
            looks = MAX_CONFIRMS if cell.mode == "rate-search" else 1
            seconds += looks * look
            what += f" and {looks} longer look(s) of {look:.0f} s"
        return Estimate(seconds, f"defaults: {what}")

    def model_rps(self, model: str) -> float | None:
        """The model's slowest stack's median throughput at its lowest load on the last nights (None: unmeasured)."""
        for night in self.nights:
            rates = [r.get("throughput_rps") for r in night.rows if r.get("model") == model
                     and r.get("status") == "ok" and r.get("mode") == "concurrency" and r.get("load") == 1.0]
            rates = [float(x) for x in rates if isinstance(x, (int, float)) and x > 0]
            if rates:
                return min(rates)
        return None

    def look_s(self, model: str) -> float:
        """A longer look's measured seconds: the requests that decide a bound with none slow, at the model's speed
        (NEEDED_MARGIN beyond them), within duration_s and max_point_s; max_point_s where the speed is unknown."""
        config = self.config
        longest = float(config.max_point_s or config.duration_s)
        rps = self.model_rps(model)
        if rps is None:
            return longest
        needed = requests_to_hold(confidence_pct=config.confidence_pct, looks=2)
        return min(longest, max(config.duration_s, NEEDED_MARGIN * needed / rps))

    # --- sessions ----------------------------------------------------------------------------------------------
    def session(self, session: Session) -> Estimate:
        """The session's own time beyond its cells: start-up, served-output checks, the engine's speed, probes, stop
        and the measuring task's start."""
        seen = []
        for night in self.nights:
            for timeline in night.timelines:
                if not timeline or timeline.get("session_id") != session.session_id:
                    continue
                own = self._session_own_s(timeline)
                if own is not None:
                    seen.append((night.run_id, own))
                break
            if len(seen) >= ESTIMATE_NIGHTS:
                break
        if seen:
            return Estimate(_median([s for _, s in seen]), "last nights: " + ", ".join(r for r, _ in seen))
        return Estimate(SESSION_OVERHEAD_S, f"defaults: {SESSION_OVERHEAD_S:g} s a session")

    @staticmethod
    def _session_own_s(timeline: dict) -> float | None:
        events = timeline.get("cells") or {}
        points = sum(span for key in events if (span := cell_span_s({key: events[key]}, key)) is not None)
        if timeline.get("task_begin") is not None and timeline.get("task_end") is not None:
            return max(0.0, timeline["task_end"] - timeline["task_begin"] - points)
        if timeline.get("start") is not None and timeline.get("stopped") is not None:
            return max(0.0, timeline["stopped"] - timeline["start"] - points) + ENGINE_SPEED_S
        return None

    # --- conversions and the fixed stages ----------------------------------------------------------------------
    def conversion(self, conversion: dict) -> Estimate:
        """None where the artifact cache holds the artifact; else its last uncached conversion's time."""
        spec = load_spec(conversion["model"])
        fmt = conversion["format"]
        if any(hop.needs_gpu for hop, _ in check_conversion(spec, fmt)):
            return Estimate(CACHED_CONVERSION_S, "a GPU conversion: skipped where no GPU is")
        try:
            key = artifact_key(spec, fmt)
        except Exception:  # noqa: BLE001 - a source that cannot be hashed here: the conversion will say why
            key = ""
        if key and (artifacts_root() / conversion["model"] / fmt / key[:20]).is_dir():
            return Estimate(CACHED_CONVERSION_S, "in the artifact cache")
        seen = [(n.run_id, c["seconds"]) for n in self.nights for c in n.conversions
                if c and (c.get("model"), c.get("format")) == (conversion["model"], fmt)
                and not c.get("cache_hit") and isinstance(c.get("seconds"), (int, float))][:ESTIMATE_NIGHTS]
        if seen:
            return Estimate(_median([s for _, s in seen]), "uncached on the last nights: " +
                            ", ".join(r for r, _ in seen))
        return Estimate(FIRST_CONVERSION_S, f"defaults: {FIRST_CONVERSION_S:g} s an uncached conversion")

    def fixed(self) -> dict[str, Estimate]:
        """The stages every night runs once: the plan, validation, the regression check's reads, publishing."""
        out = {}
        for stage, default in FIXED_DEFAULTS_S.items():
            seen = [(n.run_id, ((n.night.get("stages") or {}).get(stage) or {}).get("actual_s")) for n in self.nights]
            seen = [(r, s) for r, s in seen if isinstance(s, (int, float))][:ESTIMATE_NIGHTS]
            out[stage] = (Estimate(_median([s for _, s in seen]), "last nights: " + ", ".join(r for r, _ in seen))
                          if seen else Estimate(default, f"defaults: {default:g} s"))
        return out

    # --- regression work ---------------------------------------------------------------------------------------
    def regress_point(self, session: Session) -> Estimate:
        """One changed load point's regression work, as a night spends it first: its duet's first look
        (`duet_min_pairs` pairs, each two fresh servers and one point) and its size's first look (four interleaved
        rounds, each side alone on a fresh server). A change that is found needs both; one that is not, the duet."""
        config = self.config
        own = self.session(session).seconds
        point = self._point_s()
        pair = own + point
        size_round = 2 * (own + point)
        first_rounds = min(4, config.size_rounds)
        seconds = config.duet_min_pairs * pair + first_rounds * size_round
        return Estimate(seconds, f"{config.duet_min_pairs} duet pairs of ~{pair:.0f} s and {first_rounds} size "
                                 f"rounds of ~{size_round:.0f} s")

    def aa_duet(self, control: Session | None, pairs: int) -> Estimate:
        """Tonight's A/A duet of the control cell (it sets the duets' noise floor)."""
        if control is None or not self.config.duets:
            return Estimate(0.0, "no control cell, or Param duets off")
        pair = self.session(control).seconds + self._point_s()
        return Estimate(pairs * pair, f"{pairs} A/A pairs of ~{pair:.0f} s")


def ceil_nights(total_s: float, per_night_s: float) -> int | None:
    """How many nights `total_s` of work takes at `per_night_s` a night (None: no night has room for it)."""
    if total_s <= 0:
        return 1
    if per_night_s <= 0:
        return None
    return max(1, math.ceil(total_s / per_night_s - 1e-9))

