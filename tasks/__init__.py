"""Pipeline steps of the nightly serving evaluation, as plain Python (no Airflow imports)."""
