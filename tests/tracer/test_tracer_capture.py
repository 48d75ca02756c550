"""Capture against torch._dynamo.explain, on every corpus target and the tracer's fixtures.

The captures and the explain reference come from the session's ``corpus_capture``
(tests/conftest.py): one worker per file, explain run in the same worker after the capture."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "fixtures" / "dynamic" / "models"


@pytest.fixture(scope="module")
def captured(corpus_capture):
    return corpus_capture.specs, corpus_capture.results, corpus_capture.explained


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_counts_equal_explain(corpus_capture, mode):
    """In each run mode, the capture's counts are explain's in that mode (eval: .eval() under
    no_grad; train: .train() with grad on)."""
    specs = corpus_capture.specs
    results, explained = corpus_capture.of(mode)
    assert len(results) == len(specs) >= 5
    assert sum(ref is not None for ref in explained.values()) >= 5
    mismatches = []
    for name, ref in explained.items():
        r = results[name]
        if ref is None:  # captured without explain (tests/conftest.py: the transformers models' train mode)
            continue
        if isinstance(ref, str):  # explain itself failed: so must the capture
            assert r.error, name
            continue
        graphs, breaks = ref[0], ref[1]
        # explain reports graph_count - 1, i.e. -1 for a target that compiled nothing
        if (r.graph_count, r.graph_break_count) != (graphs, max(breaks, 0)):
            mismatches.append((name, (r.graph_count, r.graph_break_count), ref[:2]))
        assert r.run_mode == mode, name
    assert not mismatches


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_counted_breaks_match_break_count(corpus_capture, mode):
    results, _ = corpus_capture.of(mode)
    for r in results.values():
        if r.error:
            continue
        assert sum(1 for b in r.breaks if b.counted) <= r.graph_break_count, r.name
        assert len(r.ops_per_graph) == r.graph_count


def test_small_models(captured):
    _, res, _ = captured
    get = lambda fn: res[f"small.py::{fn}"]
    b = get("mend_target_branch")
    assert (b.graph_count, b.graph_break_count, b.error) == (2, 1, None)
    (brk,) = b.breaks
    assert brk.rule == "GM101" and brk.category == "control-flow" and brk.counted
    assert brk.gb_type == "Data-dependent branching" and brk.registry_id == "GB0170"
    assert brk.file == str(SMALL / "small.py") and brk.line == 7 and brk.col == 7
    assert brk.source_line.strip() == "if y.sum() > 0:" and brk.function == "branch"
    assert brk.explanation and brk.hints and brk.stack[-1].function == "branch"
    assert all("/torch/" not in f.file and "/tracer/" not in f.file for f in brk.stack)

    p = get("mend_target_print")
    assert [x.rule for x in p.breaks] == ["GM201"] and p.breaks[0].source_line.strip() == 'print("step")'
    i = get("mend_target_item")
    assert [x.rule for x in i.breaks] == ["GM301"]

    # a break in a loop: Dynamo skips the frame, explain counts nothing, we still report it
    lp = get("mend_target_loop")
    assert lp.graph_break_count == 0 and lp.frames_skipped >= 1
    (skip,) = lp.breaks
    assert skip.kind == "frame_skipped" and not skip.counted and skip.rule == "GM201" and skip.line == 26

    c = get("mend_target_clean")
    assert (c.graph_count, c.graph_break_count, c.breaks, c.error) == (1, 0, [], None)
    assert c.ops_per_graph and c.ops_per_graph[0] >= 3


@pytest.mark.parametrize("caret,col", [("", 7), ("       ^^^^^^^^^^^^\n", 7)])
def test_a_branch_without_a_caret_is_placed_at_its_condition(tmp_path, caret, col):
    """torch 2.11 prints no ^ under a branch's line; 2.13 marks the condition: both give col 7."""
    pytest.importorskip("torch")
    from tracer.messages import parse_log_record
    from tracer.recorder import Recorder, _Raw

    src = tmp_path / "m.py"
    src.write_text("def f(y):\n    y = y * 2\n    if y.sum() > 0:\n        return y\n", encoding="utf-8")
    text = (f"Graph break in user code at {src}:3\nGraph Break Reason: Data-dependent branching\n"
            f"  Explanation: e\n\nUser code traceback:\n  File \"{src}\", line 3, in f\n    if y.sum() > 0:\n{caret}")
    brk = Recorder()._to_break(_Raw(parse_log_record(text), None))
    assert (brk.line, brk.col, brk.rule) == (3, col, "GM101")


def test_a_record_mend_cannot_read_is_kept_raw_never_dropped():
    """A torch that words a graph-break or recompile record anew: the record is a GM900 break
    (or a recompile) with its raw text, and a record whose own formatting fails is one too."""
    import logging

    from tracer.recorder import Recorder, _Handler

    rec = Recorder()
    handler = _Handler(rec)

    def emit(name, msg, args=None):
        handler.emit(logging.LogRecord(name, logging.DEBUG, __file__, 1, msg, args, None))

    emit("torch.__graph_breaks", "Graph split, worded anew\n  with details")
    emit("torch.__graph_breaks", "broken %s %s", ("one",))  # formatting raises
    emit("torch.__recompiles", "Recompiled, worded anew")
    breaks = rec.breaks()
    assert [(b.rule, b.reason) for b in breaks] == [("GM900", "Graph split, worded anew"), ("GM900", "broken %s %s")]
    assert "with details" in breaks[0].explanation
    assert [(r.function, r.reason) for r in rec.recording.recompiles] == [("(unread)", "Recompiled, worded anew")]


def test_a_loop_skip_said_apart_from_the_break_marks_it(tmp_path):
    """torch 2.9 logs "Skipping frame because there is a graph break in a for/while loop"
    at INFO on its own logger, apart from the break's record (recorded from torch 2.9.1): the
    break is a frame skip naming the frame, as later torches' records say themselves. The INFO
    record, made for mend alone, reaches no handler of the user's."""
    import logging

    from tracer.messages import parse_log_record
    from tracer.recorder import LOOP_SKIP_LOGGER, Recorder, _Raw

    src = tmp_path / "m.py"
    src.write_text("def loop(x):\n    for i in range(2):\n        print(i)\n    return x\n", encoding="utf-8")
    text = (f"Graph break in user code at {src}:3\nGraph Break Reason: Failed to trace builtin operator\n"
            f"  Explanation: e\n\nUser code traceback:\n  File \"{src}\", line 3, in loop\n    print(i)\n")
    seen: list[str] = []

    class Mine(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    mine = Mine()
    logging.getLogger().addHandler(mine)
    try:
        with Recorder() as rec:
            rec.recording.raw.append(_Raw(parse_log_record(text), None))
            logging.getLogger(LOOP_SKIP_LOGGER).info(
                "Skipping frame because there is a graph break in a for/while loop\n"
                f"<FrameSummary file {src}, line 3 in loop>")
        assert logging.getLogger(LOOP_SKIP_LOGGER).level == logging.NOTSET  # as it was
    finally:
        logging.getLogger().removeHandler(mine)
    (brk,) = rec.breaks()
    assert brk.kind == "frame_skipped" and (brk.line, brk.rule) == (3, "GM201")
    assert (brk.skipped_frame.function, brk.skipped_frame.line) == ("loop", 3)  # no frame being converted here
    assert not any("Skipping frame" in m for m in seen)
