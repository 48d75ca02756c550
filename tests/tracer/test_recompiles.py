"""Recompiles surfaced by later calls (``mend analyze --calls``) and explained (GM7xx)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_derived_calls_grow_batch_and_sequence_consistently():
    import torch

    from graphmend.core.calls import derived_calls

    x = torch.randn(2, 5, 8)
    ids = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    w = torch.randn(8, 8)  # neither size: kept
    calls = derived_calls((x, ids), {"w": w, "n": 3}, 3)
    assert len(calls) == 2
    (a2, k2), (a3, k3) = calls
    assert a2[0].shape == (3, 6, 8) and a2[1].shape == (3, 6) and k2["w"].shape == (8, 8) and k2["n"] == 3
    assert a3[0].shape == (4, 8, 8) and a3[1].shape == (4, 8)
    # new rows repeat existing ones: ids stay ids the model has seen
    assert set(a3[1].flatten().tolist()) <= set(ids.flatten().tolist())
    assert torch.equal(a2[1][:2, :5], ids)
    assert derived_calls((x,), {}, 1) == [] and derived_calls((3,), {}, 3) == []


def test_target_calls_override_derived_ones_and_bad_ones_name_the_target():
    import torch

    from graphmend.core.targets import Target, TargetError, normalise
    from tracer.worker import later_calls

    x = torch.randn(3, 4)
    derived, by_mend, batch_only = later_calls(normalise((torch.nn.Linear(4, 4), (x,)), "t"), 3, "t")
    assert by_mend and [a[0].shape for a, _ in derived] == [(4, 5), (5, 7)]
    # dim 1 may be features: the fallback grows the batch alone
    assert [a[0].shape for a, _ in batch_only] == [(4, 4), (5, 4)]
    given = normalise(Target(torch.nn.Linear(4, 4), (x,), calls=[((x,), {}), [[x], {"y": 1}]]), "t")
    calls, by_mend, _ = later_calls(given, 3, "t")
    assert not by_mend and len(calls) == 2 and calls[1][1] == {"y": 1}
    assert later_calls(given, 1, "t") == ([], True, [])  # --calls 1: the first call only
    with pytest.raises(TargetError, match=r"^t: Target.calls\[0\] must be an \(args, kwargs\) pair, got Tensor"):
        later_calls(normalise(Target(torch.nn.Linear(4, 4), (x,), calls=[x]), "t"), 3, "t")


# failed guards as torch 2.13 words them (the `recompiles` artifact), and the cause each names
@pytest.mark.parametrize("reason,rule,expression", [
    ("self.step == 0", "GM702", "self.step"),
    ("L['self'].temperature == 0.5", "GM702", "self.temperature"),
    ("s == 0.5 (1 older compiled version(s) failed their guards too)", "GM702", "s"),
    ("len(xs) == 2", "GM704", "len(xs)"),
    ("len(L['xs']) == 2", "GM704", "len(xs)"),
    ("2 <= x.size()[1] <= 4", "GM701", "x.shape[1]"),
    ("tensor 'x' size mismatch at index 0. expected 3, actual 4", "GM701", "x.shape[0]"),
    ("tensor 'mems' rank mismatch. expected 1, actual 3", "GM701", "mems.dim()"),  # torchaudio's Emformer
    ("___check_type_id(self._modules['act'], 93979718194848), type=<class 'torch.nn.modules.activation.ReLU'>",
     "GM703", "self.act"),
    ("___check_obj_id(act, 140282207413776), type=<class 'builtin_function_or_method'>", "GM703", "act"),
    ("GLOBAL_STATE changed: grad_mode ", "GM705", "grad_mode"),
    ("tensor 'x' requires_grad mismatch. expected requires_grad=0", "GM705", "x.requires_grad"),
    ("tensor 'x' dtype mismatch. expected Float, actual Double", "GM705", "x.dtype"),
    ("tensor 'kwargs['input_ids']' size mismatch at index 1. expected 5, actual 6", "GM701", "kwargs['input_ids'].shape[1]"),
    ("not args (4 older compiled version(s) failed their guards too)", "GM704", "args"),
    ("max_num_global_attn_indices.item() != 1", "GM702", "max_num_global_attn_indices.item()"),
    # a tensor attribute now None (diffusers' Heun schedulers: self.dt between their two stages)
    ("expected type of 'self.dt' to be a tensor type, ' but found <class 'NoneType'> (1 older compiled "
     "version(s) failed their guards too)", "GM703", "self.dt"),
    ("expected type of 'L['self'].model_outputs[1]' to be a tensor type, ' but found <class 'NoneType'>",
     "GM703", "self.model_outputs[1]"),
    ('Duplicate tensors found: ["timestep", "prev_timestep"]', "GM703", None),  # two arguments, one tensor
    # the guard on a tensor ran on the None that stands there now, and says no name (timm's Sequencer)
    ("'NoneType' object has no attribute 'stride' (1 older compiled version(s) failed their guards too)",
     "GM703", None),
    ("something Dynamo has not said before", "GM799", None),
])
def test_failed_guard_names_its_cause(reason, rule, expression):
    from tracer.classify import classify_recompile, guarded_expression

    assert classify_recompile(reason) == rule
    assert guarded_expression(reason) == expression


def test_first_size_change_is_automatic_dynamic_and_the_limit_is_gm706():
    from graphmend.core.model import Recompile
    from tracer.classify import classify_recompiles
    from tracer.messages import parse_recompile_limit

    size = "tensor 'kwargs['x']' size mismatch at index 0. expected {}, actual {}"
    rcs = [Recompile("f", size.format(2, 3), "/m.py", 3), Recompile("f", size.format(3, 4), "/m.py", 3),
           Recompile("f", "self.step == 2", "/m.py", 3, limit=True)]
    classify_recompiles(rcs)
    # the first change makes the size dynamic (expected, no issue); a second one was kept static
    assert [(r.rule, r.expected) for r in rcs] == [("", True), ("GM701", False), ("GM706", False)]
    assert parse_recompile_limit("torch._dynamo hit config.recompile_limit (8)\n   function: 'forward' (/m.py:8)\n"
                                 "   last reason: 0/7: self.step == 7\nTo log all ...") == \
        ("forward", "/m.py", 8, "self.step == 7")


def test_a_guard_without_a_user_stack_is_placed_at_the_functions_first_read_of_it(tmp_path):
    """Dynamo prints no user stack for a tensor's type check: the recompile is placed at the
    first line of the recompiled function that reads the guarded attribute (for an element,
    its container, which the code may index otherwise: writing an element reads it). Two
    arguments found to be one tensor are placed at the function, as a guard on one argument is."""
    from graphmend.core.model import Recompile
    from tracer.classify import classify_recompiles

    path = tmp_path / "sched.py"
    path.write_text(textwrap.dedent('''\
        class Sched:
            @staticmethod
            def helper():
                return 0

            @property
            def stage(self):
                return self.dt_max  # another name that starts the same

            def step(
                self,
                x,
            ):
                # self.dt in a comment, and a write to it, are no read
                if self.state_in_first_order:
                    self.dt = x
                    self.model_outputs[0] = x
                return x * self.dt
        '''))
    none = " to be a tensor type, ' but found <class 'NoneType'>"
    rcs = [Recompile("step", f"expected type of 'self.dt'{none}", str(path), 10),
           Recompile("step", f"expected type of 'self.model_outputs[1]'{none}", str(path), 10),
           Recompile("step", 'Duplicate tensors found: ["x", "y"]', str(path), 10),
           Recompile("stage", f"expected type of 'self.dt'{none}", str(path), 6)]
    classify_recompiles(rcs)
    assert [(r.guard_line, r.guard_source) for r in rcs[:2]] == [
        (18, "return x * self.dt"), (17, "self.model_outputs[0] = x")]
    assert rcs[2].located and not rcs[2].guarded and rcs[2].place == (str(path), 10)
    assert not rcs[3].located  # the property reads self.dt_max, not self.dt


STEP = textwrap.dedent('''\
    import torch


    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.step = 0

        def forward(self, x):
            self.step += 1
            return self.lin(x) * self.step


    def mend_target_step():
        return Step(), (torch.randn(2, 5, 8),)


    def mend_target_limit():
        from graphmend import Target

        torch._dynamo.config.recompile_limit = 2  # each target runs in a fork of its own
        x = torch.randn(2, 5, 8)
        return Target(Step(), (x,), calls=[((x,), {})] * 3)
''')


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    d = tmp_path_factory.mktemp("rc")
    (d / "step.py").write_text(STEP)
    run = subprocess.run([sys.executable, "-m", "graphmend", "analyze", str(d / "step.py"), "--dynamic-only",
                          "-q", "-f", "json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 1, run.stderr  # a recompile's cause is a finding
    return json.loads(run.stdout)  # --calls 3, the default


def test_later_calls_surface_the_step_counter_and_explain_it(analyzed):
    from graphmend.core.model import Report
    from graphmend.core.serial import from_dict
    from reports import render

    t = analyzed["targets"][0]
    assert t["calls"] == 3 and t["graph_count"] == 1  # the figures stay the first call's
    # the same calls once more under set_stance("fail_on_recompile"): the counter still moves
    assert re.fullmatch(r"forward at line \d+: self\.step == \d+", t["replay_recompile"]), t["replay_recompile"]
    step = [r for r in t["recompiles"] if r["rule"] == "GM702"]
    assert step and step[0]["expression"] == "self.step" and step[0]["guard_line"] == 11
    issues = [i for i in analyzed["issues"] if i["rule"] == "GM702"]
    # the step target's call 3, the limit target's call 2: one cause, one place
    assert len(issues) == 1 and issues[0]["line"] == 11 and issues[0]["fan_out"] == 2
    assert issues[0]["source_line"] == "self.step += 1"
    report = from_dict(Report, analyzed)
    for fmt in ("text", "md", "html", "sarif", "github"):
        out = render(report, fmt)
        assert "GM702" in out and "self.step" in out, fmt
        assert fmt == "text" or re.search(r"Failed guard:(</b>)? self\.step ==", out), fmt  # in Dynamo's words
        assert fmt in ("sarif", "github") or "its calls made once more still recompile (forward at line" in out, fmt
    # the batch change of call 2 made the size dynamic: listed, expected, no issue of its own
    assert any(r["expected"] and r["call"] == 2 for r in t["recompiles"])
    assert {i["rule"] for i in analyzed["issues"]} == {"GM702", "GM706"}


def test_the_recompile_limit_is_told_first_as_a_frame_run_in_eager(analyzed):
    from graphmend.core.model import Report
    from graphmend.core.serial import from_dict
    from reports import render

    limited = analyzed["targets"][1]
    assert [r["limit"] for r in limited["recompiles"]] == [False, True]
    (issue,) = [i for i in analyzed["issues"] if i["rule"] == "GM706"]
    assert issue["line"] == 11 and [f["limit"] for f in issue["skipped"]] == [True]
    top = analyzed["summary"]["top"]
    assert analyzed["issues"][top[0]]["rule"] == "GM706"  # the costliest fact first
    text = render(from_dict(Report, analyzed), "text")
    assert "forward runs in eager once it reached the recompile limit" in text.split("Top causes")[0]


def test_one_issue_per_cause_and_place_and_the_limit_is_a_frame_run_in_eager():
    from graphmend.core.model import Recompile, Report, TargetResult
    from graphmend.correlate import diagnose

    def rc(reason, call, **kw):
        return Recompile("forward", reason, "/m.py", 7, guard_file="/m.py", guard_line=8,
                         guard_source="self.step += 1", call=call, rule="GM702", expression="self.step", **kw)

    def report():
        a = TargetResult("m.py::a", "/m.py", "a", recompiles=[rc("self.step == 1", 2), rc("self.step == 2", 3)])
        b = TargetResult("m.py::b", "/m.py", "b", recompiles=[
            Recompile("forward", "tensor 'x' size mismatch at index 0. expected 2, actual 3", "/m.py", 7,
                      call=2, expected=True),
            rc("self.step == 1", 3, limit=True)])
        b.recompiles[1].rule = "GM706"
        return Report(command="analyze", targets=[a, b])

    r = report()
    diagnose(r, read_sources=False)
    by_rule = {i.rule: i for i in r.issues}
    assert set(by_rule) == {"GM702", "GM706"}  # the expected size change is no issue
    step = by_rule["GM702"]
    assert (step.line, step.fan_out, step.targets, step.recompiles) == (8, 2, ["m.py::a"], [[0, 0], [0, 1]])
    limit = by_rule["GM706"]
    assert [(f.function, f.line, f.limit, f.targets) for f in limit.skipped] == [("forward", 7, True, ["m.py::b"])]
    r = report()
    diagnose(r, read_sources=False, enabled=lambda code: not code.startswith("GM702"))  # --ignore GM702
    assert [i.rule for i in r.issues] == ["GM706"]


def test_a_size_kept_static_names_the_dimension_to_mark_dynamic():
    from graphmend.core.model import Recompile, Report, TargetResult
    from graphmend.correlate import diagnose

    def issue(expression):
        size = Recompile("forward", "tensor 'x' size mismatch at index 1. expected 4, actual 6", "/m.py", 7,
                         call=3, rule="GM701", expression=expression)
        r = Report(command="analyze", targets=[TargetResult("m.py::a", "/m.py", "a", recompiles=[size])])
        diagnose(r, read_sources=False)
        return r.issues[0].message

    assert issue("x.shape[1]").endswith("(torch._dynamo.maybe_mark_dynamic(x, 1)) and keep its size out of "
                                        "Python conditions")
    assert "maybe_mark_dynamic" not in issue("___stack0.shape[1]")  # Dynamo's name, not the code's


SPLIT = textwrap.dedent('''\
    import torch


    class Helper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x, k):
            h = self.fc(x)
            print("scale", k)
            return h * k


    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.helper = Helper()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.helper(x, self.calls)


    def mend_target_outer():
        return Outer(), (torch.randn(2, 8),)
''')


def test_a_recompile_in_a_frame_a_break_split_off_is_told_as_such(tmp_path):
    """``print`` breaks inside ``Helper.forward``: Dynamo compiles it as a frame of its own,
    whose recompile on ``k`` exists only because of that break; ``Outer.forward``'s own on
    ``self.calls`` is the entry frame's."""
    from graphmend.core.model import Report
    from graphmend.core.serial import from_dict

    (tmp_path / "split.py").write_text(SPLIT)
    run = subprocess.run([sys.executable, "-m", "graphmend", "analyze", str(tmp_path / "split.py"), "--dynamic-only",
                          "-q", "-f", "json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    report = from_dict(Report, json.loads(run.stdout))
    rcs = {r.expression: r for r in report.targets[0].recompiles if r.rule == "GM702"}
    assert rcs["k"].after_break and rcs["k"].frame > 0, rcs
    assert not rcs["self.calls"].after_break and rcs["self.calls"].frame == 0, rcs
    said = {i.source_line: i.message for i in report.issues if i.rule == "GM702"}
    assert "only because a graph break split a frame that called it" in said['print("scale", k)'], said
    assert "graph break" not in said["self.calls += 1"], said


SHARED = textwrap.dedent('''\
    import functools

    import torch


    def deco(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            return fn(self, *args, **kwargs)
        return wrapper


    class Inner(torch.nn.Module):
        @deco
        def forward(self, x):
            print("inner")
            return x * 2


    class Inner2(torch.nn.Module):
        @deco
        def forward(self, x):
            print("inner2")
            return x + 1


    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Inner()
            self.b = Inner2()

        @deco
        def forward(self, x):
            return self.b(self.a(x)) * 3


    def mend_target_shared():
        return Model(), (torch.randn(3),)
''')


def test_a_wrapper_shared_by_the_entry_and_the_functions_a_break_runs_alone(tmp_path):
    """``deco``'s wrapper is the entry's code and, after the prints break the calls into the
    inner modules, the code of two frames compiled on their own: Dynamo numbers frames by code,
    so all three are frame 0. The inner ones recompile in the first call, on the function's
    code: after a break, not the entry's. In the next call each of the three versions meets
    the new batch size once, what automatic dynamic shapes expects: no GM701."""
    from graphmend.core.model import Report
    from graphmend.core.serial import from_dict

    (tmp_path / "shared.py").write_text(SHARED)
    run = subprocess.run([sys.executable, "-m", "graphmend", "analyze", str(tmp_path / "shared.py"), "--dynamic-only",
                          "-q", "-f", "json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    report = from_dict(Report, json.loads(run.stdout))
    wrapper = [r for r in report.targets[0].recompiles if r.function == "wrapper"]
    assert {r.frame for r in wrapper} == {0}, wrapper
    first = [r for r in wrapper if r.call == 1]
    assert len(first) == 2 and all(r.rule == "GM703" and r.after_break for r in first), first
    sized = [r for r in wrapper if r.call == 2]
    assert len(sized) == 3 and all(r.expected and not r.rule for r in sized), sized
    assert not sized[0].reentered and all(r.reentered for r in sized[1:]), sized
    (issue,) = [i for i in report.issues if i.rule.startswith("GM7")]
    assert issue.rule == "GM703" and "another function, `fn`, ran through wrapper's code" in issue.message
    assert "only because a graph break split a frame that called it" in issue.message, issue.message


CHANNELS = textwrap.dedent('''\
    import torch


    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(2, 2, 3, padding=1)

        def forward(self, x):
            return self.conv(x).relu()


    class Mixer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block(), Block()])

        def forward(self, x):
            if x.shape[1] != 2:
                raise ValueError(f"expected 2 channels, got {x.shape[1]}")
            for b in self.blocks:
                x = b(x)
            return x


    def mend_target_mixer():
        return Mixer(), (torch.randn(2, 2, 16),)
''')


def test_a_derived_call_that_raises_leaves_no_recompiles_behind(tmp_path):
    """mend's second call grows dim 1, which is channels here: the model raises, and Dynamo,
    having given up on ``forward``, would compile each block as a frame of its own on the calls
    after. The calls go on from the first call again, the batch alone grown: only the expected
    size change is left, no recompile a user's run would not make."""
    from graphmend.core.model import Report
    from graphmend.core.serial import from_dict

    (tmp_path / "channels.py").write_text(CHANNELS)
    run = subprocess.run([sys.executable, "-m", "graphmend", "analyze", str(tmp_path / "channels.py"),
                          "--dynamic-only", "-q", "-f", "json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    t = from_dict(Report, json.loads(run.stdout)).targets[0]
    assert t.error is None and t.calls == 3 and not t.breaks, (t.error, t.breaks)
    assert [(r.frame, r.expected) for r in t.recompiles] == [(0, True)], t.recompiles
