"""The processes a worker starts, none of which may outlive it.

A target may fork (a data-loader, a compile pool, a daemon that calls setsid and forks
again). Three parts, because no one of them is enough:
- the worker makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a process
  whose parent dies is re-parented to the worker, not to init, so everything the target
  started stays in the worker's tree, setsid or not, and before exiting the worker kills
  its children until none is left (``reap_children``, called by the worker side);
- on a timeout the parent stops the worker's whole tree (found through /proc) and kills it,
  the worker's process group too (``ProcessTree.kill``);
- when the worker dies without cleaning up (a crash, os._exit in the target), its orphans
  go to init: the parent kills its process group and every process it saw in the tree
  while the worker ran (recorded on each poll; a (pid, start time) pair, so a recycled pid
  is never hit).
psutil would do the /proc part, but it is not a dependency.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any, Optional, Sequence

_WATCH_S = 0.25  # how often a worker looks at the process it watches


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True



def proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time in clock ticks) of every process /proc shows; empty
    where there is no /proc."""
    table: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
            # "pid (comm) state ppid ..."; comm may hold spaces and parentheses
            fields = data[data.rindex(b")") + 2:].split()
            table[int(name)] = (int(fields[1]), int(fields[19]))
        except (OSError, ValueError, IndexError):
            continue
    return table


def descendants(roots: Sequence[int], table: dict[int, tuple[int, int]]) -> dict[int, int]:
    """pid -> start time of every process below ``roots`` in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    stack = list(roots)
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in found:
                found[c] = table[c][1]
                stack.append(c)
    return found


def signal_quietly(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class ProcessTree:
    """The processes a worker started, for killing them all when it ends (see above)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.seen: dict[int, int] = {}  # pid -> start time

    def record(self) -> None:
        self.seen.update(descendants([self.pid], proc_table()))

    def kill(self) -> None:
        """The worker (still running) and everything below it: stopped first, so that
        nothing forks while the tree is collected, then killed."""
        signal_quietly(self.pid, signal.SIGSTOP)
        victims: dict[int, int] = {}
        for _ in range(100):
            found = descendants([self.pid], proc_table())
            new = [p for p in found if p not in victims]
            for p in new:
                signal_quietly(p, signal.SIGSTOP)
            victims.update(found)
            if not new:
                break
        self.seen.update(victims)
        self._kill_group()
        signal_quietly(self.pid, signal.SIGKILL)
        self.kill_leftovers()

    def kill_leftovers(self) -> None:
        """After the worker ended: its process group, and what it started that still runs."""
        self._kill_group()
        if not self.seen:
            return
        table = proc_table()
        alive = [p for p, t in self.seen.items() if p in table and table[p][1] == t]
        for p, t in {**{p: self.seen[p] for p in alive}, **descendants(alive, table)}.items():
            if p in table and table[p][1] == t:
                signal_quietly(p, signal.SIGKILL)

    def _kill_group(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def reap_children() -> None:
    """In the worker, before it exits: kill its children and wait for them, again until none
    is left (as a subreaper it inherits each killed child's own children)."""
    me = os.getpid()
    for _ in range(1000):
        kids = [p for p, (ppid, _) in proc_table().items() if ppid == me]
        if not kids:
            break
        for k in kids:
            signal_quietly(k, signal.SIGKILL)
        for k in kids:
            try:
                os.waitpid(k, 0)
            except ChildProcessError:
                pass


def start_time(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def watch_parent(env_name: str) -> None:
    """In a worker given ``env_name`` (a pid): end the worker's tree and the worker once the
    watched process is gone. A Ray worker killed mid-task (the node's OOM killer, a lost node)
    would otherwise leave its job running with no timeout over it."""
    value = os.environ.pop(env_name, "")
    if not value.isdigit():
        return
    pid = int(value)
    start = start_time(pid)

    def watch() -> None:
        while True:
            time.sleep(_WATCH_S)
            if not alive(pid) or start_time(pid) != start:  # gone, or its pid reused
                reap_children()
                os._exit(1)

    threading.Thread(target=watch, name="mend-watch", daemon=True).start()


def _prctl(option: int, value: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def become_subreaper() -> None:
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def die_with_parent(sig: int) -> None:
    """The kernel sends ``sig`` to this process when its parent (the thread that started it)
    ends (PR_SET_PDEATHSIG)."""
    _prctl(1, sig)  # PR_SET_PDEATHSIG


def on_term(signum: int, frame: Any) -> None:
    """In a worker, on SIGTERM (its parent's death among them): end what it started, then
    die of the signal as it would have."""
    reap_children()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
