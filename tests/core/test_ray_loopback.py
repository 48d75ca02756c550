"""A local Ray instance started by mend is reachable from this machine only."""
import ipaddress
import os
from pathlib import Path

import pytest

from graphmend.core.processes import descendants as _descendants, proc_table as _proc_table


def _listening() -> dict[int, str]:
    """socket inode -> local address of every listening TCP socket (IPv4 and IPv6)."""
    out = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            raw = bytes.fromhex(fields[1].split(":")[0])
            # /proc shows the address as 32-bit words in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            addr = ipaddress.ip_address(raw)
            out[int(fields[9])] = str(getattr(addr, "ipv4_mapped", None) or addr)
    return out


def _mine() -> set[int]:
    """This process and every process below it."""
    return {os.getpid(), *_descendants([os.getpid()], _proc_table())}


def _sockets(pid: int) -> set[int]:
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                out.add(int(target[8:-1]))
    except OSError:
        pass
    return out


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads listening sockets from /proc")
def test_a_local_ray_instance_listens_on_loopback_only():
    ray = pytest.importorskip("ray")
    from graphmend.core.executors import RayExecutor

    assert not ray.is_initialized()
    ex = RayExecutor(num_cpus=1)
    try:
        assert ex.owned
        assert ray.get(ray.remote(lambda: 1).remote()) == 1  # a Ray worker up too
        listening = _listening()
        bound = {}
        for pid in _mine():
            for inode in _sockets(pid) & listening.keys():
                bound[(pid, Path(f"/proc/{pid}/comm").read_text().strip())] = listening[inode]
        assert bound, "no listening socket found for the Ray instance"
        exposed = {k: a for k, a in bound.items() if not ipaddress.ip_address(a).is_loopback}
        assert not exposed, f"listening beyond this machine: {exposed}"
    finally:
        ex.close()
