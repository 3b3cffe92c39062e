"""Builders of source models. They import torch/tensorflow and only ever run inside a runtime."""
