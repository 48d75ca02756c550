"""Break-message parsing and classification on recorded messages (no torch run)."""
import json
from pathlib import Path

import pytest

from rewrites.rules import category_of
from tracer.classify import classify
from tracer.messages import parse_log_record, parse_reason, parse_recompile

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "messages"
# torch_X_Y.json: recorded by tests/fixtures/messages/record.py on that torch ({"torch", "cases",
# "corpus_explain"}); older_wordings.json: a list, reconstructed from torch's source history.
DOCS = {f.name: json.loads(f.read_text(encoding="utf-8")) for f in sorted(FIXTURES.glob("*.json"))}
RECORDED = {name: doc for name, doc in DOCS.items() if isinstance(doc, dict)}
CASES = [c for doc in DOCS.values() for c in (doc["cases"] if isinstance(doc, dict) else doc)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['torch']}-{c['case']}" for c in CASES])
def test_recorded_message(case):
    if case.get("kind", "record") == "record":
        p = parse_log_record(case["text"])
        assert p is not None and p.file and p.line
        assert p.stack and p.stack[-1].line == p.line
    else:
        p = parse_reason(case["text"])
    assert p.gb_type == case["gb_type"]
    if case["gb_type"]:
        assert p.reason == case["gb_type"]
        assert p.explanation
    if case["registry_id"] and "/gb/" in case["text"]:
        assert p.registry_id == case["registry_id"]
    if case.get("said_apart"):
        # torch 2.9 says that it skipped the frame in a record of its own, which the recorder
        # reads (tracer.recorder.Recorder._loop_skip) and marks the break with
        from tracer.recorder import Recorder, _Raw

        rec = Recorder()
        rec.recording.raw.append(_Raw(p, None))
        for text in case["said_apart"]:
            rec._loop_skip(text)
    if case.get("frame_skipped") is not None:  # None: a corpus record, whose site's rule is what is pinned
        assert p.frame_skipped == case["frame_skipped"]
    rule = classify(p.gb_type, p.message, case["source_line"], case.get("following", []), p.frame_skipped)
    assert rule == case["rule"] if "rule" in case else rule in case["rules"]
    assert category_of(rule) and (category_of(rule) != "unexplained" or rule.startswith("GM9"))


def test_fixtures_cover_several_versions():
    assert len({c["torch"] for c in CASES}) >= 4
    # recorded, not reconstructed: 2.9 (the oldest supported), 2.11 (the H200), 2.13 (CI) and
    # 2.15 (the current release)
    assert {"torch_2_9.json", "torch_2_11.json", "torch_2_13.json", "torch_2_15.json"} <= set(RECORDED)
    for name, doc in RECORDED.items():
        assert name == "torch_%s_%s.json" % tuple(doc["torch"].split("+")[0].split(".")[:2])
        assert all(c["torch"] == doc["torch"] for c in doc["cases"])


def _minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_corpus_counts_match_the_manifest(name):
    """What explain counted on each recorded torch is what corpus/manifest.toml expects of it
    (its default counts, or that torch's override table), so the per-version tables are real."""
    import sys
    import tomllib

    sys.path.insert(0, str(ROOT))
    from corpus.measure import expected

    doc = RECORDED[name]
    manifest = tomllib.loads((ROOT / "corpus" / "manifest.toml").read_text(encoding="utf-8"))["targets"]
    rows = doc["corpus_explain"]
    assert len(rows) >= 40
    wrong = []
    for row in rows:
        want = expected(manifest[row["target"]], row["mode"], _minor(doc["torch"]))
        got = (row.get("graph_count"), row.get("graph_break_count"))
        if "error" in row or got != (want["graph_count"], want["graph_break_count"]):
            wrong.append(f"{row['target']}: manifest {want['graph_count']}/{want['graph_break_count']}, "
                         f"recorded {row.get('error') or got}")
    assert not wrong, "\n".join(wrong)


def test_duplicate_record_and_hints():
    p = parse_log_record("Graph break (user stack suppressed due to duplicate graph break) in user code at /a/b.py:12\n"
                         "Graph Break Reason: Data-dependent branching\n  Explanation: e\n  Hint: h1\n  Hint: h2\n")
    assert p.duplicate and (p.file, p.line) == ("/a/b.py", 12) and p.hints == ["h1", "h2"]
    assert parse_log_record("some other debug line") is None


def test_caret_column():
    p = parse_log_record('Graph break in user code at /m.py:3\nGraph Break Reason: x\n\nUser code traceback:\n'
                         '  File "/m.py", line 3, in f\n    if y.sum() > 0:\n       ^^^^^^^^^^^^\n')
    assert p.stack[-1].caret_col == 3 and p.stack[-1].source_line == "if y.sum() > 0:"


def test_recompile():
    r = parse_recompile("Recompiling function f in /s.py:3\n    triggered by the following guard failure(s):\n"
                        "    - 0/0: tensor 'x' rank mismatch. expected 1, actual 2")
    assert r["function"] == "f" and r["line"] == 3 and "rank mismatch" in r["reason"]


def test_recompile_keeps_the_newest_guard_without_source_comments():
    # recorded from torch 2.13 (corpus/decoding.py), stack lines shortened
    text = ("Recompiling function torch_dynamo_resume_in_forward_at_44 in /c/decoding.py:44\n"
            "    triggered by the following guard failure(s):\n"
            "    - 1/2: len(tokens) == 2                                         # tokens.append(token)  "
            "# c/decoding.py:47 in torch_dynamo_resume_in_forward_at_44\n"
            "      User stack trace:\n      File \"/c/decoding.py\", line 47, in torch_dynamo_resume_in_forward_at_44\n"
            "    - 1/1: len(tokens) == 1                                         # tokens.append(token)\n"
            "    - 1/0: tensor 'state' requires_grad mismatch. expected requires_grad=0")
    r = parse_recompile(text)
    assert r["line"] == 44
    assert r["reason"] == "len(tokens) == 2 (2 older compiled version(s) failed their guards too)"


@pytest.mark.parametrize("src,following,rule", [
    ("while x.sum() > 0:", [], "GM104"), ("y = a if t.any() else b", [], "GM102"),
    ("ok = t.any() and flag", [], "GM103"), ("if torch.equal(a, b):", ["    raise X"], "GM402"),
    ("n = int(t)", [], "GM303"),
])
def test_source_line_decides(src, following, rule):
    gb = "Unsupported Tensor.item() call with capture_scalar_outputs=False" if rule == "GM303" else "Data-dependent branching"
    assert classify(gb, gb, src, following) == rule


_NONZERO = ("Dynamic shape operator\n  Explanation: Operator `aten.nonzero.default`'s output shape depends on "
            "input Tensor data.\n  Developer debug context: aten.nonzero.default")
_EQUAL = ("Data dependent operator\n  Explanation: Operator `aten.equal.default` has a non-Tensor output whose "
          "value is dependent on the data of Tensor inputs.\n  Developer debug context: aten.equal.default")


@pytest.mark.parametrize("src,rule", [
    ("mean = x[mask].mean()", "GM502"), ("x[mask] = 0", "GM502"),
    ("y = (a * b)[keep].sum()", "GM502"), ("idx = mask.nonzero()", "GM501"),
    ("idx = torch.nonzero(mask)", "GM501"), ("rows = torch.argwhere(m)", "GM501"),
    ("(rows,) = torch.where(m > 0)", "GM501"), ("y = x[torch.where(m)[0]]", "GM501"),
    ("y = torch.where(m, x, 0)[m]", "GM502"), ("y = f(x)", "GM501"),
])
def test_nonzero_op_is_told_apart_by_the_source_line(src, rule):
    """A boolean-mask index runs aten.nonzero as well: Dynamo's text is the same."""
    assert classify("Dynamic shape operator", _NONZERO, src) == rule


def test_shape_op_named_by_dynamo_wins_over_a_subscript():
    msg = _NONZERO.replace("nonzero", "unique")
    assert classify("Dynamic shape operator", msg, "seen = torch.unique(labels[0, keep])") == "GM503"
    msg = _NONZERO.replace("nonzero", "masked_select")
    assert classify("Dynamic shape operator", msg, "k = torch.masked_select(s, m[0])") == "GM505"


@pytest.mark.parametrize("src,following,rule", [
    ("if not torch.equal(a, b):", ["    raise ValueError('x')"], "GM402"),
    ("if torch.equal(a, b):", ["    # same", "    x = x + 1"], "GM101"),
    ("assert torch.equal(a, a.bool().to(a.dtype))", [], "GM401"),
    ("while not torch.equal(a, b):", ["    a = a + 1"], "GM104"),
    ("same = torch.equal(a, b)", [], "GM900"),  # not a condition: left to the static finding
])
def test_data_dependent_operator_in_a_condition(src, following, rule):
    assert classify("Data dependent operator", _EQUAL, src, following) == rule


_SCALAR = ("Data dependent operator\n  Explanation: Operator `aten._local_scalar_dense.default` has a non-Tensor "
           "output whose value is dependent on the data of Tensor inputs.")


@pytest.mark.parametrize("src,rule", [
    ("alpha_prod_t = self.alphas_cumprod[timestep]", "GM303"),  # diffusers' DDIM: __index__ reads it
    ("prev_t = self.timesteps[index + 1]", "GM303"),
    ("x_1 = min(box[2] + 1, im_w)", "GM900"),  # a constant index: the read is elsewhere on the line
    ("y = x[:, i]", "GM900"), ("n = int(x[i])", "GM900"), ("v = x[-1]", "GM900"),
])
def test_a_tensor_read_back_to_index_with_is_gm303(src, rule):
    assert classify("Data dependent operator", _SCALAR, src) == rule


@pytest.mark.parametrize("src,message,rule", [
    ("k = torch.masked_select(s, m[0])", "Dynamic shape operator", "GM505"),
    ("r = x.repeat_interleave(counts)", "Dynamic shape operator", "GM504"),
    ("", _NONZERO.replace("Dynamic shape", "Encountered graph break when attempting to trace BINARY_SUBSCR: "
                          "a binary subscript, e.g. x[attr]:\n\nDynamic shape"), "GM502"),
    ("", _NONZERO, "GM501"),
])
def test_shape_rule_without_an_op_name_or_a_source_line(src, message, rule):
    assert classify("Dynamic shape operator", message, src) == rule


# torch 2.13, transformers 5.24 CTRL: `self.pos_encoding` was registered as nn.Buffer
_PYTHON_TYPE = ("Unsupported python_type() call\n  Explanation: This VariableTracker does not implement "
                "python_type(), which is required for this operation.\n  Hint: ...")


@pytest.mark.parametrize("src,rule", [
    ("self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)", "GM606"),
    ("y = type(x)(x)", "GM900"),  # python_type() of something else: unexplained
    ("self.a == b", "GM900"),
])
def test_python_type_on_a_buffer_assignment(src, rule):
    assert classify("Unsupported python_type() call", _PYTHON_TYPE, src) == rule


@pytest.mark.parametrize("src,rule", [
    # torch 2.11 (corpus/unsupported.py:100 on the H200): the same re-bind breaks as a branch
    # inside Module.__setattr__, reported at the assignment
    ("self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)", "GM606"),
    ("self.scale = a if t.any() else b", "GM102"),  # a branch of the line's own
    ("y = x.to(dtype)", "GM101"),
])
def test_data_dependent_branching_on_a_buffer_assignment(src, rule):
    assert classify("Data-dependent branching", "Data-dependent branching", src) == rule


def test_skipped_frame_is_read_from_the_loop_message():
    """Dynamo names the frame it gave up on in the debug context of "graph break in loop"."""
    case = next(c for c in CASES if c["torch"].startswith("2.13") and c.get("frame_skipped") and "frame skipped:" in c["text"])
    p = parse_log_record(case["text"])
    assert (p.skipped_frame.function, p.skipped_frame.file, p.skipped_frame.line) == ("loop", "/src/message_cases.py", 36)
    assert parse_reason("Data-dependent branching\n  Explanation: e\n").skipped_frame is None


@pytest.mark.parametrize("gb,text,rule", [
    # torch 2.15's wording, from its source (not recorded here): a comprehension's iterator
    ("C-implemented special method without VariableTracker model",
     "'dict_keyiterator' implements '__next__' in C and Dynamo has no model for it.", "GM610"),
    # the same gb_type for another special method is not an iterator made in eager
    ("C-implemented special method without VariableTracker model",
     "'Foo' implements '__len__' in C and Dynamo has no model for it.", "GM900"),
    ("Missing tp_iternext", "Dynamo does not support next() on enumerate. Add tp_iternext_impl", "GM610"),
    # an RNN inside a loop, as torch 2.13 words it (torchaudio's DeepSpeech)
    ("Encountered graph break that we cannot resume from",
     "Encountered graph break that we cannot resume from. Graph break encountered:\n"
     "Attempted to wrap RNN, GRU, or LSTM\n  Explanation: Dynamo does not support RNN, GRU, or LSTM.", "GM609"),
])
def test_iterator_and_recurrent_wordings(gb, text, rule):
    assert classify(gb, gb + "\n  Explanation: " + text, "x = [", [], False) == rule


def test_a_recompile_of_shared_code_is_told_by_its_own_version():
    """A decorator's wrapper runs several functions through one code: a cached version that
    failed on the function's code was another function's. The reason is the newest version
    of this one's; where every version is another function's, this function is new to it."""
    head = "Recompiling function wrapper in /d.py:7\n    triggered by the following guard failure(s):\n"
    other = "    - 0/{}: ___check_obj_id(fn.__code__, 1401), type=<class 'code'>\n"
    r = parse_recompile(head + other.format(2) + other.format(1)
                        + "    - 0/0: tensor 'args[0]' size mismatch at index 0. expected 3, actual 4")
    assert r["reason"] == ("tensor 'args[0]' size mismatch at index 0. expected 3, actual 4 "
                           "(2 other compiled version(s) failed their guards too)")
    assert r["frame"] == 0 and r["new_code"] is False
    r = parse_recompile(head + other.format(1) + other.format(0))
    assert r["reason"].startswith("___check_obj_id(fn.__code__") and r["new_code"] is True


def test_recompile_names_the_user_line_its_guard_checks():
    # torch 2.13's `recompiles` artifact, as logged (the comment's path is cut by Dynamo)
    text = ("Recompiling function f in /tmp/p/shapes.py:2\n"
            "    triggered by the following guard failure(s):\n"
            "    - 0/0: n == 5                                                   # if n > 3:  # mp/p/shapes.py:4 in f\n"
            "    - User stack trace:\n"
            "    -   File \"/tmp/p/shapes.py\", line 4, in f\n"
            "    -     if n > 3:")
    r = parse_recompile(text)
    assert (r["reason"], r["guard_file"], r["guard_line"], r["guard_source"]) == ("n == 5", "/tmp/p/shapes.py", 4, "if n > 3:")
    # a global-state guard checks no line: none is made up
    r = parse_recompile("Recompiling function f in /s.py:3\n    triggered by the following guard failure(s):\n"
                        "    - 0/0: GLOBAL_STATE changed: grad_mode ")
    assert r["reason"] == "GLOBAL_STATE changed: grad_mode" and "guard_line" not in r
