"""The run's HTML report: one self-contained page published next to the results as `report.html`.

Units and good directions come from `tasks.metrics.METRICS`; nothing here decides what is better.
"""

from __future__ import annotations

import html

from tasks.metrics import METRICS

REPORT_METRICS = ("throughput_rps", "latency_ms_p50", "latency_ms_p99", "error_rate", "server_cpu_pct",
                  "server_rss_mb", "startup_s")
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
.failed{color:#b00}.skipped{color:#888}.best{font-weight:bold;background:#eef8ee}.bad{color:#b00;font-weight:bold}"""


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    return f"{value:,.2f}" if isinstance(value, float) else html.escape(str(value))


def _is_best(row: dict, metric: str, best: dict) -> bool:
    return row["status"] == "ok" and row.get(metric) is not None and row.get(metric) == best.get(metric)


def render_report(rows: list[dict], parity: list[dict], validation: dict, regressions: dict, run: dict) -> str:
    """The page: status, one table per model (best value per column marked), failures, parity, regressions.
    `run` holds run_id, logical_date and status."""
    esc = html.escape
    host = rows[0] if rows else {}
    verdict = "passed" if validation.get("success") else "<span class=bad>failed</span>"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Serving evaluation {esc(run['run_id'])}"
             f"</title><style>{STYLE}</style></head><body>",
             f"<h1>Serving evaluation — {esc(run['logical_date'][:10])}</h1>",
             f"<p>Run <code>{esc(run['run_id'])}</code>, status <b>{esc(run['status'])}</b>, {len(rows)} cells, "
             f"validation {verdict}. Host: {esc(str(host.get('cpu_model')))} × {host.get('cpu_count')}, "
             f"GPU {esc(str(host.get('gpu_name')))}.</p>"]
    for model in sorted({r["model"] for r in rows}):
        ok = [r for r in rows if r["model"] == model and r["status"] == "ok"]
        best = {}
        for name in REPORT_METRICS:
            values = [r[name] for r in ok if r.get(name) is not None]
            if values:
                best[name] = max(values) if METRICS[name].better == "higher" else min(values)
        head = "".join(f"<th>{esc(METRICS[m].label)}<br>({esc(METRICS[m].unit)})</th>" for m in REPORT_METRICS)
        parts.append(f"<h2>{esc(model)}</h2><table><tr><th class=l>server</th><th class=l>format</th>"
                     f"<th>batch</th><th>load</th>{head}<th>stable</th><th class=l>status</th></tr>")
        for r in sorted((r for r in rows if r["model"] == model),
                        key=lambda r: (r["server"], r["format"], r["batch_size"], r["load"])):
            cells = "".join(
                f"<td class='{'best' if _is_best(r, m, best) else ''}'>{_fmt(r.get(m))}</td>" for m in REPORT_METRICS)
            status = f"<span class={esc(r['status'])}>{esc(r['status'])}</span>"
            if r["status"] != "ok":
                status += f"<br><small>{esc(str(r.get('reason') or '')[:300])}</small>"
            parts.append(f"<tr><td class=l>{esc(r['server'])}</td><td class=l>{esc(r['format'])}</td>"
                         f"<td>{r['batch_size']}</td><td>{esc(r['mode'])} {r['load']:g}</td>{cells}"
                         f"<td>{_fmt(r.get('stable'))}</td><td class=l>{status}</td></tr>")
        parts.append("</table>")
    parts.append("<h2>Parity</h2><table><tr><th class=l>model</th><th class=l>format</th><th>max abs err</th>"
                 "<th>atol</th><th class=l>passed</th></tr>")
    for p in parity:
        parts.append(f"<tr><td class=l>{esc(p['model'])}</td><td class=l>{esc(p['format'])}</td>"
                     f"<td>{p['max_abs_err']:.3g}</td><td>{p['atol']:g}</td>"
                     f"<td class=l>{'yes' if p['passed'] else '<span class=bad>no</span>'}</td></tr>")
    parts.append("</table>")
    flagged = [r for r in regressions.get("records", []) if r.get("verdict") == "regression"]
    parts.append(f"<h2>Regressions ({len(flagged)})</h2><ul>")
    for r in flagged:
        where = "/".join(str(r.get(k)) for k in ("model", "format", "server", "load") if r.get(k) is not None)
        parts.append(f"<li class=bad>{esc(where)}: {esc(r['metric'])} {r['baseline']:.4g} → {r['current']:.4g} "
                     f"{esc(r['unit'])} ({'n/a' if r['change_pct'] is None else format(r['change_pct'], '+.1f')} %, "
                     f"{esc(r['method'])})</li>")
    parts.append("</ul>" + ("" if flagged else "<p>None.</p>"))
    unconfirmed = [r for r in regressions.get("records", []) if r.get("verdict") == "unconfirmed"]
    if unconfirmed:
        parts.append(f"<p>{len(unconfirmed)} suspected regression(s) were re-measured and not confirmed "
                     "(regressions.json says why).</p>")
    control = regressions.get("control") or {}
    drift = (control.get("drift") or {}).get("throughput_rps") or {}
    if drift.get("change_pct") is not None:
        parts.append(f"<p>Control cell {esc(str(control.get('name')))}: throughput {drift['change_pct']:+.1f} % "
                     "against its own baseline (the host's drift).</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
