"""Report sections about wires (each stack on its efficient wire, and what JSON costs it).

- `best_wires` / `best_wire_rows`: per model, batch size and stack (server/format), the wire whose ok rows reach the
  highest throughput, measured, not assumed (ties: the lower p99, then json, binary, grpc in that order); the
  report's headline (plots, tables, recommendation, ranking) shows each stack on that wire. A stack measured over
  one wire keeps it; one with no ok row keeps every row, so its failures show.
- `wires_section`: per model, the JSON tax of every stack measured over JSON and another wire (its best wire's
  peak throughput against JSON's, latency at its lowest closed-loop load, the payload bytes of both), and where a
  request's time goes (`server_ms`, `queue_ms`, `decode_ms`, `infer_ms`, `encode_ms`, `outside_ms`, read from what
  each stack reports) as a stacked bar per stack and wire, the engine's own time per call marked on it.
"""

from __future__ import annotations

from markupsafe import Markup

from tasks.core.metrics import number
from tasks.core.results import WIRES, row_protocol
from tasks.report.formatting import DASH, figure, size_text
from tasks.report.plots import stacked_bar_chart
from tasks.report.recommend import ok_rows, stack_of
from tasks.report.templating import render
from tasks.serve.servers import SERVERS

PARTS = (("queue_ms", "queue"), ("decode_ms", "request decode"), ("infer_ms", "inference"),
         ("encode_ms", "response encode"))
REST_IN_SERVER = "in the server, not attributed"
OUTSIDE = "outside the server"
UNATTRIBUTED = "not attributed (no server total reported)"
BREAKDOWN_COLUMNS = ("server_ms", *(k for k, _ in PARTS), "outside_ms")
ENGINE_GAP_MARK_PCT = 20.0  # a stack's best wire this far below its engine in process: its breakdown says why



def row_wire(row: dict) -> str:
    """A row's wire: its `wire` column (1.5), else what its protocol is on its server (json when unknown)."""
    if row.get("wire"):
        return str(row["wire"])
    server = SERVERS.get(str(row.get("server")))
    if server is not None:
        protocol = row_protocol(row)
        kind = next((k for k, w in server.wires.items() if w.codec == protocol), None)
        if kind:
            return kind
    return "json"


def _group(row: dict) -> tuple:
    return str(row.get("model")), int(row.get("batch_size") or 0), stack_of(row)


def _peak(rows: list[dict]) -> dict | None:
    """The ok row with the highest throughput (ties: lower p99)."""
    ok = ok_rows(rows)
    if not ok:
        return None

    def rank(r: dict) -> tuple:
        p99 = number(r.get("latency_ms_p99"))
        return -(number(r.get("throughput_rps")) or 0.0), p99 if p99 is not None else float("inf")

    return min(ok, key=rank)


def best_wires(rows: list[dict]) -> dict[tuple, str]:
    """(model, batch size, stack) -> the wire of its highest-throughput ok row."""
    by_group: dict[tuple, dict[str, list[dict]]] = {}
    for row in rows:
        by_group.setdefault(_group(row), {}).setdefault(row_wire(row), []).append(row)
    best = {}
    for group, wires in by_group.items():
        peaks = [(wire, _peak(wire_rows)) for wire, wire_rows in wires.items()]
        peaks = [(wire, peak) for wire, peak in peaks if peak is not None]
        if peaks:
            order = {w: i for i, w in enumerate(WIRES)}
            best[group] = min(peaks, key=lambda p: (-(number(p[1].get("throughput_rps")) or 0.0),
                                                    number(p[1].get("latency_ms_p99")) or float("inf"),
                                                    order.get(p[0], len(order))))[0]
    return best


def best_wire_rows(rows: list[dict]) -> list[dict]:
    """The rows of each stack's best wire (per model and batch size); a stack without an ok row keeps all."""
    best = best_wires(rows)
    return [r for r in rows if _group(r) not in best or row_wire(r) == best[_group(r)]]


def breakdown(row: dict) -> tuple[list[tuple[str, float]], str]:
    """(segments, note) of a row's time per request as its stack reported it; the segments add up to its mean
    latency where the stack reports a total, else to what it reports plus what is left unattributed."""
    parts = [(label, number(row.get(key))) for key, label in PARTS]
    segments = [(label, value) for label, value in parts if value is not None]
    latency, server = number(row.get("latency_ms_mean")), number(row.get("server_ms"))
    attributed = sum(v for _, v in segments)
    if server is not None:
        if server - attributed > 0:
            segments.append((REST_IN_SERVER, server - attributed))
        outside = number(row.get("outside_ms"))
        if outside is not None and outside > 0:
            segments.append((OUTSIDE, outside))
    elif latency is not None and segments and latency - attributed > 0:
        segments.append((UNATTRIBUTED, latency - attributed))
    source = str(row.get("breakdown_source") or "")
    note = "none reported" if not segments or source.startswith("none reported") else ""
    return segments, note


def _lowest_closed_loop(rows: list[dict]) -> dict | None:
    ok = [r for r in ok_rows(rows) if r.get("mode") == "concurrency"]
    return min(ok, key=lambda r: number(r.get("load")) or 0.0) if ok else None


def json_tax(rows: list[dict]) -> list[dict]:
    """Per model, batch size and stack measured over JSON and at least one other wire: its best wire against JSON."""
    best = best_wires(rows)
    groups: dict[tuple, dict[str, list[dict]]] = {}
    for row in rows:
        groups.setdefault(_group(row), {}).setdefault(row_wire(row), []).append(row)
    records = []
    for group in sorted(groups):
        wires = groups[group]
        if "json" not in wires or len(wires) < 2 or group not in best:
            continue
        wire = best[group]
        if wire == "json":  # JSON itself was fastest: compare with the fastest other wire
            others = [(w, _peak(r)) for w, r in wires.items() if w != "json" and _peak(r) is not None]
            if not others:
                continue
            wire = max(others, key=lambda p: number(p[1].get("throughput_rps")) or 0.0)[0]
        fast, slow = _peak(wires[wire]), _peak(wires["json"])
        fast_rps = number(fast.get("throughput_rps")) if fast else None
        slow_rps = number(slow.get("throughput_rps")) if slow else None
        low_fast, low_slow = _lowest_closed_loop(wires[wire]), _lowest_closed_loop(wires["json"])
        records.append({
            "model": group[0], "batch_size": group[1], "stack": group[2], "best_wire": wire,
            "best_protocol": fast.get("protocol") if fast else None, "best_rps": fast_rps, "json_rps": slow_rps,
            "json_tax_pct": 100.0 * (1 - slow_rps / fast_rps) if fast_rps and slow_rps is not None else None,
            "best_p50_ms": number(low_fast.get("latency_ms_p50")) if low_fast else None,
            "json_p50_ms": number(low_slow.get("latency_ms_p50")) if low_slow else None,
            "p50_load": number(low_fast.get("load")) if low_fast else None,
            "best_request_bytes": number((fast or {}).get("request_bytes")),
            "json_request_bytes": number((slow or {}).get("request_bytes")),
            "best_response_bytes": number((fast or {}).get("response_bytes")),
            "json_response_bytes": number((slow or {}).get("response_bytes")),
        })
    return records


def _tax_line(r: dict) -> dict:
    return {"stack": r["stack"], "batch": r["batch_size"], "wire": r["best_wire"],
            "protocol": r["best_protocol"] or DASH,
            "best_rps": figure(r["best_rps"]), "json_rps": figure(r["json_rps"]),
            "tax": DASH if r["json_tax_pct"] is None else f"{r['json_tax_pct']:.0f} %",
            "best_p50": figure(r["best_p50_ms"]), "json_p50": figure(r["json_p50_ms"]),
            "p50_load": None if r["p50_load"] is None else f"{r['p50_load']:g}",
            "request": f"{size_text(r['best_request_bytes'])} / {size_text(r['json_request_bytes'])}",
            "response": f"{size_text(r['best_response_bytes'])} / {size_text(r['json_response_bytes'])}"}


def _breakdown_rows(rows: list[dict]) -> list[dict]:
    """Per batch size, stack and wire: its ok closed-loop row at the lowest load (one request's time is clearest
    where requests do not queue), sorted by stack, batch and wire."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((*_group(row), row_wire(row)), []).append(row)
    order = {w: i for i, w in enumerate(WIRES)}
    picked = [(key, _lowest_closed_loop(group)) for key, group in groups.items()]
    return [row for key, row in sorted(picked, key=lambda p: (p[0][2], p[0][1], order.get(p[0][3], 9))) if row]


def _engine_ms(row: dict) -> float | None:
    engine = number(row.get("engine_inprocess_rps"))
    return 1000.0 / engine if engine else None


def _breakdown_line(r: dict) -> dict:
    engine = _engine_ms(r)
    served = number(r.get("throughput_rps"))
    gap = (1 - served / number(r.get("engine_inprocess_rps"))) * 100 if engine and served is not None else None
    return {"stack": stack_of(r), "batch": r.get("batch_size"), "wire": row_wire(r),
            "load": f"{number(r.get('load')) or 0:g}", "mean": figure(number(r.get("latency_ms_mean"))),
            "marked": gap is not None and gap > ENGINE_GAP_MARK_PCT and r.get("load") == 1.0,
            "engine": figure(engine), "parts": [figure(number(r.get(k))) for k in BREAKDOWN_COLUMNS],
            "source": r.get("breakdown_source") or "none reported"}


def _breakdown_plot(model: str, picked: list[dict]) -> Markup:
    bars = []
    for r in picked:
        segments, note = breakdown(r)
        name = f"{stack_of(r)} {row_wire(r)}" + (f" b{r.get('batch_size')}" if r.get("batch_size") != 1 else "")
        bars.append((name, segments, note))
    return stacked_bar_chart("breakdown", f"{model}: where a request's time goes (ms, lowest closed-loop load)",
                             bars, "ms", markers=[_engine_ms(r) for r in picked])


def wires_section(rows: list[dict]) -> Markup:
    """The JSON tax and the time breakdown per model, or "" when no row names its wire and none reports timing."""
    measured = [r for r in rows if r.get("role") != "control"]
    if not any(r.get("wire") for r in measured):
        return Markup("")
    models = []
    for model in sorted({str(r.get("model")) for r in measured}):
        model_rows = [r for r in measured if str(r.get("model")) == model]
        picked = _breakdown_rows(model_rows)
        models.append({"model": model, "tax": [_tax_line(r) for r in json_tax(model_rows)],
                       "plot": _breakdown_plot(model, picked) if picked else None,
                       "breakdown": [_breakdown_line(r) for r in picked]})
    return render("wires.html", models=models, columns=BREAKDOWN_COLUMNS)
