"""Generator capacity against nginx on loopback, next to wrk and Locust FastHttpUser, in the same run.

nginx (Debian's package) runs one worker process pinned to core 0, on a private prefix and config, bound to
127.0.0.1 on a free port, serving a small static file; every client runs pinned to core 1 in turn. Prints
each client's figures, the ratios to wrk and whether each goal of issue 5 is met:
  closed loop >= 0.8x wrk; open loop >= 60k req/s with < 1% of starts > 2 ms late; <= 12 us generator CPU/request.

Needs nginx and wrk (`apt-get install -y nginx wrk`); Locust is installed into a temporary venv at run time
(never into requirements.txt) and skipped with a note when that fails. Every process it starts is tracked by
PID and stopped in a finally block; every run is bounded in time.

    .venv/bin/python benchmarks/loadgen_capacity.py [--duration-s 5] [--connections 64] [--open-rate 60000]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tasks.loadgen.engine import closed_loop, open_loop  # noqa: E402
from tasks.loadgen.measurement import LATE_START_NS, summarize  # noqa: E402
from tasks.loadgen.protocols.http_get import HttpGet  # noqa: E402
from tasks.loadgen.settings import LoadSettings  # noqa: E402

SERVER_CORE, CLIENT_CORE = 0, 1
BODY = b"x" * 64
NGINX_START_TIMEOUT_S = 10.0
CLOSED_GOAL_RATIO = 0.8
OPEN_GOAL_RPS = 60_000
OPEN_GOAL_LATE_FRACTION = 0.01
CPU_GOAL_US = 12.0
LOCUST_INSTALL_TIMEOUT_S = 300
NGINX_CONF = """
worker_processes 1;
master_process off;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    client_body_temp_path {prefix}/tmp;
    proxy_temp_path {prefix}/tmp;
    fastcgi_temp_path {prefix}/tmp;
    uwsgi_temp_path {prefix}/tmp;
    scgi_temp_path {prefix}/tmp;
    server {{
        listen 127.0.0.1:{port};
        root {prefix}/www;
        location / {{ }}
    }}
}}
"""
LOCUSTFILE = """
from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser


class Hit(FastHttpUser):
    wait_time = constant(0)

    @task
    def get(self):
        self.client.get("/index.html")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_nginx(prefix: Path, port: int) -> subprocess.Popen:
    (prefix / "www").mkdir(parents=True)
    (prefix / "tmp").mkdir()
    (prefix / "www" / "index.html").write_bytes(BODY)
    conf = prefix / "nginx.conf"
    conf.write_text(NGINX_CONF.format(prefix=prefix, port=port))
    proc = subprocess.Popen(["taskset", "-c", str(SERVER_CORE), shutil.which("nginx") or "/usr/sbin/nginx",
                             "-p", str(prefix), "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + NGINX_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"nginx did not listen on 127.0.0.1:{port} within {NGINX_START_TIMEOUT_S} s")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_wrk(port: int, connections: int, duration_s: float) -> float:
    out = subprocess.run(["taskset", "-c", str(CLIENT_CORE), "wrk", "-t1", f"-c{connections}",
                          f"-d{int(duration_s)}s", f"http://127.0.0.1:{port}/index.html"],
                         capture_output=True, text=True, timeout=duration_s + 30, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def run_ours(port: int, settings: LoadSettings) -> dict:
    """Our engine in this process, pinned to the client core, on uvloop."""
    import uvloop

    os.sched_setaffinity(0, {CLIENT_CORE})
    codec = HttpGet("127.0.0.1", port, "index.html", {}, {})
    if settings.mode == "concurrency":
        recording = uvloop.run(closed_loop("127.0.0.1", port, codec, settings))
        m = summarize(recording, settings, latency_from="sent")
    else:
        recording = uvloop.run(open_loop("127.0.0.1", port, codec, settings))
        m = summarize(recording, settings, latency_from="scheduled")
    return {"rps": m.throughput_rps, "errors": m.errors, "cpu_us": m.generator_cpu_us_per_request,
            "cpu_pct": m.generator_cpu_pct, "late": m.late_starts, "requests": m.requests,
            "p99_ms": m.latency_ms_p99, "lag_p99_ms": m.schedule_lag_ms_p99}


def run_locust(port: int, users: int, duration_s: float, workdir: Path) -> tuple[float | None, str]:
    venv = workdir / "locust-venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "locust"], check=True, capture_output=True,
                       timeout=LOCUST_INSTALL_TIMEOUT_S)
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"locust could not be installed into a temporary venv: {exc}"
    (workdir / "locustfile.py").write_text(LOCUSTFILE)
    csv = workdir / "locust"
    cmd = ["taskset", "-c", str(CLIENT_CORE), str(venv / "bin" / "locust"), "-f", str(workdir / "locustfile.py"),
           "--headless", "-u", str(users), "-r", str(users), "-t", f"{int(duration_s)}s", "--host",
           f"http://127.0.0.1:{port}", "--csv", str(csv), "--only-summary", "--loglevel", "ERROR"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 60, cwd=workdir)
    except subprocess.TimeoutExpired:
        return None, "locust ran past its bound"
    if not (workdir / "locust_stats.csv").exists():
        return None, f"locust wrote no stats (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-800:]}"
    stats = (workdir / "locust_stats.csv").read_text().splitlines()
    header = stats[0].split(",")
    row = next(line.split(",") for line in stats[1:] if ",Aggregated," in line)
    return float(row[header.index("Requests/s")]), "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration-s", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--open-rate", type=float, default=OPEN_GOAL_RPS)
    parser.add_argument("--skip-locust", action="store_true")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        print("needs at least two cores (server on core 0, client on core 1)")
        return 1
    for tool in ("nginx", "wrk", "taskset"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            print(f"{tool} is not installed (apt-get install -y nginx wrk)")
            return 1
    workdir = Path(tempfile.mkdtemp(prefix="loadgen-bench-"))
    port = free_port()
    nginx = None
    try:
        nginx = start_nginx(workdir / "nginx", port)
        window = max(1.0, args.duration_s / 5)
        closed = LoadSettings(mode="concurrency", load=args.connections, duration_s=args.duration_s, warmup_s=1.0,
                              window_s=window)
        opened = LoadSettings(mode="rate", load=args.open_rate, duration_s=args.duration_s, warmup_s=1.0,
                              window_s=window, max_connections=512)
        wrk_rps = run_wrk(port, args.connections, args.duration_s)
        ours_closed = run_ours(port, closed)
        ours_open = run_ours(port, opened)
        locust_rps, locust_note = (None, "skipped") if args.skip_locust else run_locust(
            port, args.connections, args.duration_s, workdir)
    finally:
        stop(nginx)
        shutil.rmtree(workdir, ignore_errors=True)

    late_fraction = ours_open["late"] / max(1, ours_open["requests"])
    ratio = ours_closed["rps"] / wrk_rps
    print(f"nginx 1 worker on core {SERVER_CORE}; clients on core {CLIENT_CORE}; {args.connections} connections; "
          f"{args.duration_s:.0f} s each; late = start > {LATE_START_NS / 1e6:.0f} ms after schedule")
    print(f"{'client':<28}{'req/s':>12}{'x wrk':>8}{'CPU us/req':>12}{'p99 ms':>9}")
    print(f"{'wrk':<28}{wrk_rps:>12,.0f}{1.0:>8.2f}")
    print(f"{'ours closed loop':<28}{ours_closed['rps']:>12,.0f}{ratio:>8.2f}{ours_closed['cpu_us']:>12.2f}"
          f"{ours_closed['p99_ms']:>9.2f}")
    print(f"{'ours open loop @ ' + format(args.open_rate, ',.0f'):<28}{ours_open['rps']:>12,.0f}"
          f"{ours_open['rps'] / wrk_rps:>8.2f}{ours_open['cpu_us']:>12.2f}{ours_open['p99_ms'] or 0:>9.2f}"
          f"   late {late_fraction:.3%}, lag p99 {ours_open['lag_p99_ms']:.2f} ms")
    if locust_rps is not None:
        print(f"{'locust FastHttpUser':<28}{locust_rps:>12,.0f}{locust_rps / wrk_rps:>8.2f}")
    else:
        print(f"locust: {locust_note}")
    goals = {
        f"closed loop >= {CLOSED_GOAL_RATIO}x wrk": ratio >= CLOSED_GOAL_RATIO,
        f"open loop >= {OPEN_GOAL_RPS:,} req/s": ours_open["rps"] >= OPEN_GOAL_RPS * 0.99,
        f"open loop < {OPEN_GOAL_LATE_FRACTION:.0%} late starts": late_fraction < OPEN_GOAL_LATE_FRACTION,
        f"closed loop <= {CPU_GOAL_US} us CPU/request": ours_closed["cpu_us"] <= CPU_GOAL_US,
        f"open loop <= {CPU_GOAL_US} us CPU/request": ours_open["cpu_us"] <= CPU_GOAL_US,
        "no errors": ours_closed["errors"] == 0 and ours_open["errors"] == 0,
    }
    for name, met in goals.items():
        print(f"goal {name}: {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
