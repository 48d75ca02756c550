import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

    def forward(self, x):
        print("block input", x.shape)
        h = self.norm(x)
        scale = h.abs().mean().item()
        return h + self.mlp(h) * scale


class Net(nn.Module):
    def __init__(self, d=8, n=2):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


class LoopNet(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            print("layer input", x.shape)
            x = layer(x)
            s = x.abs().mean().item()
            x = x + layer(x) * s
        return x


def mend_target_net():
    torch.manual_seed(0)
    return Net(), (torch.randn(2, 8),)


def mend_target_loop():
    torch.manual_seed(0)
    return LoopNet(), (torch.randn(2, 8),)
