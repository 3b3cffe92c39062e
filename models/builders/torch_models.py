"""Torch source models built from plain modules with seeded weights (no hub is reachable)."""

from __future__ import annotations


def build_mlp(seed: int, in_features: int, hidden: int, out_features: int):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(in_features, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, out_features),
    )
    return model.eval()
