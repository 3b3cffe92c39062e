"""The report's features and ease-of-use table (schema 1.6): one table per run, the stacks as columns; per capability
what each stack declares and what its probe of the live server found (the evidence on hover, a finding written
out), then the lines of configuration and code the project writes to serve the model on it."""

from __future__ import annotations

import json

from markupsafe import Markup

from tasks.core.metrics import number
from tasks.report.templating import render
from tasks.serve.capabilities import CAPABILITIES

PASSED, FAILED = "passed", "failed"



def _session(row: dict) -> str:
    return f"{row.get('model')}/{row.get('format')} ({row.get('launcher')})"


def stack_features(rows: list[dict]) -> dict[str, dict]:
    """server -> {"capabilities": capability -> {declared, how, result, evidence, sessions}, "lines": format ->
    (config, code)}, from the rows' `capabilities` and line counts (each server life once). A capability failed in
    any session is a finding (with the sessions it failed in); else passed where any probe passed."""
    out: dict[str, dict] = {}
    for row in rows:
        server = str(row.get("server"))
        entry = out.setdefault(server, {"capabilities": {}, "lines": {}})
        config, code = number(row.get("config_lines")), number(row.get("code_lines"))
        if config is not None and code is not None:
            entry["lines"].setdefault(str(row.get("format")), (int(config), int(code)))
        try:
            checks = json.loads(row["capabilities"]) if row.get("capabilities") else {}
        except ValueError:
            checks = {}
        for name, check in checks.items():
            merged = entry["capabilities"].setdefault(name, {"declared": check.get("declared"), "how": check.get("how"),
                                                            "probe": check.get("probe"), "result": None,
                                                            "evidence": check.get("evidence"), "failed_in": []})
            result = check.get("result")
            if result == FAILED:
                if _session(row) not in merged["failed_in"]:
                    merged["failed_in"].append(_session(row))
                if merged["result"] != FAILED:
                    merged.update(result=FAILED, evidence=check.get("evidence"))
            elif result == PASSED and merged["result"] != FAILED:
                merged.update(result=PASSED, evidence=check.get("evidence"))
            elif merged["result"] is None:
                merged.update(result=result, evidence=check.get("evidence"))
    return {server: entry for server, entry in out.items() if entry["capabilities"] or entry["lines"]}


def _capability(check: dict | None) -> dict | None:
    """What a stack's cell of a capability says: offered or not, probed, a finding, with its evidence on hover."""
    if check is None:
        return None
    title = f"{check.get('how') or ''}" + (f" — probe: {check['probe']}" if check.get("probe") else "") + \
        (f" — {check['evidence']}" if check.get("evidence") else "")
    finding = check["result"] == FAILED and check["declared"]
    return {"declared": bool(check["declared"]), "title": title, "finding": finding,
            "failed_in": ", ".join(check["failed_in"]), "evidence": check.get("evidence") or "",
            "probed": {"passed": "probed ✓", "failed": "probe failed"}.get(str(check["result"]), "not probed"),
            "passed": check["result"] == PASSED}


def _lines(lines: dict[str, tuple[int, int]], index: int) -> list[tuple[str | None, int]]:
    """A stack's lines of configuration (index 0) or code (1): one number when every format has the same, else one
    per format."""
    values = {fmt: counts[index] for fmt, counts in sorted(lines.items())}
    if len(set(values.values())) == 1:
        return [(None, next(iter(values.values())))]
    return list(values.items())


def features_section(rows: list[dict]) -> Markup:
    """The section: the table and the findings, or a line saying the run recorded none."""
    stacks = stack_features([r for r in rows if r.get("role") != "control"])
    servers = sorted(stacks)
    names = list(CAPABILITIES) + sorted({n for s in stacks.values() for n in s["capabilities"]} - set(CAPABILITIES))
    capabilities = [{"name": name, "label": CAPABILITIES.get(name, name),
                     "cells": [_capability(stacks[s]["capabilities"].get(name)) for s in servers]} for name in names]
    lines = [(text, [_lines(stacks[s]["lines"], index) for s in servers])
             for index, text in ((0, "lines of configuration"), (1, "lines of code"))]
    findings = [{"server": s, "capability": CAPABILITIES.get(n, n), "probe": c["probe"],
                 "failed_in": ", ".join(c["failed_in"]), "evidence": c["evidence"]}
                for s in servers for n, c in stacks[s]["capabilities"].items()
                if c["declared"] and c["result"] == FAILED]
    counts = [sum(f["server"] == s for f in findings) for s in servers]
    return render("features.html", servers=servers, capabilities=capabilities, lines=lines, counts=counts,
                  findings=findings)
