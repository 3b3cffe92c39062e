"""The model catalogue (one YAML spec per model) and the builders that make source models."""
