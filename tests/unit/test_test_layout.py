"""The tests mirror the code: tasks/<package>/<module>.py is unit-tested in tests/unit/<package>/test_<module>.py,
which imports it; a module without such a file is listed below with the tests that cover it instead."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "tests" / "unit"

# Module (dotted, under tasks/) -> why it has no unit test file, naming the tests that cover it.
RENDERED_BY_PAGE = ("a section of the page, rendered through tasks/report/page.py: tests/unit/report/test_page.py and, "
                    "byte for byte, tests/unit/test_report_golden.py")
WITHOUT_UNIT_FILE = {
    "tasks.cli.contract": "`tasks.cli reference` is run by tests/unit/core/test_results.py "
                          "(writes and checks the page)",
    "tasks.cli.deploy": "`deploy init` runs as the compose deployment's init step: tests/integration/test_compose.py",
    "tasks.cli.doctor": "through main(): tests/unit/cli/test_main.py; the checks it prints: "
                        "tests/unit/measure/test_hostcheck.py",
    "tasks.cli.engine": "`engine run` holds the Docker engine for `make test`; the engine itself: "
                        "tests/unit/runtimes/test_docker_engine.py, tests/integration/test_docker_engine.py",
    "tasks.cli.images": "a shell over tasks/runtimes/images.py: tests/integration/test_docker_images.py, "
                        "tests/integration/test_compose.py",
    "tasks.cli.local": "`airflow` is started by tests/reliability/test_stopping.py; `demo` is `airflow dags test` "
                       "as in tests/integration/test_pipeline_dag.py",
    "tasks.cli.output": "the summary table and exit codes of tests/integration/test_cli_run.py and "
                        "tests/integration/test_contention.py (exit 1 on a contended point)",
    "tasks.cli.prepare": "runtime venvs before a CLI run: tests/integration/test_cli_run.py",
    "tasks.cli.runs": "through main(): tests/unit/cli/test_main.py (`plan`), tests/integration/test_cli_run.py (`run`)",
    "tasks.cli.store": "the store commands: tests/integration/test_cli_store.py, "
                       "tests/integration/test_results_readers.py",
    "tasks.convert.artifact": "a record type, built by every conversion: tests/integration/test_convert.py",
    "tasks.convert.parity": "runs inside the converter runtimes: tests/integration/test_convert.py "
                            "(parity at batch 1 and more, a perturbed artifact caught)",
    "tasks.convert.sources": "bring-your-own sources, local and s3://: tests/integration/test_convert.py",
    "tasks.core.errors": "exception types, raised and matched by most tests, "
                         "e.g. tests/reliability/test_input_faults.py",
    "tasks.core.faces": "every package's lazy face: tests/unit/test_layers.py (each package opens with a face)",
    "tasks.core.metadata": "provenance on every row: tests/integration/test_regress_pipeline.py, "
                           "tests/integration/test_pipeline_dag.py",
    "tasks.core.names": "safe run ids and refused names: tests/reliability/test_input_faults.py",
    "tasks.core.paths": "where things are, used throughout, e.g. tests/integration/test_convert.py",
    "tasks.loadgen.window_reader": "an interface: its test double in tests/unit/loadgen/test_coordinator.py, its live "
                                   "implementation in tests/unit/measure/test_window_reader.py",
    "tasks.loadgen.grpc_engine": "gRPC load against a real Triton: tests/integration/test_loadgen_grpc.py, "
                                 "tests/integration/test_wires_servers.py",
    "tasks.loadgen.protocols.base": "codec constants and base class, through every codec's unit file, "
                                    "e.g. tests/unit/loadgen/protocols/test_kserve_v2_binary.py",
    "tasks.loadgen.protocols.bentoml_json": "against a real BentoML: tests/integration/test_server_bentoml.py",
    "tasks.loadgen.protocols.http_get": "the stand-in codec of tests/unit/loadgen/test_http_engine.py and "
                                        "tests/integration/test_loadgen_servers.py",
    "tasks.loadgen.protocols.kserve_v2_rest": "against the custom service and Triton: "
                                              "tests/integration/test_loadgen_servers.py",
    "tasks.loadgen.protocols.tfserving_rest": "unit-tested with the server in "
                                              "tests/unit/serve/servers/test_tfserving.py (against a stand-in); "
                                              "in a run: tests/integration/test_docker_servers.py",
    "tasks.loadgen.protocols.torchserve_rest": "against a real TorchServe: tests/integration/test_server_torchserve.py",
    "tasks.measure.duet": "real servers per pair: tests/integration/test_regress_pipeline.py; its host state: "
                          "tests/unit/measure/test_hoststate.py",
    "tasks.measure.engine_speed": "the engine in process, in every measured session: "
                                  "tests/integration/test_pipeline_dag.py",
    "tasks.measure.served_check": "served outputs against the reference: tests/integration/test_wires_servers.py",
    "tasks.measure.session": "a whole session: tests/integration/test_pipeline_dag.py, "
                             "tests/integration/test_contention.py, tests/integration/test_overload.py",
    "tasks.measure.context": "a session's shared state, built by tests/unit/test_pipeline.py; a real one in "
                             "tests/integration/test_pipeline_dag.py",
    "tasks.measure.life": "one server life: tests/integration/test_pipeline_dag.py, "
                          "tests/integration/test_overload.py, tests/integration/test_docker_faults.py",
    "tasks.measure.sweep": "a sweep cell over faked points: tests/unit/test_pipeline.py; real ones in "
                           "tests/integration/test_celery_hosts.py",
    "tasks.measure.tune": "a tuning search on real stacks: tests/integration/test_tune_servers.py",
    "tasks.plan.config": "RunConfig, checked by the plan's unit files, e.g. tests/unit/plan/test_cells.py, "
                         "tests/unit/test_dag_integrity.py",
    "tasks.plan.control": "the control cell's A/A duet: tests/integration/test_regress_pipeline.py",
    "tasks.regress.annotations": "exclusions through the CLI: tests/integration/test_regress_pipeline.py",
    "tasks.regress.check": "the regression check of a run: tests/integration/test_regress_pipeline.py",
    "tasks.report.changes": RENDERED_BY_PAGE,
    "tasks.report.checks": RENDERED_BY_PAGE,
    "tasks.report.contention": RENDERED_BY_PAGE,
    "tasks.report.overload": RENDERED_BY_PAGE,
    "tasks.report.provenance": RENDERED_BY_PAGE,
    "tasks.report.recommendation": RENDERED_BY_PAGE,
    "tasks.report.features": "the features table, rendered by tests/unit/measure/test_lifecycle.py; a real run's: "
                             "tests/integration/test_report_run.py",
    "tasks.report.lifecycle": "the lifecycle section, rendered by tests/unit/measure/test_lifecycle.py; a real run's: "
                              "tests/integration/test_report_run.py",
    "tasks.report.run_index": "the plugin's run list: tests/integration/test_reports_plugin.py",
    "tasks.report.trend": "trend.json at publish time: tests/integration/test_cli_store.py (trend skips runs of other "
                          "server versions)",
    "tasks.runtimes.ports": "free ports for real servers: tests/integration/test_server_triton.py",
    "tasks.runtimes.proctree": "process trees of real servers: tests/unit/serve/launchers/test_process.py, "
                               "tests/reliability/test_task_killed.py",
    "tasks.runtimes.venvs": "runtime venvs built and cached: tests/integration/test_convert.py, "
                            "tests/integration/test_store_runtimes.py",
    "tasks.serve.base": "the Server interface, through every server's tests, "
                        "e.g. tests/integration/test_server_triton.py",
    "tasks.serve.hostlock": "one session per host, held by every session: tests/integration/test_pipeline_dag.py",
    "tasks.serve.images": "images before a container run: tests/integration/test_docker_pipeline.py",
    "tasks.serve.launchers.base": "the Launcher interface and recorded handles: "
                                  "tests/unit/serve/launchers/test_process.py, "
                                  "tests/reliability/test_task_killed.py",
    "tasks.serve.options": "ServingOptions, built by every server's tests, e.g. tests/unit/serve/test_budget.py, "
                           "tests/integration/test_server_custom.py",
    "tasks.store.embedded_s3": "the suite's S3 (conftest's embedded_s3): tests/integration/test_embedded_s3_state.py",
    "tasks.store.embedded_s3_server": "its server process: tests/integration/test_embedded_s3_state.py",
    "tasks.store.history": "reading the store: tests/integration/test_results_readers.py, "
                           "tests/integration/test_publish.py",
    "tasks.store.layout": "run folders and safe ids: tests/integration/test_results_readers.py",
    "tasks.store.migrate": "old-layout runs moved: tests/integration/test_results_readers.py",
    "tasks.store.publish": "publishing to S3: tests/integration/test_publish.py, "
                           "tests/reliability/test_store_faults.py",
    "tasks.store.runtimes": "runtime snapshots in the store: tests/integration/test_store_runtimes.py",
    "tasks.validate.overload": "unit-tested with the phase's figures in tests/unit/loadgen/test_overload.py",
}
# Unit files that check the repository rather than one module (tests/unit/test_<name>.py).
REPOSITORY_CHECKS = {"test_dag_integrity.py", "test_docs_links.py", "test_layers.py", "test_test_layout.py",
                     "test_published_columns.py", "test_report_golden.py", "test_code_shape.py",
                     "test_prebuild.py"}


def modules() -> dict[str, Path]:
    """Dotted name -> the unit file it would have, for every module under tasks/ (package faces excluded)."""
    found = {}
    for path in sorted((REPO / "tasks").rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        rel = path.relative_to(REPO).with_suffix("")
        found[".".join(rel.parts)] = UNIT.joinpath(*rel.parts[1:-1]) / f"test_{rel.name}.py"
    return found


def imported(path: Path) -> set[str]:
    """Every module a file imports, `from a.b import c` counting as both a.b and a.b.c."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_every_module_has_a_unit_file_or_a_reason():
    missing = [name for name, unit in modules().items() if not unit.exists() and name not in WITHOUT_UNIT_FILE]
    assert missing == [], f"modules with neither tests/unit/<package>/test_<module>.py nor a reason: {missing}"


def test_no_reason_is_stale():
    known = modules()
    gone = [name for name in WITHOUT_UNIT_FILE if name not in known]
    assert gone == [], f"listed modules that no longer exist: {gone}"
    has_file = [name for name in WITHOUT_UNIT_FILE if known[name].exists()]
    assert has_file == [], f"listed modules that have a unit file now (drop their entry): {has_file}"


def test_each_reason_names_tests_that_exist():
    for name, reason in WITHOUT_UNIT_FILE.items():
        paths = re.findall(r"tests/[\w/]+\.py", reason)
        assert paths or reason.startswith("UNCOVERED:"), f"{name}: the reason names no test file: {reason!r}"
        absent = [p for p in paths if not (REPO / p).exists()]
        assert absent == [], f"{name}: the reason names test files that do not exist: {absent}"


def test_each_unit_file_imports_the_module_it_is_named_after():
    by_file = {unit: name for name, unit in modules().items()}
    wrong = []
    for path in sorted(UNIT.rglob("test_*.py")):
        rel = path.relative_to(UNIT)
        if rel.parts[0] == "benchmarks":  # tests/unit/benchmarks/test_<script>.py: benchmarks/<script>.py
            module = f"benchmarks.{path.stem.removeprefix('test_')}"
        elif len(rel.parts) == 1 and rel.name in REPOSITORY_CHECKS:
            continue
        elif path in by_file:
            module = by_file[path]
        else:
            wrong.append(f"{rel}: no module tasks/{rel.parent}/{path.stem.removeprefix('test_')}.py")
            continue
        if module not in imported(path):
            wrong.append(f"{rel}: does not import {module}")
    assert wrong == []
