"""The harness's own cost per request, measured against a null server beside the real stacks in the same run.

The null server (MLPerf LoadGen's null system under test, `perftests_null_sut.py`, made for this harness) speaks
KServe v2 REST and answers every inference request at once with a response of the model's output shapes: no
model, no tensor parsing (the response is made once per request size, the first time it is seen). It runs
through the same server session, launcher, CPU pinning and load generator as a real stack, so what it costs is
what the harness costs: the generator's CPU per request, the loopback round trip, the server session. A stack's
latency minus the null server's is what the stack itself adds.

Each round measures the null server, then each stack (and the order is reversed every other round), closed loop
at each concurrency; the figures are medians over the rounds, and the ratios are the stack's against the null
server's of the same round.

    .venv/bin/python benchmarks/null_server.py [--model mlp] [--format onnx] [--stacks custom,triton]
        [--concurrencies 1,4] [--duration-s 5] [--warmup-s 1] [--rounds 3]
    .venv/bin/python benchmarks/null_server.py serve --port P --layout DIR   # the null server itself
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tasks.convert.artifact import Artifact  # noqa: E402
from tasks.core.spec import ModelSpec, load_spec  # noqa: E402
from tasks.loadgen.coordinator import run_load_point  # noqa: E402
from tasks.loadgen.resources import sampler_for  # noqa: E402
from tasks.loadgen.settings import LoadSettings  # noqa: E402
from tasks.pipeline import convert_step  # noqa: E402
from tasks.serve.base import RunSpec, Server, Wire  # noqa: E402
from tasks.serve.budget import plan_budget  # noqa: E402
from tasks.serve.launchers.process import ProcessLauncher  # noqa: E402
from tasks.serve.options import ServingOptions  # noqa: E402
from tasks.serve.servers import get_server  # noqa: E402
from tasks.serve.session import SessionSettings, server_session  # noqa: E402

HEADER_END = b"\r\n\r\n"
MAX_SERVE_S = 3600.0  # the null server ends by itself after this long, whatever happens to its caller
OUTPUTS_FILE = "outputs.json"


class NullServer(Server):
    """Answers every request at once with zeros of the model's output shapes; loads no model."""

    name = "null"
    runtime = "custom"  # any built runtime: the server runs on the orchestrator's Python, stdlib and asyncio only
    wires = {"json": Wire("kserve_v2_rest")}
    formats = ("onnx", "torchscript", "savedmodel", "tensorrt")
    engines: dict[str, str] = {}

    def write_layout(self, artifact: Artifact, spec: ModelSpec, workdir: Path) -> Path:
        layout = workdir / "null"
        layout.mkdir(parents=True, exist_ok=True)
        outputs = [{"name": t.name, "datatype": "FP32", "shape": [d for d in t.shape[1:]]} for t in spec.outputs]
        (layout / OUTPUTS_FILE).write_text(json.dumps({"model_name": self.model_name(spec), "outputs": outputs}))
        return layout

    def run_spec(self, layout: Path, spec: ModelSpec, ports: dict[str, int]) -> RunSpec:
        return RunSpec(runtime=self.runtime, argv=(sys.executable, str(Path(__file__).resolve()), "serve",
                                                   "--port", str(ports["http"]), "--layout", str(layout)),
                       ports=ports)

    def version(self, endpoint) -> str:
        return "null 1"


class NullProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive: every /infer answered at once from a response made once per request length."""

    def __init__(self, model: dict, responses: dict[int, bytes]) -> None:
        self.model, self.responses, self.buf = model, responses, b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(HEADER_END)) >= 0:
            head = self.buf[:end].decode("latin-1")
            length = next((int(line.partition(":")[2]) for line in head.split("\r\n")[1:]
                           if line.partition(":")[0].strip().lower() == "content-length"), 0)
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4:end + 4 + length], self.buf[end + 4 + length:]
            path = head.split(" ")[1]
            self.transport.write(self.response(length, body) if path.endswith("/infer") else self.ready())

    def response(self, length: int, body: bytes) -> bytes:
        if length not in self.responses:  # the first request of this size: its batch size, then its answer
            batch = json.loads(body)["inputs"][0]["shape"][0]
            outputs = [{**o, "shape": [batch, *o["shape"]], "data": [0.0] * batch * _count(o["shape"])}
                       for o in self.model["outputs"]]
            payload = json.dumps({"model_name": self.model["model_name"], "outputs": outputs}).encode()
            self.responses[length] = _http(payload)
        return self.responses[length]

    @staticmethod
    def ready() -> bytes:
        return _http(b"{}")


def _count(shape: list[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def _http(payload: bytes) -> bytes:
    return (f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
            .encode() + payload)


async def _serve(port: int, layout: Path) -> None:
    model = json.loads((layout / OUTPUTS_FILE).read_text())
    responses: dict[int, bytes] = {}
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: NullProtocol(model, responses), "127.0.0.1", port)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), timeout=MAX_SERVE_S)
    except TimeoutError:
        pass
    server.close()


def measure(server: Server, artifact: Artifact, spec: ModelSpec, concurrencies: list[int], args,
            work: Path) -> dict[int, dict]:
    """One server session: each concurrency's load point; concurrency -> its figures."""
    budget = plan_budget(None, None, True)
    settings = SessionSettings(run_id="bench-null-server", session_id=f"null-bench-{server.name}",
                               log_dir=work / "logs", cpus=budget.cpus)
    out = {}
    with server_session(server, artifact, spec, ProcessLauncher(), settings) as live:
        for concurrency in concurrencies:
            load = LoadSettings(mode="concurrency", load=concurrency, duration_s=args.duration_s,
                                warmup_s=args.warmup_s, window_s=max(args.duration_s / 5, 0.2))
            with sampler_for(live.handle) as sampler:
                measurement, _ = run_load_point(live.endpoint, spec, load, Path(tempfile.mkdtemp(dir=work)),
                                                cpus=budget.generator_cpus)
            cpu_pct = sampler.summary().server_cpu_pct or 0.0
            rps = measurement.throughput_rps or float("nan")
            out[concurrency] = {"rps": rps, "p50_ms": measurement.latency_ms_p50, "p99_ms": measurement.latency_ms_p99,
                                "gen_us": measurement.generator_cpu_us_per_request, "server_cpu_pct": cpu_pct,
                                "server_us": cpu_pct / 100 / rps * 1e6, "errors": measurement.errors}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the null server")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--layout", type=Path, required=True)
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--format", default="onnx")
    parser.add_argument("--stacks", default="custom,triton")
    parser.add_argument("--concurrencies", default="1,4")
    parser.add_argument("--duration-s", type=float, default=5.0)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.command == "serve":
        asyncio.run(_serve(args.port, args.layout))
        return 0
    spec = load_spec(args.model)
    converted = convert_step({"model": args.model, "format": args.format}, log=lambda _: None)
    if converted["error"] or converted["skipped"]:
        print(f"conversion of {args.model}/{args.format} failed: {converted['error'] or converted['skipped']}")
        return 1
    artifact = Artifact.from_dict(converted["artifact"])
    concurrencies = [int(c) for c in args.concurrencies.split(",")]
    options = ServingOptions(cpus=plan_budget(None, None, True).cpu_count)
    servers = [NullServer(options), *(get_server(name, options) for name in args.stacks.split(","))]
    rounds: list[dict[str, dict[int, dict]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-null-") as tmp:
        for index in range(args.rounds):
            order = servers if index % 2 == 0 else list(reversed(servers))
            rounds.append({s.name: measure(s, artifact, spec, concurrencies, args, Path(tmp)) for s in order})
            print(f"round {index + 1}/{args.rounds} done", flush=True)
    print(f"\n{args.model}/{args.format}, closed loop, {args.duration_s:g} s per point, medians of {args.rounds} "
          "rounds; ratios against the null server of the same round")
    header = (f"{'stack':<8} {'conc':>4} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'gen us/req':>10} "
              f"{'server us/req':>13} {'x null req/s':>12} {'p50 - null ms':>13}")
    print(header)
    for server in servers:
        for c in concurrencies:
            def med(key: str, name: str = server.name, c: int = c) -> float:
                return statistics.median(r[name][c][key] for r in rounds)

            ratio = statistics.median(r[server.name][c]["rps"] / r["null"][c]["rps"] for r in rounds)
            extra = statistics.median(r[server.name][c]["p50_ms"] - r["null"][c]["p50_ms"] for r in rounds)
            print(f"{server.name:<8} {c:>4} {med('rps'):>9.0f} {med('p50_ms'):>8.3f} {med('p99_ms'):>8.3f} "
                  f"{med('gen_us'):>10.1f} {med('server_us'):>13.1f} {ratio:>12.2f} {extra:>13.3f}")
    errors = sum(r[s][c]["errors"] for r in rounds for s in r for c in r[s])
    print(f"\nerrors: {errors} (every response checked: status and output shapes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
