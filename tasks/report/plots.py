"""Plots as inline SVG text, drawn by our own code: no script, font or stylesheet from anywhere.

The same input gives the same bytes (fixed palette by series order, coordinates rounded to 0.1 px, numbers
formatted by fixed rules), so a report rebuilt from the store is byte-identical to the published one. Hovering
a point shows its values through SVG's own `<title>` (no JavaScript).

    line_chart("p99 against throughput", [Series("triton/onnx", ((3867.0, 1.44), ...))], "req/s", "ms")
    bar_chart("Throughput per CPU core", [("triton/onnx", 4201.3), ...], "req/s per core")
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tasks.report.formatting import escape, format_value

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


def _svg_open(kind: str, title: str, width: int, height: int) -> list[str]:
    t = escape(title)
    return [f"<svg xmlns='http://www.w3.org/2000/svg' class='plot' data-plot='{escape(kind)}' "
            f"width='{width}' height='{height}' viewBox='0 0 {width} {height}' role='img' aria-label='{t}' "
            f"font-family='system-ui,sans-serif' font-size='11'>",
            f"<text x='{MARGIN_LEFT_PX}' y='16' font-size='13' font-weight='bold'>{t}</text>"]


def line_chart(kind: str, title: str, series: Sequence[Series], x_label: str, y_label: str,
               x_ticks: Sequence[tuple[float, str]] | None = None, zero_y: bool = True) -> str:
    """Lines with point markers, one per series, legend on the right. `kind` names the plot (data-plot)
    for tests and styles; `x_ticks` replaces the x axis' numbers with labels (e.g. dates at 0, 1, 2...)."""
    drawn = [s for s in series if s.points]
    parts = _svg_open(kind, title, WIDTH_PX, HEIGHT_PX)
    if not drawn:
        parts.append(f"<text x='{MARGIN_LEFT_PX}' y='{HEIGHT_PX // 2}' fill='#888'>no points to draw</text></svg>")
        return "".join(parts)
    xs = [x for s in drawn for x, _ in s.points]
    ys = [y for s in drawn for _, y in s.points]
    if x_ticks:
        lo, hi = min(x for x, _ in x_ticks), max(x for x, _ in x_ticks)
        x_axis = Axis(lo - 0.5, hi + 0.5, False, tuple(x for x, _ in x_ticks))
    else:
        x_axis = Axis.fit(xs)
    y_axis = Axis.fit(ys, zero=zero_y)
    plot_w = WIDTH_PX - MARGIN_LEFT_PX - MARGIN_RIGHT_PX
    plot_h = HEIGHT_PX - MARGIN_TOP_PX - MARGIN_BOTTOM_PX

    def px(x: float) -> float:
        return MARGIN_LEFT_PX + x_axis.frac(x) * plot_w

    def py(y: float) -> float:
        return MARGIN_TOP_PX + (1 - y_axis.frac(y)) * plot_h

    bottom, right = MARGIN_TOP_PX + plot_h, MARGIN_LEFT_PX + plot_w
    parts.append(f"<rect x='{MARGIN_LEFT_PX}' y='{MARGIN_TOP_PX}' width='{plot_w}' height='{plot_h}' "
                 "fill='none' stroke='#999'/>")
    x_names = dict(x_ticks or ())
    for t in x_axis.ticks:
        if x_axis.lo <= t <= x_axis.hi:
            x = _num(px(t))
            parts.append(f"<line x1='{x}' y1='{MARGIN_TOP_PX}' x2='{x}' y2='{bottom}' stroke='#eee'/>"
                         f"<text x='{x}' y='{bottom + 14}' text-anchor='middle'>"
                         f"{escape(x_names.get(t, _tick_text(t)))}</text>")
    for t in y_axis.ticks:
        if y_axis.lo <= t <= y_axis.hi:
            y = _num(py(t))
            parts.append(f"<line x1='{MARGIN_LEFT_PX}' y1='{y}' x2='{right}' y2='{y}' stroke='#eee'/>"
                         f"<text x='{MARGIN_LEFT_PX - 4}' y='{y}' text-anchor='end' dominant-baseline='middle'>"
                         f"{_tick_text(t)}</text>")
    x_scale = " (log scale)" if x_axis.log else ""
    y_scale = " (log scale)" if y_axis.log else ""
    parts.append(f"<text x='{_num(MARGIN_LEFT_PX + plot_w / 2)}' y='{HEIGHT_PX - 8}' text-anchor='middle'>"
                 f"{escape(x_label + x_scale)}</text>"
                 f"<text transform='translate(14,{_num(MARGIN_TOP_PX + plot_h / 2)}) rotate(-90)' "
                 f"text-anchor='middle'>{escape(y_label + y_scale)}</text>")
    for i, s in enumerate(drawn):
        color, dash = PALETTE[i % len(PALETTE)], DASHES[(i // len(PALETTE)) % len(DASHES)]
        name = escape(s.name)
        coords = " ".join(f"{_num(px(x))},{_num(py(y))}" for x, y in s.points)
        dash_attr = f" stroke-dasharray='{dash}'" if dash else ""
        parts.append(f"<g class='series' data-series='{name}'><polyline points='{coords}' fill='none' "
                     f"stroke='{color}' stroke-width='2'{dash_attr}/>")
        for j, (x, y) in enumerate(s.points):
            label = f"{s.labels[j]}: " if j < len(s.labels) else ""
            tip = escape(f"{s.name} {label}{format_value(x)} {x_label}, {format_value(y)} {y_label}")
            parts.append(f"<circle cx='{_num(px(x))}' cy='{_num(py(y))}' r='3' fill='{color}'>"
                         f"<title>{tip}</title></circle>")
        ly = MARGIN_TOP_PX + 6 + 16 * i
        parts.append(f"<line x1='{right + 10}' y1='{ly}' x2='{right + 30}' y2='{ly}' stroke='{color}' "
                     f"stroke-width='2'{dash_attr}/><text x='{right + 35}' y='{ly}' dominant-baseline='middle'>"
                     f"{name}</text></g>")
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(kind: str, title: str, bars: Sequence[tuple[str, float]], unit: str) -> str:
    """Horizontal bars, one per (label, value), in the given order, each with its value written."""
    bar_h, gap, label_w = 16, 6, 170
    height = MARGIN_TOP_PX + len(bars) * (bar_h + gap) + 30
    width = WIDTH_PX - 100
    parts = _svg_open(kind, title, width, height)
    top = max((v for _, v in bars if math.isfinite(v)), default=0.0) or 1.0
    span = width - label_w - 90
    for i, (label, value) in enumerate(bars):
        y = MARGIN_TOP_PX + i * (bar_h + gap)
        w = max(0.0, value / top * span) if math.isfinite(value) else 0.0
        text = escape(label)
        parts.append(f"<g class='bar' data-series='{text}'><text x='{label_w - 6}' y='{_num(y + bar_h / 2)}' "
                     f"text-anchor='end' dominant-baseline='middle'>{text}</text>"
                     f"<rect x='{label_w}' y='{y}' width='{_num(w)}' height='{bar_h}' "
                     f"fill='{PALETTE[i % len(PALETTE)]}'><title>{text}: {format_value(value)} "
                     f"{escape(unit)}</title></rect>"
                     f"<text x='{_num(label_w + w + 4)}' y='{_num(y + bar_h / 2)}' dominant-baseline='middle'>"
                     f"{format_value(value)}</text></g>")
    parts.append(f"<text x='{label_w}' y='{height - 8}'>{escape(unit)}</text></svg>")
    return "".join(parts)


def stacked_bar_chart(kind: str, title: str, bars: Sequence[tuple[str, Sequence[tuple[str, float]], str]],
                      unit: str, markers: Sequence[float | None] = ()) -> str:
    """Horizontal stacked bars: per bar (label, segments (name, value) in order, note), each segment name one colour
    for the whole chart (legend below), the total written after the bar, the note (e.g. "none reported") when a
    bar has no segment. `markers` (per bar, optional): a value drawn as a black tick across its bar."""
    bar_h, gap, label_w = 16, 8, 210
    names = list(dict.fromkeys(name for _, segments, _ in bars for name, _ in segments))
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    legend_rows = (len(names) + 2) // 3
    height = MARGIN_TOP_PX + len(bars) * (bar_h + gap) + 30 + 16 * legend_rows
    width = WIDTH_PX + 120
    parts = _svg_open(kind, title, width, height)
    totals = [sum(v for _, v in segments if math.isfinite(v) and v > 0) for _, segments, _ in bars]
    top = max([*totals, *(m for m in markers if m is not None and math.isfinite(m))], default=0.0) or 1.0
    span = width - label_w - 110
    for i, (label, segments, note) in enumerate(bars):
        y = MARGIN_TOP_PX + i * (bar_h + gap)
        text = escape(label)
        parts.append(f"<g class='bar' data-series='{text}'><text x='{label_w - 6}' y='{_num(y + bar_h / 2)}' "
                     f"text-anchor='end' dominant-baseline='middle'>{text}</text>")
        x = float(label_w)
        for name, value in segments:
            if not math.isfinite(value) or value <= 0:
                continue
            w = value / top * span
            parts.append(f"<rect class='segment' data-segment='{escape(name)}' x='{_num(x)}' y='{y}' "
                         f"width='{_num(w)}' height='{bar_h}' fill='{colours[name]}'><title>{text}: "
                         f"{escape(name)} {format_value(value)} {escape(unit)}</title></rect>")
            x += w
        marker = markers[i] if i < len(markers) else None
        if marker is not None and math.isfinite(marker) and marker > 0:
            mx = _num(label_w + marker / top * span)
            parts.append(f"<line class='marker' x1='{mx}' y1='{y - 2}' x2='{mx}' y2='{y + bar_h + 2}' stroke='#000' "
                         f"stroke-width='2'><title>{text}: {format_value(marker)} {escape(unit)}</title></line>")
        written = f"{format_value(totals[i])} {unit}" if totals[i] else note
        if totals[i] and note:
            written += f" ({note})"
        parts.append(f"<text x='{_num(x + 4)}' y='{_num(y + bar_h / 2)}' dominant-baseline='middle'>"
                     f"{escape(written)}</text></g>")
    legend_y = MARGIN_TOP_PX + len(bars) * (bar_h + gap) + 8
    for j, name in enumerate(names):
        lx, ly = label_w + (j % 3) * 200, legend_y + 16 * (j // 3)
        parts.append(f"<rect x='{lx}' y='{ly}' width='12' height='12' fill='{colours[name]}'/>"
                     f"<text x='{lx + 16}' y='{ly + 6}' dominant-baseline='middle'>{escape(name)}</text>")
    parts.append("</svg>")
    return "".join(parts)
