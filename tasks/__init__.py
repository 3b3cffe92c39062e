"""Pipeline steps of the nightly serving evaluation, as plain Python (no Airflow imports)."""

PIPELINE_VERSION = "0.1.0"
