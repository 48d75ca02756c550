"""Where a run's jobs execute: ``local`` (worker subprocesses of this process, the default)
or ``ray`` (each job a Ray task on whatever node Ray picks).

A Ray task does nothing but call ``run_job_local`` on its node, so the worker protocol, the
timeout, the memory limit and the process-tree kill are the local pool's, and a result is the
same JSON by construction. The task's own death (its Ray worker killed, its node lost) is
that job's error, never the run's. Ray is imported only here, and only when chosen. The command picks the executor and
sets it for its run with ``jobs.use_executor`` (graphmend.cli.common.executor_scope).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from graphmend.core.jobs import Job, JobOutcome, run_job_local
from graphmend.core.worker import describe

RAY_INSTALL_HINT = 'pip install "graphmend[ray]"  (or: pip install "ray>=2.9")'

# What a job's worker sees of the driver's environment on the node. A Ray worker's own
# environment is the node's (or, on a local instance, this process's at ray.init time); these
# carry what changes how torch, Dynamo and mend run, so a node runs a job as the driver would.
_CARRIED_PREFIXES = ("MEND_", "TORCH", "PYTORCH_", "TRITON_", "CUDA_", "OMP_", "MKL_", "OPENBLAS_", "HF_",
                     "TRANSFORMERS_", "TOKENIZERS_")
_CARRIED = ("PYTHONPATH", "PYTHONHASHSEED")
# Ray sets these in its workers (OMP_NUM_THREADS to the task's CPUs, CUDA_VISIBLE_DEVICES to
# the task's GPUs: none). A job's worker is a process of its own, as in the local pool: where
# the driver leaves them unset, so does the job.
_RAY_SETS = ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


class ExecutorError(Exception):
    """Ray missing, or a cluster that cannot be reached: the message is one line for the user."""


def driver_environment(environ: Optional[dict[str, str]] = None) -> tuple[dict[str, str], list[str]]:
    """(the variables a node's job takes from the driver, those it must not have)."""
    environ = dict(os.environ if environ is None else environ)
    carried = {k: v for k, v in environ.items() if k in _CARRIED or k.startswith(_CARRIED_PREFIXES)}
    return carried, [k for k in _RAY_SETS if k not in environ]


def run_on_node(job: Job, carried: dict[str, str], unset: list[str]) -> JobOutcome:
    """The body of a Ray task: ``run_job_local`` in the node's Ray worker."""
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    environ.update(carried)
    # the job's worker watches this Ray worker (run_job_local's process): should it die, nobody
    # would time the job out, and the job ends itself
    return run_job_local(job, environ=environ)


def _reachable(address: str, wait_s: float = 10.0) -> None:
    """A ``host:port`` that nothing answers on fails here, at once: Ray itself retries for
    minutes before it gives up. Other forms (``ray://...``, ``auto``) are left to Ray."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=wait_s).close()
    except OSError as exc:
        raise ExecutorError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError(f"--executor ray needs Ray, which is not installed; install it with: {RAY_INSTALL_HINT}") from None
    return ray


def _init_local(ray: Any, num_cpus: int, quiet: dict[str, Any]) -> None:
    """A new local instance ("local": never one found on this machine by accident), reachable
    from this machine only: Ray's servers (GCS, raylet, object manager, every worker's) take no
    authentication, and on a Linux node Ray binds them to every interface. They bind to the
    node's address, and a node at 127.0.0.1 is what Ray starts on macOS and Windows
    (ENABLE_RAY_CLUSTER off); no dashboard. ray.init also takes SIGTERM over: mend's own handler
    (which ends the run's workers) is put back."""
    import signal
    import threading

    import ray._private.ray_constants as constants

    main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGTERM) if main else None
    before = getattr(constants, "ENABLE_RAY_CLUSTER", True)
    constants.ENABLE_RAY_CLUSTER = False  # else Ray replaces 127.0.0.1 by the machine's address
    try:
        ray.init(address="local", num_cpus=max(1, num_cpus), include_dashboard=False,
                 _node_ip_address="127.0.0.1", **quiet)
    finally:
        constants.ENABLE_RAY_CLUSTER = before
        if main and handler is not None:
            signal.signal(signal.SIGTERM, handler)


class RayExecutor:
    """Submits each job as a Ray task (one CPU, never retried: a retry would run a target that
    crashed its worker again) and waits for it in the calling thread, so the stages' own thread
    pools (-j) decide how many tasks are in flight."""

    def __init__(self, address: Optional[str] = None, num_cpus: int = 1):
        import logging

        ray = self.ray = import_ray()
        self.owned = False
        # a caller (a test, a notebook) may have connected already: that connection is used, address or not
        if not ray.is_initialized():
            quiet: dict[str, Any] = dict(log_to_driver=False, logging_level=logging.ERROR, ignore_reinit_error=True)
            if address:
                _reachable(address)
            try:
                if address:
                    ray.init(address=address, **quiet)
                else:
                    _init_local(ray, num_cpus, quiet)
            except Exception as exc:  # ConnectionError, ValueError, RuntimeError: whatever Ray raises
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                raise ExecutorError(f"cannot start or reach {where}: {describe(exc)}") from None
            self.owned = True
        self.address = address
        self._task = ray.remote(num_cpus=1, max_retries=0)(run_on_node)
        self._env = driver_environment()
        self._quiet_raylet()

    def _quiet_raylet(self) -> None:
        """Ray's driver prints the cluster's error messages (a worker died, ...) to stdout, which is
        mend's report (``--format json | jq``). Each is already the failed job's own error:
        within this executor they are dropped. (A private hook; if it moves, nothing breaks but
        the quiet.)"""
        import ray._private.worker as rw

        self._printer = original = getattr(rw, "print_to_stdstream", None)
        if original is None:
            return

        def printer(data: dict, *args: Any, **kwargs: Any) -> None:
            if data.get("pid") != "raylet":
                original(data, *args, **kwargs)

        rw.print_to_stdstream = printer

    def run(self, job: Job) -> JobOutcome:
        # the driver's folder, not the Ray worker's: relative paths in a job mean what they mean here
        job = dataclasses.replace(job, cwd=job.cwd or os.getcwd())
        try:
            ref = self._task.remote(job, *self._env)
            return self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            # RayTaskError, WorkerCrashedError, NodeDiedError, ObjectLostError...: one job's failure
            # ("ray task failed" is in jobs.TRANSIENT, so no cache keeps it)
            return JobOutcome(None, f"{job.label}: ray task failed: {describe(exc)}", lost=True)

    def close(self) -> None:
        if self._printer is not None:
            import ray._private.worker as rw

            rw.print_to_stdstream = self._printer
        if self.owned:
            self.ray.shutdown()
