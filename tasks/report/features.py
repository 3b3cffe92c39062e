"""The report's features and ease-of-use table (schema 1.6): one table per run, the stacks as columns; per capability
what each stack declares and what its probe of the live server found (the evidence on hover, a finding written
out), then the lines of configuration and code the project writes to serve the model on it."""

from __future__ import annotations

import json

from tasks.core.metrics import number
from tasks.report.formatting import escape
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


def _capability_cell(check: dict | None) -> str:
    if check is None:
        return "<td class=l>–</td>"
    offered = "yes" if check["declared"] else "no"
    title = f"{check.get('how') or ''}" + (f" — probe: {check['probe']}" if check.get("probe") else "") + \
        (f" — {check['evidence']}" if check.get("evidence") else "")
    if check["result"] == FAILED and check["declared"]:
        where = ", ".join(check["failed_in"])
        return (f"<td class='l bad' title='{escape(title)}'>{offered}, <b>finding</b>: its probe failed in "
                f"{escape(where)}<br><small>{escape(check.get('evidence') or '')}</small></td>")
    if not check["declared"]:
        return f"<td class='l' title='{escape(title)}'>no</td>"
    probed = {"passed": "probed ✓", "failed": "probe failed"}.get(str(check["result"]), "not probed")
    cls = " better" if check["result"] == PASSED else ""
    return f"<td class='l{cls}' title='{escape(title)}'>{offered}<br><small>{probed}</small></td>"


def _lines_cell(lines: dict[str, tuple[int, int]], index: int) -> str:
    if not lines:
        return "<td>–</td>"
    values = {fmt: counts[index] for fmt, counts in sorted(lines.items())}
    if len(set(values.values())) == 1:
        return f"<td>{next(iter(values.values()))}</td>"
    return "<td>" + "<br>".join(f"{escape(fmt)} {value}" for fmt, value in values.items()) + "</td>"


def features_section(rows: list[dict]) -> str:
    """The section: the table and the findings, or a line saying the run recorded none."""
    parts = ["<h2 id=features>Features and ease of use</h2>",
             "<p class=note>What each stack can do as this project deploys it, declared next to its knobs "
             "(<code>tasks/serve/servers/</code>), and what the probe of its live server found before any load: "
             "<i>probed ✓</i> the live server showed it (hover for the evidence), <i>not probed</i> nothing on it "
             "could (a serving option, or a deployment this run does not make), a <b>finding</b> a declared "
             "capability whose probe failed (a finding never fails a cell: it is about the stack, not the figures). "
             "Lines: the non-blank, non-comment lines of configuration and code the project writes to serve the "
             "model on the stack (the generated model layout and the runtime's handler or service code; "
             "command-line flags and Dockerfiles not counted).</p>"]
    stacks = stack_features([r for r in rows if r.get("role") != "control"])
    if not stacks:
        return "".join(parts) + "<p>This run recorded no capabilities (its rows predate schema 1.6).</p>"
    servers = sorted(stacks)
    names = list(CAPABILITIES) + sorted({n for s in stacks.values() for n in s["capabilities"]} - set(CAPABILITIES))
    parts.append("<table class=features><tr><th class=l></th>"
                 + "".join(f"<th class=l>{escape(s)}</th>" for s in servers) + "</tr>")
    for name in names:
        cells = "".join(_capability_cell(stacks[s]["capabilities"].get(name)) for s in servers)
        parts.append(f"<tr data-capability='{escape(name)}'><th class=l>{escape(CAPABILITIES.get(name, name))}</th>"
                     f"{cells}</tr>")
    for index, label in ((0, "lines of configuration"), (1, "lines of code")):
        parts.append(f"<tr><th class=l>{label}</th>" + "".join(_lines_cell(stacks[s]["lines"], index)
                                                                for s in servers) + "</tr>")
    findings = [(s, n, c) for s in servers for n, c in stacks[s]["capabilities"].items()
                if c["declared"] and c["result"] == FAILED]
    parts.append("<tr><th class=l>findings</th>" + "".join(
        f"<td class='{'bad' if any(f[0] == s for f in findings) else ''}'>"
        f"{sum(f[0] == s for f in findings)}</td>" for s in servers) + "</tr></table>")
    if findings:
        parts.append(f"<h3>Findings ({len(findings)})</h3><ul>" + "".join(
            f"<li class=bad>{escape(s)}: {escape(CAPABILITIES.get(n, n))} is declared but its probe "
            f"({escape(c['probe'])}) "
            f"failed in {escape(', '.join(c['failed_in']))}: {escape(c['evidence'])}</li>" for s, n, c in findings)
            + "</ul>")
    return "".join(parts)
