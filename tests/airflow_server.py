"""A real Airflow API server on 127.0.0.1 for the UI tests: started in its own process group, stopped with it."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tasks.runtimes.ports import free_port
from tests.dagrun import REPO

START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 20
ADMIN = "admin"  # Airflow's default `[core] simple_auth_manager_users` is admin:admin


@dataclass
class ApiServer:
    base_url: str
    process: subprocess.Popen
    home: Path
    log_path: Path
    jwt_secret: str

    def admin_password(self) -> str:
        """The password the simple auth manager generated for `admin` when it started."""
        return json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())[ADMIN]

    def log_tail(self, size_bytes: int = 4000) -> str:
        return self.log_path.read_bytes()[-size_bytes:].decode(errors="replace")

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """GET without following redirects: (status, headers, body)."""

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        request = urllib.request.Request(self.base_url + path, headers=headers or {})
        try:
            with urllib.request.build_opener(NoRedirect).open(request, timeout=30) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def token(self, username: str, password: str) -> str:
        """A JWT from Airflow's own login API (`POST /auth/token`), as the login page gets it."""
        request = urllib.request.Request(self.base_url + "/auth/token", method="POST",
                                         data=json.dumps({"username": username, "password": password}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.loads(resp.read())["access_token"]


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (uvicorn and its workers), then SIGKILL what is left."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # workers that outlived their parent
    except ProcessLookupError:
        pass
    proc.wait()


@contextmanager
def api_server(home: Path, env: dict[str, str], log_dir: Path, all_admins: bool):
    """`airflow api-server` with the repository's plugins, on a free loopback port, one worker."""
    port = free_port()
    jwt_secret = secrets.token_urlsafe(32)
    env = {**os.environ, **env, "AIRFLOW_HOME": str(home), "PYTHONPATH": str(REPO),
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": str(all_admins)}
    log_path = log_dir / f"api-server-{port}.log"
    airflow = str(Path(sys.executable).with_name("airflow"))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([airflow, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                                 "--apps", "core"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    server = ApiServer(f"http://127.0.0.1:{port}", proc, home, log_path, jwt_secret)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"airflow api-server exited with code {proc.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"airflow api-server not healthy within {START_TIMEOUT_S} s:\n{server.log_tail()}")
            try:
                if server.get("/api/v2/monitor/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        yield server
    finally:
        stop_group(proc)
