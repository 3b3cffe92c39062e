"""`python -m tasks.cli trace`: a shape written and shown, an access log made a trace, bad input refused by name;
the shipped trace is what its own first lines' command makes."""

from __future__ import annotations

import shlex

from tasks.cli.main import main
from tasks.cli.output import EXIT_REFUSED
from tasks.cli.traces import describe
from tasks.core.paths import REPO_ROOT
from tasks.loadgen.trace import read_trace

SHIPPED = REPO_ROOT / "workloads" / "traces" / "synthetic-day.csv"


def test_a_shape_is_written_and_shown(tmp_path, capsys):
    out = tmp_path / "spike.csv"
    assert main(["trace", "shape", "spike", "--params", '{"base_rps": 2, "spike_rps": 20, "spike_at_s": 1, '
                 '"spike_s": 1, "length_s": 3}', "--out", str(out)]) == 0
    trace = read_trace(out)
    assert trace.arrivals == 24 and trace.shape["kind"] == "spike"
    assert "# made by: python -m tasks.cli trace shape spike" in out.read_text()
    capsys.readouterr()
    assert main(["trace", "show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert shown.strip() == describe(trace)
    assert "24 arrivals" in shown and trace.digest in shown and "peak 20 req/s" in shown


def test_an_access_log_becomes_a_trace(tmp_path, capsys):
    log = tmp_path / "access.log"
    log.write_text("1796651736.0 POST /infer\n1796651736.5 POST /infer\n1796651737.0 GET /health\n")
    out = tmp_path / "log.csv"
    assert main(["trace", "from-log", str(log), "--format", "epoch", "--match", "POST", "--out", str(out)]) == 0
    assert "3 lines, 2 kept, 1 not matched" in capsys.readouterr().out
    assert read_trace(out).offsets_ns.tolist() == [0, 500_000_000]


def test_bad_shape_parameters_are_refused_naming_the_field(tmp_path, capsys):
    code = main(["trace", "shape", "day", "--params", '{"mean_rps": 4, "peak_ratio": 3, "length_s": 60}',
                 "--out", str(tmp_path / "x.csv")])
    assert code == EXIT_REFUSED and "shape peak_ratio=3" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_the_shipped_trace_is_what_its_command_makes(tmp_path):
    line = next(line for line in SHIPPED.read_text().splitlines() if line.startswith("# made by: "))
    argv = shlex.split(line.removeprefix("# made by: python -m tasks.cli "))
    argv[argv.index("--out") + 1] = str(tmp_path / "synthetic-day.csv")
    assert main(argv) == 0
    assert read_trace(tmp_path / "synthetic-day.csv").digest == read_trace(SHIPPED).digest
