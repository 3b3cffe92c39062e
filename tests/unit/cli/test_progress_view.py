"""The progress lines of a log that another process writes, echoed as they come (tasks/cli/progress_view.py):
only the progress lines, whatever precedes them on their line, and a bar of sessions where a terminal is
attached."""

from __future__ import annotations

import io

from tasks.cli.progress_view import Follower, following

LOG = ("2026-12-07T08:33:03Z [info     ] Done. Returned value was: {...}\n"
       "progress session: mlp.onnx.custom.process.cpu: 1 of 1 rows ok, in 9 s; session 1 of 4 in the plan\n"
       "mlp.onnx.custom.process.cpu.b1.concurrency4: window 3: 2400 req/s\n"
       "[2026-12-07 08:34:00] {stdout} progress stage: validation: passed, in 3 s\n")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_only_the_progress_lines_of_the_log_are_echoed(tmp_path):
    log = tmp_path / "demo.log"
    out = io.StringIO()
    with open(log, "w") as writer, following(log, out):
        writer.write(LOG)
        writer.flush()
    assert out.getvalue().splitlines() == [
        "progress session: mlp.onnx.custom.process.cpu: 1 of 1 rows ok, in 9 s; session 1 of 4 in the plan",
        "progress stage: validation: passed, in 3 s"]


def test_a_terminal_gets_a_bar_of_the_plans_sessions(tmp_path):
    out = Terminal()
    follower = Follower(tmp_path / "none.log", out, bar=True)
    for line in LOG.splitlines(keepends=True):
        follower.echo(line)
    text = out.getvalue()
    assert "] 1 of 4 sessions" in text and text.count("\r\033[K") == 2
    assert "#" * 7 + "." * 23 in text  # a quarter of the bar's 30
