"""Plots as inline SVG text, drawn by our own code: no script, font or stylesheet from anywhere.

The same input gives the same bytes (fixed palette by series order, coordinates rounded to 0.1 px, numbers
formatted by fixed rules), so a report rebuilt from the store is byte-identical to the published one. Hovering
a point shows its values through SVG's own `<title>` (no JavaScript).

A line chart's point may carry its 95 % interval, drawn as a vertical bar from its lower to its upper end; an
end that is not known (too few requests to bound the percentile from above or below) runs to the plot's edge
and ends open (an arrowhead at that edge). A point whose figure is only a lower bound (too few requests for the
percentile: the largest latency seen) is drawn as a hollow triangle pointing up; the legend says what both mean.

    line_chart("p99 against throughput", [Series("triton/onnx", ((3867.0, 1.44), ...))], "req/s", "ms")
    bar_chart("Throughput per CPU core", [("triton/onnx", 4201.3), ...], "req/s per core")
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from tasks.report.formatting import format_value
from tasks.report.templating import render

# Tableau 10: distinguishable, also in grey-scale print; assigned by series position.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")
DASHES = ("", "6 3", "2 2", "8 3 2 3")  # after the palette is used up, the next colours repeat dashed
WIDTH_PX, HEIGHT_PX = 640, 300
MARGIN_LEFT_PX, MARGIN_RIGHT_PX, MARGIN_TOP_PX, MARGIN_BOTTOM_PX = 64, 190, 30, 46
LOG_SCALE_MIN_RATIO = 30.0  # an axis whose values span more than this factor is drawn on a log scale
TICKS = 5


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]  # (x, y), drawn in this order
    labels: tuple[str, ...] = ()  # per point, shown on hover (e.g. "concurrency 4"); empty: none
    # per point, its 95 % interval (low, high), None for an end not known; None or empty: no bar
    intervals: tuple[tuple[float | None, float | None] | None, ...] = ()
    at_least: tuple[bool, ...] = ()  # per point, True: its y is only a lower bound ("≥ y"); empty: none

    def interval(self, j: int) -> tuple[float | None, float | None] | None:
        """Point j's interval, None without one (neither end known)."""
        found = self.intervals[j] if j < len(self.intervals) else None
        return found if found is not None and found != (None, None) else None

    def is_lower_bound(self, j: int) -> bool:
        return j < len(self.at_least) and self.at_least[j]


def _num(value: float) -> str:
    """A coordinate: 0.1 px, no negative zero."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def _linear_ticks(lo: float, hi: float) -> list[float]:
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / TICKS
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(lo / step)
    last = math.ceil(hi / step)
    return [round(i * step, 12) for i in range(first, last + 1)]


def _log_ticks(lo: float, hi: float) -> list[float]:
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks = [10.0 ** e for e in range(first, last + 1)]
    if len(ticks) <= 3:  # few decades: 1-2-5 steps
        ticks = [m * 10.0 ** e for e in range(first, last + 1) for m in (1, 2, 5)]
        ticks = [t for t in ticks if lo / 2.01 <= t <= hi * 2.01]
    return ticks


@dataclass(frozen=True)
class Axis:
    lo: float
    hi: float
    log: bool
    ticks: tuple[float, ...]

    @classmethod
    def fit(cls, values: Sequence[float], zero: bool = True) -> Axis:
        """An axis for these values: linear from 0 (or the data), log when they span LOG_SCALE_MIN_RATIO."""
        finite = [v for v in values if math.isfinite(v)]
        positive = [v for v in finite if v > 0]
        if positive and len(positive) == len(finite) and max(positive) / min(positive) > LOG_SCALE_MIN_RATIO:
            ticks = _log_ticks(min(positive), max(positive))
            return cls(min(ticks[0], min(positive)), max(ticks[-1], max(positive)), True, tuple(ticks))
        lo = min([*finite, 0.0] if zero else finite or [0.0])
        hi = max(finite or [1.0])
        ticks = _linear_ticks(lo, hi)
        return cls(ticks[0], ticks[-1], False, tuple(ticks))

    def frac(self, value: float) -> float:
        if self.log:
            return (math.log10(value) - math.log10(self.lo)) / ((math.log10(self.hi) - math.log10(self.lo)) or 1.0)
        return (value - self.lo) / ((self.hi - self.lo) or 1.0)


def _tick_text(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.6g}"


def _frame(kind: str, title: str, width: int, height: int) -> dict:
    """What every plot's template opens with: its kind, title and size, and the plot area's edges."""
    plot_w = WIDTH_PX - MARGIN_LEFT_PX - MARGIN_RIGHT_PX
    plot_h = HEIGHT_PX - MARGIN_TOP_PX - MARGIN_BOTTOM_PX
    return {"kind": kind, "title": title, "width": width, "height": height, "left": MARGIN_LEFT_PX,
            "top": MARGIN_TOP_PX, "plot_w": plot_w, "plot_h": plot_h, "bottom": MARGIN_TOP_PX + plot_h,
            "right": MARGIN_LEFT_PX + plot_w, "middle": height // 2}


def line_chart(kind: str, title: str, series: Sequence[Series], x_label: str, y_label: str,
               x_ticks: Sequence[tuple[float, str]] | None = None, zero_y: bool = True) -> Markup:
    """Lines with point markers, one per series, legend on the right, each point's interval (where its series has
    one) as a bar and a lower bound as a hollow triangle, the legend's key saying so. `kind` names the plot
    (data-plot) for tests and styles; `x_ticks` replaces the x axis' numbers with labels (e.g. dates at 0, 1, 2...)."""
    plot = _frame(kind, title, WIDTH_PX, HEIGHT_PX)
    drawn = [s for s in series if s.points]
    if not drawn:
        return render("line_chart.svg", plot=plot, series=[])
    xs = [x for s in drawn for x, _ in s.points]
    ys = [y for s in drawn for _, y in s.points]
    ys += [end for s in drawn for j in range(len(s.points)) for end in (s.interval(j) or ()) if end is not None]
    if x_ticks:
        lo, hi = min(x for x, _ in x_ticks), max(x for x, _ in x_ticks)
        x_axis = Axis(lo - 0.5, hi + 0.5, False, tuple(x for x, _ in x_ticks))
    else:
        x_axis = Axis.fit(xs)
    y_axis = Axis.fit(ys, zero=zero_y)

    def px(x: float) -> float:
        return MARGIN_LEFT_PX + x_axis.frac(x) * plot["plot_w"]

    def py(y: float) -> float:
        return MARGIN_TOP_PX + (1 - y_axis.frac(y)) * plot["plot_h"]

    x_names = dict(x_ticks or ())
    lines = []
    for i, s in enumerate(drawn):
        points, bars = [], []
        for j, (x, y) in enumerate(s.points):
            at = f"{s.labels[j]}: " if j < len(s.labels) else ""
            interval = s.interval(j)
            tip = (f"{s.name} {at}{format_value(x)} {x_label}, {'≥ ' if s.is_lower_bound(j) else ''}"
                   f"{format_value(y)} {y_label}{_interval_text(interval)}")
            points.append({"x": _num(px(x)), "y": _num(py(y)), "tip": tip,
                           "triangle": _triangle(px(x), py(y)) if s.is_lower_bound(j) else ""})
            if interval is not None:
                bars.append(_bar(px(x), py, interval, plot))
        lines.append({"name": s.name, "color": PALETTE[i % len(PALETTE)],
                      "dash": DASHES[(i // len(PALETTE)) % len(DASHES)],
                      "coords": " ".join(f"{_num(px(x))},{_num(py(y))}" for x, y in s.points), "points": points,
                      "bars": bars, "legend_y": MARGIN_TOP_PX + 6 + 16 * i})
    key = _key(lines, MARGIN_TOP_PX + 6 + 16 * len(drawn) + 8, plot["right"] + 20)
    return render("line_chart.svg", plot=plot, series=lines, key=key,
                  x_ticks=[(_num(px(t)), x_names.get(t, _tick_text(t))) for t in x_axis.ticks
                           if x_axis.lo <= t <= x_axis.hi],
                  y_ticks=[(_num(py(t)), _tick_text(t)) for t in y_axis.ticks if y_axis.lo <= t <= y_axis.hi],
                  x_label=x_label + (" (log scale)" if x_axis.log else ""),
                  y_label=y_label + (" (log scale)" if y_axis.log else ""),
                  x_label_at=_num(MARGIN_LEFT_PX + plot["plot_w"] / 2),
                  y_label_at=_num(MARGIN_TOP_PX + plot["plot_h"] / 2))


def _triangle(x: float, y: float) -> str:
    """A hollow triangle pointing up at (x, y): the path of a lower-bound marker."""
    return f"M{_num(x)},{_num(y - 5)} L{_num(x + 4.5)},{_num(y + 3)} L{_num(x - 4.5)},{_num(y + 3)} Z"


def _bar(x: float, py: Callable[[float], float], interval: tuple[float | None, float | None], plot: dict) -> dict:
    """A point's interval bar at x: from its low to its high end (px), each end a cap, or where not known the
    plot's edge with an arrowhead pointing out of the plot (the interval goes on beyond what is drawn)."""
    low, high = interval
    y_low = plot["bottom"] if low is None else py(low)
    y_high = plot["top"] if high is None else py(high)
    ends = []
    for y, known, out in ((y_low, low is not None, 1), (y_high, high is not None, -1)):
        if known:
            ends.append(f"M{_num(x - 3)},{_num(y)} L{_num(x + 3)},{_num(y)}")
        else:
            ends.append(f"M{_num(x - 3)},{_num(y - 5 * out)} L{_num(x)},{_num(y)} L{_num(x + 3)},{_num(y - 5 * out)}")
    return {"line": f"M{_num(x)},{_num(y_low)} L{_num(x)},{_num(y_high)}", "ends": " ".join(ends),
            "open": low is None or high is None}


def _key(lines: list[dict], top: float, x: float) -> list[dict]:
    """The legend's lines below the series' names for what the chart draws (intervals, open ends, lower bounds),
    each with its text and the path of its glyph at (x, its y); a text's second line has no glyph."""
    bars = [bar for line in lines for bar in line["bars"]]
    entries = []
    if bars:
        entries.append(("bar", "bar: 95 % interval"))
    if any(bar["open"] for bar in bars):
        entries.append(("arrow", "arrow: end not bounded"))
    if any(p["triangle"] for line in lines for p in line["points"]):
        entries += [("triangle", "≥: a lower bound only"), ("", "(too few requests)")]
    out = []
    for k, (glyph, text) in enumerate(entries):
        y = top + 16 * k
        left, right, up, down = _num(x - 3), _num(x + 3), _num(y - 6), _num(y + 6)
        path = {"bar": f"M{_num(x)},{up} L{_num(x)},{down} M{left},{up} L{right},{up} M{left},{down} L{right},{down}",
                "arrow": f"M{left},{_num(y - 1)} L{_num(x)},{up} L{right},{_num(y - 1)} M{_num(x)},{up} L{_num(x)},"
                         f"{down}",
                "triangle": _triangle(x, y)}.get(glyph, "")
        out.append({"y": _num(y), "glyph": path, "text": text})
    return out


def _interval_text(interval: tuple[float | None, float | None] | None) -> str:
    """A point's interval for its hover text: "95 % interval 1.2–3.4", an unknown end "open"."""
    if interval is None:
        return ""
    low, high = interval
    return (f" (95 % interval {'open' if low is None else format_value(low)}–"
            f"{'open' if high is None else format_value(high)})")


def bar_chart(kind: str, title: str, bars: Sequence[tuple[str, float]], unit: str) -> Markup:
    """Horizontal bars, one per (label, value), in the given order, each with its value written."""
    bar_h, gap, label_w = 16, 6, 170
    height = MARGIN_TOP_PX + len(bars) * (bar_h + gap) + 30
    width = WIDTH_PX - 100
    top = max((v for _, v in bars if math.isfinite(v)), default=0.0) or 1.0
    span = width - label_w - 90
    drawn = []
    for i, (name, value) in enumerate(bars):
        y = MARGIN_TOP_PX + i * (bar_h + gap)
        w = max(0.0, value / top * span) if math.isfinite(value) else 0.0
        drawn.append({"label": name, "y": y, "middle": _num(y + bar_h / 2), "w": _num(w),
                      "end": _num(label_w + w + 4), "color": PALETTE[i % len(PALETTE)], "value": format_value(value)})
    return render("bar_chart.svg", plot=_frame(kind, title, width, height), bars=drawn, bar_h=bar_h, label_w=label_w,
                  unit=unit)


def _stacked_bar(i: int, bar: tuple[str, Sequence[tuple[str, float]], str], total: float, marker: float | None,
                 scale: dict) -> dict:
    """One stacked bar's segments, marker and written total; `scale` holds the chart's bar_h, gap, label_w, top,
    span, unit and colours."""
    label, segments, note = bar
    y = MARGIN_TOP_PX + i * (scale["bar_h"] + scale["gap"])
    x, drawn = float(scale["label_w"]), []
    for name, value in segments:
        if not math.isfinite(value) or value <= 0:
            continue
        w = value / scale["top"] * scale["span"]
        drawn.append({"name": name, "x": _num(x), "w": _num(w), "color": scale["colours"][name],
                      "value": format_value(value)})
        x += w
    shown = None
    if marker is not None and math.isfinite(marker) and marker > 0:
        shown = {"x": _num(scale["label_w"] + marker / scale["top"] * scale["span"]), "value": format_value(marker)}
    written = f"{format_value(total)} {scale['unit']}" if total else note
    if total and note:
        written += f" ({note})"
    return {"label": label, "y": y, "middle": _num(y + scale["bar_h"] / 2), "segments": drawn, "marker": shown,
            "end": _num(x + 4), "written": written}


def stacked_bar_chart(kind: str, title: str, bars: Sequence[tuple[str, Sequence[tuple[str, float]], str]],
                      unit: str, markers: Sequence[float | None] = ()) -> Markup:
    """Horizontal stacked bars: per bar (label, segments (name, value) in order, note), each segment name one colour
    for the whole chart (legend below), the total written after the bar, the note (e.g. "none reported") when a
    bar has no segment. `markers` (per bar, optional): a value drawn as a black tick across its bar."""
    bar_h, gap, label_w = 16, 8, 210
    names = list(dict.fromkeys(name for _, segments, _ in bars for name, _ in segments))
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    height = MARGIN_TOP_PX + len(bars) * (bar_h + gap) + 30 + 16 * ((len(names) + 2) // 3)
    width = WIDTH_PX + 120
    totals = [sum(v for _, v in segments if math.isfinite(v) and v > 0) for _, segments, _ in bars]
    top = max([*totals, *(m for m in markers if m is not None and math.isfinite(m))], default=0.0) or 1.0
    scale = {"bar_h": bar_h, "gap": gap, "label_w": label_w, "top": top, "span": width - label_w - 110, "unit": unit,
             "colours": colours}
    drawn = [_stacked_bar(i, bar, totals[i], markers[i] if i < len(markers) else None, scale)
             for i, bar in enumerate(bars)]
    legend_y = MARGIN_TOP_PX + len(bars) * (bar_h + gap) + 8
    legend = [{"name": name, "color": colours[name], "x": label_w + (j % 3) * 200, "y": legend_y + 16 * (j // 3)}
              for j, name in enumerate(names)]
    return render("stacked_bar_chart.svg", plot=_frame(kind, title, width, height), bars=drawn, bar_h=bar_h,
                  label_w=label_w, unit=unit, legend=legend)
