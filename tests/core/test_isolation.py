"""Each target runs as if alone, ends as it ends, and its output cannot fill the disk."""
import os
import textwrap
from pathlib import Path

import pytest

from graphmend.core.config import Config
from graphmend.core.discovery import discover
from graphmend.core.jobs import KEEP_OUTPUT, Job, run_job
from tracer.capture import capture_targets

# two breaks alone; none when the default dtype is float64 (the check is a constant to Dynamo)
VICTIM = '''
def _victim(x):
    x = x + 1
    if torch.get_default_dtype() == torch.float32:
        torch._dynamo.graph_break()
        x = x * 2
        torch._dynamo.graph_break()
    return x - 1


def mend_target_victim():
    print("building the victim", flush=True)  # fd 1 closed: OSError
    sys.stderr.write("victim's stderr\\n")
    return _victim, (torch.ones(4),)
'''

LEAKS = {
    "dynamo_config": "torch._dynamo.config.disable = True  # Dynamo off: nothing compiles, no break",
    "default_dtype": "torch.set_default_dtype(torch.float64)",
    "closed_fds": "os.close(1); os.close(2)",
}


def _file(folder: Path, name: str, leak: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(f'''
        import os, sys
        import torch


        def mend_target_leaks():
            {leak}
            return (lambda x: x + 1), (torch.ones(2),)
    ''') + VICTIM)


def _key(r):
    return (r.error, r.graph_count, r.graph_break_count, [(b.line, b.kind) for b in r.breaks])


def test_a_target_does_not_leak_into_the_next_of_its_file(tmp_path):
    for name, leak in LEAKS.items():
        _file(tmp_path, name, leak)
    specs = discover([str(tmp_path)], Config()).targets
    together = {(Path(r.file).stem, r.function): r for r in capture_targets(specs, timeout=120)}
    alone = capture_targets([s for s in specs if s.function == "mend_target_victim"][:1], timeout=120)[0]
    assert alone.error is None and alone.graph_break_count == 2, alone
    assert all(together[(name, "mend_target_leaks")].error is None for name in LEAKS)
    leaked = {name: _key(together[(name, "mend_target_victim")]) for name in LEAKS
              if _key(together[(name, "mend_target_victim")]) != _key(alone)}
    assert not leaked, f"alone: {_key(alone)}; after the other target: {leaked}"


def test_os_exit_is_named_with_the_targets_own_last_output(tmp_path):
    (tmp_path / "exits.py").write_text(textwrap.dedent('''
        import os, sys
        import torch


        def mend_target_warns():
            sys.stderr.write("UserWarning: a leftover warning of an earlier target\\n")
            return (lambda x: x + 1), (torch.ones(2),)


        def mend_target_exits():
            print("last words", flush=True)
            os._exit(3)


        def mend_target_after():
            return (lambda x: x * 2), (torch.ones(2),)
    '''))
    specs = discover([str(tmp_path)], Config()).targets
    got = {r.function: r for r in capture_targets(specs, timeout=120)}
    assert got["mend_target_exits"].error == "the target called os._exit(3); its last output: last words"
    assert got["mend_target_warns"].error is None and got["mend_target_after"].error is None
    assert got["mend_target_after"].graph_count == 1


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="Linux: the output files are trimmed in place")
def test_a_worker_that_prints_a_lot_keeps_only_a_bounded_tail(tmp_path):
    (tmp_path / "loud_worker.py").write_text(textwrap.dedent("""
        import os, sys, time
        from graphmend.core.worker import worker_main

        def handle(p):
            line = "x" * 1023 + "\\n"
            for _ in range(20 * 1024):  # 20 MiB
                sys.stdout.write(line)
            sys.stdout.write("the end\\n")
            sys.stdout.flush()
            time.sleep(3)  # the parent trims the files about once a second
            st = os.fstat(1)
            return {"size": st.st_size, "stored": st.st_blocks * 512}

        worker_main(handle)
    """))
    out = run_job(Job("loud_worker", {}, label="T-loud", timeout=60, env={"PYTHONPATH": str(tmp_path)}))
    assert out.error is None, out.error
    assert out.result["size"] > 20 << 20  # everything was written
    assert out.result["stored"] <= 2 * KEEP_OUTPUT + (1 << 20), out.result  # only the tail is kept
    assert out.stdout.rstrip().endswith("the end")
