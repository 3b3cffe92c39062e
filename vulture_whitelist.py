"""Names vulture cannot see used: frameworks call them by name, or code reads them through a string or asdict().

`make lint` runs vulture over tasks, dags, plugins, benchmarks, docker and tests with this file; a name belongs
here only with its reason. Never imported.
"""

# ruff: noqa: B018 - each line is a use for vulture, nothing else

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# pytest calls these by name
_.pytest_plugins  # tests/conftest.py: plugins pytest loads
_.pytest_sessionfinish  # a hook
_.exitstatus  # the hook's argument, passed by keyword
_.pytest_collection_modifyitems  # a hook
_.pytest_configure  # hooks of tests/prebuild.py
_.pytest_sessionstart
_.pytest_runtest_setup
_.pytest_unconfigure
_.pytestmark  # a module's markers
# fixtures a test requests by parameter name for their effect alone (the fixture functions are @pytest.fixture)
_.services_present
_.cli_env
_.private_cache
_.fake_runtime

# the standard library calls these by name
_.do_GET  # http.server.BaseHTTPRequestHandler: one method per HTTP verb
_.do_POST
_.do_PUT
_.do_HEAD
_.do_DELETE
_.log_message  # BaseHTTPRequestHandler: overridden to keep test servers quiet
_.handle_DATA  # aiosmtpd: a handler's hook for each message (tests/integration/test_notifications.py)
_.protocol_version  # BaseHTTPRequestHandler: HTTP/1.1 keep-alive
_.daemon_threads  # socketserver.ThreadingMixIn
_.redirect_request  # urllib.request.HTTPRedirectHandler
_.connection_lost  # asyncio.Protocol (tasks/loadgen/http.py)
_.exc_info  # a WSGI start_response's third argument (tasks/store/embedded_s3_server.py)
_.force  # docker SDK's Container.remove(force=...), mirrored by the test's fake container

# attributes a library reads after they are set
_.tv_sec  # ctypes timespec fields the C library reads (tasks/loadgen/pacer.py)
_.tv_nsec
_.map_entry  # protobuf descriptor option (tasks/loadgen/protocols/torchserve_grpc.py)
_.autocommit  # psycopg2 connection setting (tests/celery_cluster.py)
_.progress_bars  # Great Expectations context variable (tasks/validate/expectations.py)
_.intra_op_num_threads  # onnxruntime.SessionOptions (docker/*/)
_.inter_op_num_threads

# serving frameworks call these by name (docker/<runtime>/)
_.app_from_env  # uvicorn's factory, named in a string (docker/custom/app.py)
_.get_input_types  # KServe Model
_.get_output_types
_.response_headers  # KServe Model.predict's keyword argument
_.RowsHandler  # TorchServe handler class, named in the model archive
_.initialize  # TorchServe and Triton Python backend
_.initialized  # TorchServe BaseHandler
_.TritonPythonModel  # Triton Python backend's model class
_.finalize  # Triton Python backend

# dataclass fields read through asdict()/getattr by name (published columns, JSON records)
_.warmup_requests  # Measurement.to_dict(): published columns
_.latency_ms_p90
_.latency_ms_p95
_.latency_ms_p999
# each percentile's claim (Measurement.to_dict(): MEASUREMENT_COLUMNS builds their names with an f-string)
_.latency_ms_p50_at_least
_.latency_ms_p90_ci_low
_.latency_ms_p90_ci_high
_.latency_ms_p90_at_least
_.latency_ms_p95_ci_low
_.latency_ms_p95_ci_high
_.latency_ms_p95_at_least
_.latency_ms_p99_ci_high
_.latency_ms_p999_ci_low
_.latency_ms_p999_ci_high
_.gpu_util_pct  # ResourceSummary.to_dict(): RESOURCE_COLUMNS
_.gpu_mem_mb
_.gpu_power_w
_.server_throttled_pct  # HostState.to_dict(): the host_state JSON
_.p99_ms  # Trial.to_dict() (tasks/plan/tune.py): the tuning record
_.window_spread  # Metric field read by name: metrics_where("window_spread")
# ServerCounts' whole-point increases: written by tasks/loadgen/coordinator.py, read by nothing (that module is being
# reworked into one server reader under issue 31; remove them there)
_.server_requests_total
_.client_requests_total
