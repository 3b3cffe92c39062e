"""Access logs made traces (tasks/loadgen/access_log.py): clf's whole seconds spread, iso and epoch fractions kept,
unmatched and untimed lines counted."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.core.errors import ConfigError
from tasks.loadgen.access_log import spread_within_seconds, trace_from_log
from tasks.loadgen.trace import NS


def test_an_access_log_in_the_common_format_spreads_each_second(tmp_path):
    log = tmp_path / "access.log"
    log.write_text(
        '127.0.0.1 - - [07/Dec/2026:13:55:36 +0000] "POST /v2/models/m/infer HTTP/1.1" 200 12\n'
        '127.0.0.1 - - [07/Dec/2026:13:55:36 +0000] "POST /v2/models/m/infer HTTP/1.1" 200 12\n'
        '127.0.0.1 - - [07/Dec/2026:13:55:35 +0000] "POST /v2/models/m/infer HTTP/1.1" 200 12\n'
        '127.0.0.1 - - [07/Dec/2026:13:55:38 +0000] "GET /v2/health/ready HTTP/1.1" 200 0\n'
        'a line with no time\n')
    made = trace_from_log(log, "clf", match=r"POST /v2/models/.+/infer")
    assert (made.lines, made.kept, made.unmatched, made.untimed, made.reordered) == (5, 3, 2, 0, True)
    assert made.trace.offsets_ns.tolist() == [0, NS, int(1.5 * NS)]
    third = NS // 3
    assert spread_within_seconds(np.array([5, 5, 5, 6]) * NS).tolist() == [5 * NS, 5 * NS + third,
                                                                            5 * NS + 2 * third, 6 * NS]


def test_iso_and_epoch_logs_keep_their_fractions(tmp_path):
    iso = tmp_path / "app.jsonl"
    iso.write_text('{"time": "2026-12-07T13:55:36.100Z", "path": "/predict"}\n'
                   '{"time": "2026-12-07T13:55:36.350+00:00", "path": "/predict"}\n')
    assert trace_from_log(iso, "iso").trace.offsets_ns.tolist() == [0, 250_000_000]
    epoch = tmp_path / "epoch.log"
    epoch.write_text("1796651736.125 POST /infer\n1796651737.000 POST /infer\nnoise 12 34\n")
    made = trace_from_log(epoch, "epoch")
    assert made.trace.offsets_ns.tolist() == [0, 875_000_000] and made.untimed == 1
    with pytest.raises(ConfigError, match="no line with a iso timestamp"):
        trace_from_log(epoch, "iso")
