"""What the commands print and how they exit: the run summary table, plain text tables, exit codes."""

from __future__ import annotations

from collections import Counter

EXIT_OK, EXIT_NOT_OK, EXIT_REFUSED, EXIT_INTERRUPTED = 0, 1, 2, 130
SUMMARY_COLUMNS = ("model", "format", "server", "batch_size", "load", "throughput_rps", "latency_ms_p50",
                   "latency_ms_p99", "error_rate", "server_cpu_pct", "neighbour_cpu_pct", "startup_s", "stable",
                   "status")


def print_summary(frame) -> None:
    """A run's rows as a table of the headline columns (skipped cells counted, not listed), the host's state they
    were measured in, then each row that failed or was contended with its reason, and the skipped cells grouped by
    stack and reason."""
    cols = [c for c in SUMMARY_COLUMNS if c in frame.columns]
    shown = frame[frame["status"] != "skipped"]
    if len(shown):
        print(shown[cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    line = host_line(frame)
    if line:
        print(line)
    for _, row in frame[~frame["status"].isin(["ok", "skipped"])].iterrows():
        print(f"  {row['server']}/{row['format']} load={row['load']}: {row['status']}: {str(row['reason'])[:300]}")
    skipped = frame[frame["status"] == "skipped"]
    groups = Counter((f"{r['server']}/{r['format']}", str(r["reason"])[:300]) for _, r in skipped.iterrows())
    if groups:
        print(f"{len(skipped)} rows skipped:")
    for (stack, reason), n in groups.items():
        print(f"  {stack}: {n} skipped: {reason}")


def host_line(frame) -> str:
    """"host: other work 3 % of its CPU during a point (median; at most 9 %), steal at most 1 %; 0 rows contended"."""
    if "neighbour_cpu_pct" not in frame.columns or frame["neighbour_cpu_pct"].isna().all():
        return ""
    other = frame["neighbour_cpu_pct"].dropna()
    text = f"host: other work {other.median():.0f} % of its CPU during a point (median; at most {other.max():.0f} %)"
    if "steal_pct" in frame.columns and frame["steal_pct"].notna().any():
        text += f", steal at most {frame['steal_pct'].max():.0f} %"
    if "load_avg_1m" in frame.columns and frame["load_avg_1m"].notna().any():
        text += f", load average up to {frame['load_avg_1m'].max():.2f}"
    contended = int((frame["status"] == "contended").sum())
    remeasured = int(frame["remeasured"].fillna(False).astype(bool).sum()) if "remeasured" in frame.columns else 0
    return f"{text}; {contended} rows contended, {remeasured} re-measured"


def table(rows: list[list[str]], header: list[str]) -> str:
    """Columns padded to their widest value."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, *rows])


def change_text(entry: dict | None) -> str:
    """One compared metric of a cell: "a -> b (+x.x%)", marked ++/-- when beyond noise."""
    if not entry or (entry["a"] is None and entry["b"] is None):
        return "-"
    a = "-" if entry["a"] is None else f"{entry['a']:,.2f}"
    b = "-" if entry["b"] is None else f"{entry['b']:,.2f}"
    text = f"{a} -> {b}"
    if entry["change_pct"] is not None:
        text += f" ({entry['change_pct']:+.1f}%)"
    if entry["beyond_noise"]:
        text += " ++" if entry["direction"] == "better" else " --"
    return text
