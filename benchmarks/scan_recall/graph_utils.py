"""Graph utilities in the style of graph-learning libraries: degree, self loops, dense
adjacency, message passing with scatter, and a BFS that runs until the frontier is empty."""

import torch
from torch import Tensor, nn


def degree(index: Tensor, num_nodes: int) -> Tensor:
    out = torch.zeros(num_nodes, dtype=torch.float)
    return out.scatter_add_(0, index, torch.ones(index.numel()))


def add_self_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    loop = torch.arange(num_nodes).unsqueeze(0).repeat(2, 1)
    return torch.cat([edge_index, loop], dim=1)


def maybe_num_nodes(edge_index: Tensor) -> int:
    return int(edge_index.max()) + 1 if edge_index.numel() > 0 else 0


def to_dense_adj(edge_index: Tensor) -> Tensor:
    n = maybe_num_nodes(edge_index)
    adj = torch.zeros(n, n)
    adj[edge_index[0], edge_index[1]] = 1.0
    return adj


def remove_isolated(edge_index: Tensor, num_nodes: int) -> Tensor:
    used = torch.zeros(num_nodes, dtype=torch.bool)
    used[edge_index.flatten()] = True
    return used.nonzero().flatten()


def bfs_levels(edge_index: Tensor, source: int, num_nodes: int) -> Tensor:
    level = torch.full((num_nodes,), -1, dtype=torch.long)
    level[source] = 0
    frontier = torch.zeros(num_nodes, dtype=torch.bool)
    frontier[source] = True
    depth = 0
    while frontier.any():
        src_active = frontier[edge_index[0]]
        nxt = torch.zeros(num_nodes, dtype=torch.bool)
        nxt[edge_index[1][src_active]] = True
        nxt &= level < 0
        depth += 1
        level[nxt] = depth
        frontier = nxt
    return level


class GCNConv(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        n = x.shape[0]
        edge_index = add_self_loops(edge_index, n)
        deg = degree(edge_index[1], n)
        norm = deg.pow(-0.5)
        w = norm[edge_index[0]] * norm[edge_index[1]]
        h = self.lin(x)
        out = torch.zeros_like(h)
        out.index_add_(0, edge_index[1], h[edge_index[0]] * w[:, None])
        return out


def _graph():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 10, (2, 30), generator=g)


def mend_target_gcn():
    torch.manual_seed(0)
    return GCNConv(8, 8).eval(), (torch.randn(10, 8), _graph())


def mend_target_dense():
    return to_dense_adj, (_graph(),)


def mend_target_isolated():
    return remove_isolated, (_graph(), 12)


def mend_target_bfs():
    return bfs_levels, (_graph(), 0, 10)
