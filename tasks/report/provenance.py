"""The report's provenance: the run's identity and versions, the host, each stack's server, image, engine, protocol
and limits, the plan step's host check and the run's configuration."""

from __future__ import annotations

import json

from markupsafe import Markup

from tasks.report.recommend import stack_of
from tasks.report.templating import render

STACK_FIELDS = ("server_version", "runtime_image", "runtime_image_kind", "engine", "protocol", "config_id",
                "server_cpus", "server_memory")
WARNING_SEVERITIES = ("warning", "refused")


def provenance_section(run: dict, rows: list[dict], suite: str | None) -> Markup:
    prov = run.get("provenance") or {}
    host = prov.get("host") or {}
    first = rows[0] if rows else {}
    items = [("run id", run["run_id"]), ("logical date", run["logical_date"]), ("status", run["status"]),
             ("suite", suite or "–"), ("git sha", prov.get("git_sha") or first.get("git_sha")),
             ("pipeline version", prov.get("pipeline_version") or first.get("pipeline_version")),
             ("results schema", first.get("schema_version")),
             ("host", f"{host.get('hostname', first.get('hostname'))}: {host.get('cpu_model', first.get('cpu_model'))}"
                      f" × {host.get('cpu_count', first.get('cpu_count'))}, GPU {host.get('gpu_name')}"
                      f" (driver {host.get('gpu_driver')})")]
    stacks = sorted({(stack_of(r), *[str(r.get(f) or "–") for f in STACK_FIELDS]) for r in rows})
    findings = [{"severity": f.get("severity"), "name": f.get("name"), "value": f.get("value"),
                 "effect": f.get("effect"), "warn": f.get("severity") in WARNING_SEVERITIES}
                for f in prov.get("host_check") or []]
    config = prov.get("config")
    return render("provenance.html", items=items, stacks=stacks, findings=findings,
                  config=json.dumps(config, indent=1, sort_keys=True) if config else None)
