"""The processes of a benchmark, read from Linux's /proc (nothing elsewhere): their CPU seconds and peak
resident sets, and :class:`Sampler`, which reads them while a block runs so that a process that ends
within it (a job's SDK workers exit with the job) is counted to its last sample. The cluster
benchmarks (``flink.py``, ``keys.py``) measure their processes with these; :func:`timed` gives a block's
wall and CPU seconds in this process (the DirectRunner benchmarks ``consistent_cost.py``, ``device_cost.py``)."""
from __future__ import annotations

import os
import threading
import time

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def timed(fn) -> tuple:
    """``(wall seconds, CPU seconds of this process)`` of ``fn()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def cpu_seconds() -> dict:
    """CPU seconds used so far by every process of this machine, by ``(process group, pid)``
    (Linux's /proc; empty elsewhere): the local cluster starts each part in a group of its own."""
    out = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
        except OSError:   # the process ended
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[(int(fields[2]), int(name))] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def peak_kb(pid: int) -> int | None:
    """A process's peak resident set (VmHWM, kB), or None when it has ended."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None


class Sampler:
    """``with meter: ...`` for a subclass that defines :meth:`begin` (read at the start) and
    :meth:`sample` (read every ``interval`` seconds on a thread of its own while the block runs, and once
    at its end), and may define :meth:`end` (after the last sample)."""

    def __init__(self, interval: float):
        self.interval = interval
        self._stop = threading.Event()

    def begin(self):
        raise NotImplementedError

    def sample(self):
        raise NotImplementedError

    def end(self):
        pass

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self):
        self.begin()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()
        self.end()
        return False
