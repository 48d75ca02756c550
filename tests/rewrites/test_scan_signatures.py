"""The static scan reads what a file's own helpers return and take (rewrites/analyzer.py,
``_infer_signatures``): the breaks transformers' Longformer and Reformer have where a value
becomes a tensor in another function of the same file, and the cases that must stay quiet."""

from __future__ import annotations

from rewrites.scan import scan_source

# Longformer's global attention, as transformers writes it: a tuple of tensors returned by a
# static helper, then handed by keyword and by position to two more methods
LONGFORMER = '''import torch
from torch import nn


class Attention(nn.Module):
    def forward(self, hidden_states, is_index_global_attn):
        max_num, nonzero, local_nonzero = self._get_global_attn_indices(is_index_global_attn)
        out = self._with_global(hidden_states, max_num_global_attn_indices=max_num, idx=nonzero)
        return out + self._scores(hidden_states, max_num, local_nonzero)

    @staticmethod
    def _get_global_attn_indices(is_index_global_attn):
        num = is_index_global_attn.long().sum(dim=1)
        max_num = num.max()
        nonzero = is_index_global_attn.nonzero(as_tuple=True)
        local = (num == 0).nonzero(as_tuple=True)
        return max_num, nonzero, local

    def _with_global(self, attn_probs, max_num_global_attn_indices, idx):
        rest = attn_probs.size(-1) - max_num_global_attn_indices
        return attn_probs.narrow(-1, max_num_global_attn_indices, rest)

    def _scores(self, hidden_states, max_num, idx):
        scores = hidden_states.new_zeros(2, max_num, 4)
        assert list(scores.size()) == [2, max_num, 4], f"got {scores.size()}"
        return scores
'''

# Reformer's padding: the chunk length is a config int on one path and `np.lcm(...)` on
# another, and Dynamo traces the NumPy value as a tensor
REFORMER = '''import numpy as np
import torch
from torch import nn


def _chunk_len(config):
    if len(set(config.attn_layers)) == 1:
        return config.chunk_length
    return np.lcm(config.lsh_chunk_length, config.local_chunk_length)


class Model(nn.Module):
    def forward(self, input_ids):
        input_shape = input_ids.size()
        chunk = _chunk_len(self.config)
        must_pad = input_shape[-1] % chunk != 0 and input_shape[-1] > 4
        if must_pad:
            input_ids = nn.functional.pad(input_ids, (0, 1))
        return input_ids
'''


def _found(src: str) -> list[tuple[str, int]]:
    result = scan_source(src, path="m.py")
    assert result.error is None
    return sorted((f.rule, f.line) for f, _k, _r in result.findings)


def _line(src: str, text: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if text in line)


def test_a_tensor_returned_by_a_helper_and_passed_on_is_a_tensor():
    found = _found(LONGFORMER)
    assert ("GM303", _line(LONGFORMER, "attn_probs.narrow(")) in found  # narrow by a tensor count
    assert ("GM401", _line(LONGFORMER, "assert list(scores.size())")) in found  # a list holding it, compared


def test_a_parameter_one_call_passes_a_number_to_stays_unknown():
    src = LONGFORMER.replace("        return out + self._scores(hidden_states, max_num, local_nonzero)\n",
                             "        return out + self._scores(hidden_states, max_num, local_nonzero) \\\n"
                             "            + self._scores(hidden_states, 3, local_nonzero)\n")
    found = _found(src)
    assert ("GM401", _line(src, "assert list(scores.size())")) not in found
    assert ("GM303", _line(src, "attn_probs.narrow(")) in found  # its only call passes the tensor


def test_a_helper_that_also_returns_a_number_gives_no_tensor():
    src = LONGFORMER.replace("        return max_num, nonzero, local\n",
                             "        if num.numel() == 0:\n            return 0, None, None\n"
                             "        return max_num, nonzero, local\n")
    found = _found(src)
    assert ("GM303", _line(src, "attn_probs.narrow(")) not in found
    assert ("GM401", _line(src, "assert list(scores.size())")) not in found


def test_a_numpy_value_from_a_helper_decides_a_branch():
    found = _found(REFORMER)
    assert ("GM103", _line(REFORMER, "must_pad = ")) in found  # `and` on the NumPy comparison
    assert ("GM101", _line(REFORMER, "if must_pad:")) in found


def test_numpy_types_and_python_helpers_stay_quiet():
    src = REFORMER.replace("np.lcm(config.lsh_chunk_length, config.local_chunk_length)",
                           "int(np.iinfo(np.int32).max // config.local_chunk_length)")
    assert _found(src) == []
