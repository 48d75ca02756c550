"""Timing and profiling helpers as training scripts write them: wall-clock reads around a
step, a stats dict, and guards that keep the bookkeeping out of compiled code. The caller
compiles the step functions itself, in the usual spellings."""

import time
import timeit
from collections import defaultdict

import torch
from torch import nn

STATS = defaultdict(float)


class MLP(nn.Module):
    def __init__(self, dim: int = 16):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def timed_step(model: MLP, x: torch.Tensor):
    start = time.perf_counter()
    y = model(x)
    STATS["step_s"] += time.perf_counter() - start
    return y


def wall_clock_step(model: MLP, x: torch.Tensor):
    y = model(x) * 2
    STATS["at"] = time.time()
    return y + 1


def guarded_step(model: MLP, x: torch.Tensor):
    if not torch.compiler.is_compiling():
        t0 = time.perf_counter()
    y = model(x)
    if not torch.compiler.is_compiling():
        STATS["guarded_s"] += time.perf_counter() - t0
        print("step took", STATS["guarded_s"])
    return y


def dynamo_guarded_step(model: MLP, x: torch.Tensor):
    y = model(x)
    if torch._dynamo.is_compiling():
        return y
    STATS["eager_calls"] += 1
    print("eager call at", timeit.default_timer())
    return y


class Trainer:
    def __init__(self, dim: int = 16):
        self.model = MLP(dim)
        self.step_fn = torch.compile(self.train_step, backend="eager")

    def train_step(self, x: torch.Tensor):
        tick = time.monotonic()
        out = self.model(x).sum()
        self.last = time.monotonic() - tick
        return out


@torch.compile(dynamic=False, backend="eager")
def decorated_step(x: torch.Tensor):
    y = x.sin() * 2
    t = time.process_time_ns()
    return y + t


def mend_target_timed():
    torch.manual_seed(0)
    return timed_step, (MLP().eval(), torch.randn(4, 16))


def mend_target_wall_clock():
    torch.manual_seed(0)
    return wall_clock_step, (MLP().eval(), torch.randn(4, 16))


def mend_target_guarded():
    torch.manual_seed(0)
    return guarded_step, (MLP().eval(), torch.randn(4, 16))


def mend_target_dynamo_guarded():
    torch.manual_seed(0)
    return dynamo_guarded_step, (MLP().eval(), torch.randn(4, 16))


def mend_target_trainer():
    torch.manual_seed(0)
    trainer = Trainer()
    return trainer.train_step, (torch.randn(4, 16),)


def mend_target_decorated():
    return decorated_step, (torch.randn(4, 16),)
