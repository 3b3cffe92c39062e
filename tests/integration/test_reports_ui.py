"""The reports page inside a real Airflow API server on 127.0.0.1, with a real published run in the embedded
S3: Airflow's session check over HTTP, and a real headless Chromium (Debian's `chromium`, driven by Playwright)
that logs in through Airflow's own login page, opens the page from the UI's navigation, follows a run to its
report inside the UI's frame and checks that the plots are drawn. Screenshots go to the test's temp dir.

Needs `/usr/bin/chromium` (`.ci/run` installs it) and the `playwright` package (requirements.txt). Outside CI a
missing browser skips the browser tests with the reason; in CI (`CI` or `SERVING_EVAL_CI` set) it fails them.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jwt
import pytest

from tasks.pipeline import run_pipeline
from tasks.serve.servers import SERVERS, register_server
from tasks.serve.servers.custom import CustomServer
from tasks.store.s3 import S3Store
from tests.airflow_server import ADMIN, api_server
from tests.dagrun import fast_conf, load_reports_plugin, read_run

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
# Playwright's own browser download cannot work here: Debian's chromium, headless, nothing fetched in the background.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
BUCKET = "ui-reports"
PREFIX = "eval"
TIMEOUT_MS = 60_000
# Every <svg>: its box and how many of its shapes are drawn (a box of non-zero size). Closed <details> opened first.
SVG_BOXES_JS = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const shapes = 'path,line,polyline,polygon,rect,circle,ellipse,text';
  return [...document.querySelectorAll('svg')].map((svg, index) => {
    const box = svg.getBoundingClientRect();
    const drawn = [...svg.querySelectorAll(shapes)].filter(e => {
      const b = e.getBoundingClientRect(); return b.width > 0 || b.height > 0; }).length;
    return {index, width: box.width, height: box.height, drawn};
  });
}"""


def in_ci() -> bool:
    return any(os.environ.get(name, "").lower() not in ("", "0", "false", "no") for name in ("CI", "SERVING_EVAL_CI"))


def require_browser() -> None:
    """Skip (outside CI, saying why) or fail (in CI) when the browser or Playwright is missing."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install -y chromium; .ci/run installs it)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the Python package playwright (pinned in requirements.txt)")
    if missing:
        reason = "the browser test needs " + " and ".join(missing)
        if in_ci():
            pytest.fail(f"{reason}; in CI a missing browser is a failure")
        print(f"skipping: {reason}")
        pytest.skip(reason)


class Chromium:
    """One headless Chromium for a test; each `page()` is a fresh context (no cookies)."""

    def __enter__(self) -> Chromium:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self.browser = self._playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        except BaseException:
            self._playwright.stop()
            raise
        return self

    def page(self):
        context = self.browser.new_context(viewport={"width": 1400, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        return context.new_page()

    def __exit__(self, *exc: object) -> None:
        self.browser.close()
        self._playwright.stop()


class CrashingCustomServer(CustomServer):
    """The real custom server pointed at a missing model: it exits during start-up, its cells failed."""

    name = "custom-crashing"

    def run_spec(self, layout, spec, ports):
        return super().run_spec(layout.parent / "no-such-model-dir", spec, ports)


@pytest.fixture(scope="module")
def published_run(embedded_s3) -> dict:
    """A real run (the custom server, MLP ONNX, closed loop 1 and 2) published to the embedded S3, after a night
    before it that also ran a server that crashes (each stack's record over the two nights)."""
    embedded_s3.create_bucket(BUCKET)
    conf = fast_conf(BUCKET, s3_prefix=PREFIX, concurrencies=[1, 2])
    register_server(CrashingCustomServer)
    try:
        run_pipeline({**conf, "servers": ["custom", "custom-crashing"], "fail_on_cell_failure": False},
                     run_id=f"ui_night_before_{int(time.time())}",
                     logical_date=(datetime.now(UTC) - timedelta(days=1)).isoformat(),
                     conn=embedded_s3.connection("serving_eval_s3"))
    finally:
        SERVERS.pop(CrashingCustomServer.name, None)
    summary, _ = run_pipeline(conf, run_id=f"ui_test_{int(time.time())}", logical_date=datetime.now(UTC).isoformat(),
                              conn=embedded_s3.connection("serving_eval_s3"))
    assert summary["status"] == "complete", summary
    store = S3Store(BUCKET, PREFIX, embedded_s3.connection("serving_eval_s3"))
    _, manifest = read_run(store)
    relative = manifest["prefix"].removeprefix(f"{PREFIX}/")
    return {"run_id": manifest["run_id"], "report_path": f"/serving-eval/{relative}/report.html",
            "report": store.get(f"{manifest['prefix']}/report.html")}


def server_env(embedded_s3) -> dict[str, str]:
    return {**embedded_s3.airflow_conn_env("serving_eval_s3"), "SERVING_EVAL_REPORTS_BUCKET": BUCKET,
            "SERVING_EVAL_REPORTS_PREFIX": PREFIX}


@pytest.fixture(scope="module")
def login_server(airflow_db, embedded_s3, published_run, tmp_path_factory):
    """The API server with a log-in required (`simple_auth_manager_all_admins = False`)."""
    with api_server(airflow_db, server_env(embedded_s3), tmp_path_factory.mktemp("api-login"),
                    all_admins=False) as server:
        yield server


def check_plots_drawn(frame, shots: Path) -> int:
    """Every <svg> of the page has a box and at least one drawn shape; returns how many there are."""
    boxes = frame.evaluate(SVG_BOXES_JS)
    for box in boxes:
        assert box["width"] > 0 and box["height"] > 0, f"svg #{box['index']} has an empty box: {box}"
        assert box["drawn"] > 0, f"svg #{box['index']} draws nothing: {box}"
    if not boxes:
        print(f"note: the report has no <svg> plot yet; nothing to check for plots ({shots})")
    return len(boxes)


def test_the_plot_check_tells_drawn_from_empty_plots(tmp_path):
    """The check used on reports, on a page served with the plugin's headers (scripts forbidden)."""
    require_browser()
    headers = {**load_reports_plugin().PAGE_HEADERS, "Content-Type": "text/html"}
    drawn = "<svg width='120' height='60'><polyline points='0,50 60,10 120,30' stroke='black' fill='none'/></svg>"
    empty = "<svg width='120' height='60'><g></g></svg>"
    hidden = f"<details><summary>more</summary>{drawn}</details>"
    pages = {"/drawn.html": drawn + hidden, "/empty.html": drawn + empty, "/none.html": "<p>no plots</p>"}
    with Chromium() as chromium:
        page = chromium.page()
        page.route("http://reports.invalid/**", lambda route: route.fulfill(
            status=200, headers=headers, body=pages[route.request.url.removeprefix("http://reports.invalid")]))
        page.goto("http://reports.invalid/drawn.html")
        assert check_plots_drawn(page.main_frame, tmp_path) == 2
        page.goto("http://reports.invalid/empty.html")
        with pytest.raises(AssertionError, match="draws nothing"):
            check_plots_drawn(page.main_frame, tmp_path)
        page.goto("http://reports.invalid/none.html")
        assert check_plots_drawn(page.main_frame, tmp_path) == 0


def test_all_admins_leaves_the_page_open(airflow_db, embedded_s3, published_run, tmp_path):
    """`make airflow`'s default: no log-in anywhere, the plugin's pages included."""
    with api_server(airflow_db, server_env(embedded_s3), tmp_path, all_admins=True) as server:
        status, _, body = server.get("/serving-eval/")
        assert status == 200 and published_run["run_id"].encode() in body
        status, _, body = server.get(published_run["report_path"])
        assert status == 200 and body == published_run["report"]
        require_browser()
        with Chromium() as chromium:
            page = chromium.page()
            page.goto(server.base_url + "/plugin/serving-eval")
            frame = page.frame_locator("iframe[title='Serving eval reports']")
            frame.get_by_role("link", name=published_run["run_id"]).wait_for()
            page.screenshot(path=str(tmp_path / "all-admins-runs.png"))
            check_stack_record(page, frame, tmp_path)
    print(f"screenshots in {tmp_path}")


def check_stack_record(page, frame, shots: Path) -> None:
    """The runs page shows each stack's record over the two nights, the crashed server's reasons a click away."""
    crashed = frame.locator("tr.stack-record[data-stack='custom-crashing/onnx']")
    assert "4 of 4 (100 %)" in frame.locator("tr.stack-record[data-stack='custom/onnx'] td.share").inner_text()
    assert crashed.locator("td.share").inner_text() == "0 of 2 (0 %)"
    reason = crashed.locator("td.why > details li").first
    assert not reason.is_visible()  # behind the click
    crashed.locator("td.why > details > summary").click()
    assert "exited with code" in reason.inner_text() and reason.is_visible()
    whole = reason.locator("details.more pre")  # the log tail's end: one more click
    assert not whole.is_visible()
    reason.locator("details.more > summary").click()
    assert "FileNotFoundError" in whole.inner_text() and whole.is_visible()
    reason.locator("details.more > summary").click()  # closed again for the screenshot
    frame.locator("#record").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "reports-record.png"))
    if os.environ.get("SERVING_EVAL_DOCS_SCREENSHOT"):  # re-makes docs/reports-record.png
        page.screenshot(path=os.environ["SERVING_EVAL_DOCS_SCREENSHOT"])


def test_the_page_requires_an_airflow_session(login_server, published_run):
    """No session: 401, or Airflow's login page for a browser; a forged token: 403; Airflow's own token: allowed."""
    for path in ("/serving-eval/", published_run["report_path"]):
        status, _, body = login_server.get(path)
        assert status == 401 and published_run["run_id"].encode() not in body, (path, status, body[:200])
        status, headers, _ = login_server.get(path, {"Accept": "text/html"})
        assert status == 303 and headers["location"].startswith("/auth/login?next="), (path, status, headers)
        forged = jwt.encode({"sub": ADMIN, "role": "ADMIN", "exp": int(time.time()) + 600}, "x" * 64,
                            algorithm="HS512")
        assert login_server.get(path, {"Authorization": f"Bearer {forged}"})[0] == 403
        assert login_server.get(path, {"Cookie": f"_token={forged}"})[0] == 403
    token = login_server.token(ADMIN, login_server.admin_password())
    status, _, body = login_server.get("/serving-eval/", {"Authorization": f"Bearer {token}"})
    assert status == 200 and published_run["run_id"].encode() in body
    status, _, body = login_server.get(published_run["report_path"], {"Cookie": f"_token={token}"})
    assert status == 200 and body == published_run["report"]
    plugins = json.loads(login_server.get("/api/v2/plugins", {"Authorization": f"Bearer {token}"})[2])
    views = [v for p in plugins["plugins"] for v in p["external_views"] if v["url_route"] == "serving-eval"]
    assert views and views[0]["destination"] == "nav" and views[0]["category"] == "browse", plugins


def test_browser_logs_in_and_follows_a_run_to_its_report(login_server, published_run, tmp_path):
    require_browser()
    run_id = published_run["run_id"]
    with Chromium() as chromium:
        page = chromium.page()
        # Without a session: Airflow's login page, never the runs; a request without the cookie is refused.
        page.goto(login_server.base_url + "/serving-eval/")
        page.wait_for_url("**/auth/login?next=*")
        page.locator("input[name=password]").wait_for()
        assert run_id not in page.content()
        assert page.context.request.get(login_server.base_url + published_run["report_path"],
                                        max_redirects=0).status == 401
        page.screenshot(path=str(tmp_path / "refused-login-page.png"))

        # Airflow's own login form with the generated password, which comes back to the page.
        page.fill("input[name=username]", ADMIN)
        page.fill("input[name=password]", login_server.admin_password())
        page.click("button[type=submit]")
        page.wait_for_url("**/serving-eval/")
        page.get_by_role("link", name=run_id).wait_for()
        page.screenshot(path=str(tmp_path / "runs-after-login.png"))

        # Inside the UI: Browse -> Serving eval reports, shown in the UI's frame next to its navigation.
        page.goto(login_server.base_url + "/")
        page.get_by_role("button", name="Browse").click()
        page.get_by_role("menuitem", name="Serving eval reports").click()
        page.wait_for_url("**/plugin/serving-eval")
        frame = page.frame_locator("iframe[title='Serving eval reports']")
        row = frame.locator(f"tr.run[data-run-id='{run_id}']")
        row.wait_for()
        assert row.locator("td.status").inner_text() == "complete"
        assert row.locator("td.regressions").inner_text() == "0"
        page.screenshot(path=str(tmp_path / "ui-runs.png"))

        # Follow the run to its report, still inside the UI's frame.
        frame.get_by_role("link", name=run_id).click()
        page.wait_for_url("**/report.html")
        report = next(f for f in page.frames if f.parent_frame is not None and f.url.endswith("/report.html"))
        report.wait_for_load_state()
        assert run_id in report.content()
        plots = check_plots_drawn(report, tmp_path)
        page.screenshot(path=str(tmp_path / "ui-report.png"), full_page=True)
        page.reload()  # the UI's address now names the report: reloading it shows the report again
        from playwright.sync_api import expect

        expect(page.locator("iframe[title='Serving eval reports']")).to_have_attribute(
            "src", published_run["report_path"], timeout=TIMEOUT_MS)
        report_page = chromium.page()  # the report on its own, full length
        report_page.context.add_cookies(page.context.cookies())
        report_page.goto(login_server.base_url + published_run["report_path"])
        assert check_plots_drawn(report_page.main_frame, tmp_path) == plots
        report_page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    print(f"screenshots in {tmp_path}: {sorted(p.name for p in tmp_path.glob('*.png'))}")
