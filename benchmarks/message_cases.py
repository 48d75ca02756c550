"""One small function per graph-break pattern, recorded on each torch by record_messages.py.

Each entry of CASES names the function, the rule the break is (docs/internals.md), and
whether Dynamo skips the frame. What Dynamo says about it (the log text, gb_type, the
registry id, explain's counts) is never written here: it is recorded.
Line numbers matter to the recordings; add cases at the end.
"""

import copy
import logging
import warnings

import numpy as np
import torch

log = logging.getLogger("mend.cases")


def branch(x):
    y = x * 2
    if y.sum() > 0:
        return y
    return -y


def prt(x):
    print("hello")
    return x + 1


def item(x):
    s = x.sum().item()
    return x * s


def loop(x):
    for i in range(2):
        print(i)
        x = x + 1
    return x


def nonz(x):
    idx = x.nonzero()
    return idx.sum()


def logit(x):
    log.warning("hi %s", 1)
    return x + 1


def dc(x):
    y = copy.deepcopy(x)
    return y + 1


def tl(x):
    v = x.tolist()
    return torch.tensor(v) + 1


def uq(x):
    return torch.unique(x).sum() + x.sum()


def wn(x):
    warnings.warn("careful")
    return x + 1


def fl(x):
    y = x * 2
    f = float(y.sum())
    return x * f


@torch.compiler.disable
def dis(x):
    return x + 1


def sk(x):
    y = x * 2
    y = dis(y)
    return y + 1


def asrt(x):
    assert (x > -100).all(), "neg"
    return x + 1


def check_msg(x):
    # a message closure on a symbolic size (compiled with dynamic=True); recorded as no break on
    # 2.11, 2.13 and 2.15: 2.11's "Can't extract message from torch._check()" needs more than this
    torch._check(x.shape[0] > 1, lambda: "too short")
    return x + 1


def mask_index(x):
    valid = x > 0
    return x[valid].mean()


def masked_select(x):
    kept = torch.masked_select(x, x > 0)
    return kept.sum()


def np_interp(x):
    calibrated = np.interp(x.detach().numpy(), [0.0, 1.0], [1.0, 2.0])
    return torch.as_tensor(calibrated)


class _Router(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = torch.nn.Linear(8, 4)


_router = _Router()


def param_ctor(x):
    w = torch.nn.Parameter(x.clone())
    return w * 2


def module_to(x):
    y = x.to(torch.float32) * 2
    _router.classifier = _router.classifier.to(torch.float32)
    return _router.classifier(y)


# name: (function, rule, frame_skipped); DYNAMIC: cases compiled with dynamic=True
DYNAMIC = {"check-msg"}
CASES = {
    "branch": (branch, "GM101", False),
    "prt": (prt, "GM201", False),
    "item": (item, "GM301", False),
    "loop": (loop, "GM201", True),
    "nonz": (nonz, "GM501", False),
    "logit": (logit, "GM202", False),
    "dc": (dc, "GM601", False),
    "tl": (tl, "GM302", False),
    "uq": (uq, "GM503", False),
    "wn": (wn, "GM203", False),
    "fl": (fl, "GM303", False),
    "sk": (sk, "GM605", False),
    "asrt": (asrt, "GM401", False),
    "check-msg": (check_msg, "GM401", False),
    "mask-index": (mask_index, "GM502", False),
    "masked-select": (masked_select, "GM505", False),
    "np-interp": (np_interp, "GM604", False),
    "param-ctor": (param_ctor, "GM607", False),
    "module-to": (module_to, "GM607", False),  # torch 2.11 breaks here; 2.13 traces it
}
