"""Torch source models built from plain modules with seeded weights (no hub is reachable).

ResNet-50 is written out from `torch.nn` modules (torchvision does not import beside torch 2.13); BERT comes
from a `transformers` config, never a download. Every builder takes `seed` and returns a module in eval mode.
"""

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


def build_tiny_cnn(seed: int, channels: int = 3, width: int = 8, classes: int = 10):
    """Two conv blocks with batch norm, global pooling and a linear head: a small image classifier."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, classes),
    )
    _randomise_batch_norm(model, seed)
    return model.eval()


def build_resnet50(seed: int, classes: int = 1000):
    """ResNet-50 (v1.5: stride in the 3x3 conv), bottleneck blocks [3, 4, 6, 3], seeded weights."""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, in_ch: int, width: int, stride: int) -> None:
            super().__init__()
            out_ch = width * self.expansion
            self.body = nn.Sequential(
                nn.Conv2d(in_ch, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(inplace=True),
                nn.Conv2d(width, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch),
            )
            self.shortcut = nn.Identity()
            if stride != 1 or in_ch != out_ch:
                self.shortcut = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False),
                                              nn.BatchNorm2d(out_ch))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.body(x) + self.shortcut(x))

    torch.manual_seed(seed)
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1),
    ]
    in_ch = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(in_ch, width, stride if i == 0 else 1))
            in_ch = width * Bottleneck.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_ch, classes)]
    model = nn.Sequential(*layers)
    _randomise_batch_norm(model, seed)
    return model.eval()


def build_bert(seed: int, layers: int = 12, hidden: int = 768, heads: int = 12, intermediate: int = 3072,
               vocab_size: int = 30522, max_positions: int = 512):
    """A `transformers` BertModel from a BertConfig (random seeded weights, no download).

    forward(input_ids, attention_mask) -> (last_hidden_state, pooler_output), positional so every exporter
    sees the spec's input order.
    """
    import torch
    from torch import nn
    from transformers import BertConfig, BertModel

    class BertEncoder(nn.Module):
        def __init__(self, bert: nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
            return out.last_hidden_state, out.pooler_output

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=intermediate, max_position_embeddings=max_positions,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return BertEncoder(BertModel(config, add_pooling_layer=True)).eval()


def _randomise_batch_norm(model, seed: int) -> None:
    """Give batch norms seeded non-trivial statistics, so eval-mode BN is not the identity."""
    import torch
    from torch import nn

    gen = torch.Generator().manual_seed(seed + 1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) * 0.5 + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
