"""A short digest of one published run: the best stack per model and the regressions.

The example a reporting team copies: it reads the run only through its manifest, and writes its output
beside the run folder (`digests/`), never into it (a run folder is written only by its own run).
"""

from __future__ import annotations

import json

from tasks.core.results import OVERLOAD_MODE, read_parquet_bytes
from tasks.core.verdicts import duet_figures, is_not_settled, is_regression, size_alone
from tasks.store.layout import safe_run_id
from tasks.store.s3 import S3Store

DIGEST_SCHEMA_VERSION = "1.1"  # 1.1: `not_settled`


def best_stacks(frame) -> list[dict]:
    """Per model and batch size: the ok cell with the highest throughput, with its latency."""
    ok = frame[frame["status"] == "ok"]
    if "mode" in ok.columns:  # an overload row (1.7) is a burst, not a load point to rank: it has no throughput
        ok = ok[ok["mode"] != OVERLOAD_MODE]
    if "role" in ok.columns:  # the control cell tells the host's drift; it is not one of the stacks compared
        ok = ok[ok["role"].isna() | (ok["role"] != "control")]
    best = []
    for (model, batch), group in ok.groupby(["model", "batch_size"], sort=True):
        top = group.sort_values(["throughput_rps", "latency_ms_p99"], ascending=[False, True]).iloc[0]
        best.append({"model": model, "batch_size": int(batch), "server": top["server"], "format": top["format"],
                     "wire": top["wire"] if "wire" in group.columns and isinstance(top["wire"], str) else None,
                     "load": float(top["load"]), "mode": top["mode"], "throughput_rps": float(top["throughput_rps"]),
                     "latency_ms_p99": float(top["latency_ms_p99"]),
                     "runner_up": _runner_up(group, top["server"])})
    return best


def _runner_up(group, winner: str) -> dict | None:
    others = group[group["server"] != winner].sort_values("throughput_rps", ascending=False)
    if others.empty:
        return None
    row = others.iloc[0]
    return {"server": row["server"], "format": row["format"], "throughput_rps": float(row["throughput_rps"])}


def make_digest(manifest: dict, frame, regressions: dict) -> dict:
    flagged = [r for r in regressions.get("records", []) if is_regression(r.get("verdict"))]
    unsettled = [r for r in regressions.get("records", []) if is_not_settled(r.get("verdict"))]
    return {
        "schema_version": DIGEST_SCHEMA_VERSION, "run_id": manifest["run_id"], "logical_date": manifest["logical_date"],
        "run_status": manifest["status"], "manifest": f"{manifest['prefix']}/manifest.json",
        "cells": int(len(frame)), "failed_cells": int((frame["status"] == "failed").sum()),
        "best": best_stacks(frame), "regressions": flagged, "not_settled": unsettled,
    }


def duet_finding(record: dict) -> str:
    """A duet record's change in words: its size alone with the interval where it was sized, the duet's ratio (the
    detector) beside; a record from before sizes existed has the duet's ratio only."""
    ratio, _ = duet_figures(record)
    duet = f"the duet x{ratio:.3f}" if ratio else "the duet"
    if alone := size_alone(record):
        (change, ci) = alone
        return f"{change:+.1f} % alone [{ci[0]:+.1f}, {ci[1]:+.1f}] ({duet}; {record['verdict']})"
    if "duet_ratio" in record:
        return f"size not measured alone ({duet}; {record['verdict']})"
    change = "n/a" if record.get("change_pct") is None else format(record["change_pct"], "+.1f")
    return f"{duet} ({change} %), side by side"


def render_markdown(digest: dict) -> str:
    lines = [f"# Serving evaluation {digest['logical_date'][:10]} ({digest['run_status']})", "",
             f"Run `{digest['run_id']}`: {digest['cells']} cells, {digest['failed_cells']} failed.", "",
             "| model | batch | best stack | load | throughput (req/s) | p99 (ms) | runner-up |",
             "|---|---|---|---|---|---|---|"]
    for b in digest["best"]:
        runner = b["runner_up"]
        runner_txt = f"{runner['server']}/{runner['format']} {runner['throughput_rps']:.0f}" if runner else "-"
        over = f" over {b['wire']}" if b.get("wire") else ""
        lines.append(f"| {b['model']} | {b['batch_size']} | {b['server']}/{b['format']}{over} | "
                     f"{b['mode']} {b['load']:g} | {b['throughput_rps']:.1f} | {b['latency_ms_p99']:.2f} | "
                     f"{runner_txt} |")
    lines += ["", f"## Regressions ({len(digest['regressions'])})", ""]
    for r in digest["regressions"]:
        where = "/".join(str(r.get(k)) for k in ("model", "format", "server", "load") if r.get(k) is not None)
        change = "n/a" if r.get("change_pct") is None else format(r["change_pct"], "+.1f")
        if r.get("kind") == "duet":  # found beside its reference, sized alone: the size, what changed, the cause
            lines.append(f"- {where}: {r['metric']} {duet_finding(r)} against {r['reference_run_id']}; changed: "
                         f"{'; '.join(r.get('changes') or [])}" + (f"; cause: {r['cause']}" if r.get("cause") else ""))
        else:
            lines.append(f"- {where}: {r['metric']} {r['baseline']:.4g} → {r['current']:.4g} {r['unit']} "
                         f"({change} %, {r.get('method')})")
    if not digest["regressions"]:
        lines.append("None.")
    unsettled = digest.get("not_settled") or []
    if unsettled:  # judged again the next night: neither a regression nor no change yet
        lines += ["", f"## Not settled ({len(unsettled)})", ""]
        for r in unsettled:
            where = "/".join(str(r.get(k)) for k in ("model", "format", "server", "load") if r.get(k) is not None)
            lines.append(f"- {where}: {r['metric']} {duet_finding(r)} against {r.get('reference_run_id')}")
    return "\n".join(lines) + "\n"


def write_digest(store: S3Store, manifest_key: str) -> dict:
    """Read the run through `manifest_key`, write `digests/dt=<date>/run_id=<id>.{json,md}`; return the digest."""
    manifest = store.get_json(manifest_key)
    names = {o["name"]: o["key"] for o in manifest["objects"]}
    frame = read_parquet_bytes(store.get(names["results.parquet"]))
    regressions = store.get_json(names["regressions.json"]) if "regressions.json" in names else {}
    digest = make_digest(manifest, frame, regressions)
    # a file named after the run, not a partition folder: its key is the one digests have always had
    base = store.key("digests", f"dt={manifest['logical_date'][:10]}", f"run_id={safe_run_id(manifest['run_id'])}")
    for suffix, body, kind in ((".json", json.dumps(digest, indent=2).encode(), "application/json"),
                               (".md", render_markdown(digest).encode(), "text/markdown")):
        store.put_bytes(base + suffix, body, kind)
    digest["written"] = [base + ".json", base + ".md"]
    return digest
