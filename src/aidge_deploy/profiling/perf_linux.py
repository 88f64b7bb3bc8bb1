"""Linux ``perf_event`` counters around a local program run, through ``perf_event_open``.

The syscall is called with ctypes (no ``perf`` binary, no extra package). The counters of
one pass form one group opened on the child *before* it runs the program: the child is a
``/bin/sh`` gate that waits on its stdin, the parent opens the group on the gate's pid with
``enable_on_exec``, then releases the gate, which ``exec``\\ s the program — so counting
starts exactly at the program's exec and nothing of the launcher is counted. The group is
read once after the program ended (``GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING``) and
each value is scaled by enabled/running; a running fraction below 1 means the kernel
multiplexed the PMU, and is reported.

``inherit`` is off: group reads of inherited counters are refused by the kernels we meet,
so only the program's own thread is counted (Aidge host exports are single-threaded
unless built with ``AIDGE_ENABLE_OPENMP``). ``exclude_kernel`` is on, as
``perf_event_paranoid`` >= 2 requires for unprivileged users. An event the kernel refuses
is reported unavailable with the reason, never as zero.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import platform
import signal
import struct
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from aidge_deploy.connections.local_process import ProcessRun, decode_status, kill_group, wait_child
from aidge_deploy.profiling.counters import Counter, CounterDomain, load_catalogue

log = logging.getLogger("aidge_deploy")

#: perf_event_open syscall numbers per machine (uname -m)
SYSCALL_NUMBERS = {
    "x86_64": 298,
    "aarch64": 241,
    "riscv64": 241,
    "armv7l": 364,
    "armv6l": 364,
    "i686": 336,
    "i386": 336,
}

# linux/perf_event.h
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FORMAT_GROUP = 1 << 3
PERF_FLAG_FD_CLOEXEC = 1 << 3
_BIT_DISABLED = 1 << 0
_BIT_EXCLUDE_KERNEL = 1 << 5
_BIT_EXCLUDE_HV = 1 << 6
_BIT_ENABLE_ON_EXEC = 1 << 12
PERF_ATTR_SIZE_VER0 = 64

#: waits for a line on stdin (the parent's go), then becomes the program; stdin -> /dev/null
_GATE_SCRIPT = 'read _gate || exit 125; exec "$@" </dev/null'


class _PerfEventAttr(ctypes.Structure):
    """``struct perf_event_attr`` up to ``config1`` (PERF_ATTR_SIZE_VER0, accepted by all kernels)."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
    ]


def paranoid_level() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def explain_errno(err: int) -> str:
    """Why the kernel refused an event, in words a user can act on."""
    name = errno.errorcode.get(err, str(err))
    if err == errno.ENOENT:
        return (
            f"{name}: this machine has no such event (no hardware PMU driver — typical in a VM — "
            "or the CPU does not implement it)"
        )
    if err in (errno.EACCES, errno.EPERM):
        level = paranoid_level()
        return (
            f"{name}: not permitted (kernel.perf_event_paranoid={level}; lower it or grant "
            "CAP_PERFMON; inside a container the seccomp profile also blocks perf_event_open)"
        )
    if err == errno.ENOSYS:
        return (
            f"{name}: perf_event_open is not implemented here (qemu-user emulation, or a kernel "
            "built without CONFIG_PERF_EVENTS)"
        )
    if err == errno.EOPNOTSUPP:
        return f"{name}: the PMU cannot count this event in this mode"
    if err == errno.ENODEV:
        return f"{name}: the PMU of this CPU does not support this event"
    if err == errno.EINVAL:
        return f"{name}: the kernel rejected this event configuration"
    if err == errno.EMFILE:
        return f"{name}: too many open files"
    return f"{name}: {os.strerror(err)}"


class PerfUnsupportedError(OSError):
    """perf_event_open cannot be called on this machine at all (unknown architecture)."""


@lru_cache(maxsize=1)
def _syscall() -> tuple[ctypes._CFuncPtr, int]:  # type: ignore[name-defined]
    machine = platform.machine()
    nr = SYSCALL_NUMBERS.get(machine)
    if nr is None:
        raise PerfUnsupportedError(
            errno.ENOSYS, f"perf_event_open syscall number unknown for {machine}"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.syscall
    fn.restype = ctypes.c_long
    fn.argtypes = [
        ctypes.c_long,
        ctypes.POINTER(_PerfEventAttr),
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_ulong,
    ]
    return fn, nr


def perf_event_open(
    counter: Counter, *, pid: int, group_fd: int = -1, leader: bool = True, on_exec: bool = False
) -> int:
    """Open one counter on ``pid`` (0: this process) and return its fd; raises ``OSError``."""
    if counter.event.perf_type is None or counter.event.perf_config is None:
        raise ValueError(f"{counter.name} is not a perf_event counter")
    fn, nr = _syscall()
    attr = _PerfEventAttr()
    attr.type = counter.event.perf_type
    attr.size = PERF_ATTR_SIZE_VER0
    attr.config = counter.event.perf_config
    attr.read_format = (
        PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
    )
    flags = _BIT_EXCLUDE_KERNEL | _BIT_EXCLUDE_HV
    if leader:
        # members follow their leader: only the leader is disabled / enabled at exec
        flags |= _BIT_DISABLED | (_BIT_ENABLE_ON_EXEC if on_exec else 0)
    attr.flags = flags
    fd = int(fn(nr, ctypes.byref(attr), pid, -1, group_fd, PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, explain_errno(err))
    return fd


def linux_perf_counters() -> tuple[Counter, ...]:
    return load_catalogue().in_domain(CounterDomain.LINUX_PERF)


@lru_cache(maxsize=1)
def _probe_cached() -> Mapping[str, str | None]:
    out: dict[str, str | None] = {}
    for counter in linux_perf_counters():
        try:
            fd = perf_event_open(counter, pid=0)
        except PerfUnsupportedError as exc:
            out[counter.name] = explain_errno(exc.errno or errno.ENOSYS)
        except OSError as exc:
            out[counter.name] = exc.strerror or explain_errno(exc.errno or 0)
        else:
            os.close(fd)
            out[counter.name] = None
    return MappingProxyType(out)


def probe_available(counters: Iterable[Counter] | None = None) -> dict[str, str | None]:
    """Try to open each counter on this process: name -> None (countable) or the reason.

    The probe of the whole catalogue runs once per process (the answer depends on the
    kernel, its PMU driver and ``perf_event_paranoid``, which do not change under us).
    """
    probed = _probe_cached()
    if counters is None:
        return dict(probed)
    return {c.name: probed.get(c.name, "not a linux-perf counter") for c in counters}


@dataclass(frozen=True)
class CounterReading:
    """One counter of a group read: raw count and how long it was enabled / running."""

    name: str
    raw: int
    time_enabled_ns: int
    time_running_ns: int

    @property
    def running_ratio(self) -> float:
        if self.time_enabled_ns <= 0:
            return 1.0
        return self.time_running_ns / self.time_enabled_ns

    @property
    def scaled(self) -> float | None:
        """The count extrapolated to the enabled time; None if it never counted."""
        if self.time_running_ns <= 0:
            return None
        return self.raw * (self.time_enabled_ns / self.time_running_ns)


@dataclass(frozen=True)
class CountedRun:
    """A finished program run and the counters of its pass."""

    run: ProcessRun
    readings: Mapping[str, CounterReading]
    #: counter -> why it was not counted (refused at open, or never scheduled)
    unavailable: Mapping[str, str]


def _read_group(fd: int, names: Sequence[str]) -> dict[str, CounterReading]:
    size = 8 * (3 + len(names))
    data = os.read(fd, size)
    nr, enabled, running = struct.unpack_from("<QQQ", data, 0)
    values = struct.unpack_from(f"<{nr}Q", data, 24)
    return {
        name: CounterReading(name, int(value), int(enabled), int(running))
        for name, value in zip(names, values, strict=False)
    }


def _open_group(
    counters: Sequence[Counter], pid: int
) -> tuple[list[int], list[str], dict[str, str]]:
    fds: list[int] = []
    names: list[str] = []
    refused: dict[str, str] = {}
    for counter in counters:
        try:
            fd = perf_event_open(
                counter,
                pid=pid,
                group_fd=fds[0] if fds else -1,
                leader=not fds,
                on_exec=True,
            )
        except PerfUnsupportedError as exc:
            refused[counter.name] = explain_errno(exc.errno or errno.ENOSYS)
        except OSError as exc:
            refused[counter.name] = exc.strerror or explain_errno(exc.errno or 0)
        else:
            fds.append(fd)
            names.append(counter.name)
    return fds, names, refused


def run_with_counters(
    argv: Sequence[str],
    counters: Sequence[Counter],
    *,
    cwd: Path,
    timeout_s: float,
    stdout_path: Path,
    stderr_path: Path,
    env: Mapping[str, str] | None = None,
    kill_grace_s: float = 2.0,
) -> CountedRun:
    """Run ``argv`` to completion (or ``timeout_s``) with ``counters`` counted as one group.

    Like ``connections.local_process.run_process``: output straight to files, own process
    group (killed whole at the timeout); never raises for the child's fate. Peak RSS is
    left ``None``: ``ru_maxrss`` of a child of this Python process starts at the parent's
    RSS (the kernel carries the pre-exec high-water mark over ``exec``).
    """
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    fds: list[int] = []
    names: list[str] = []
    refused: dict[str, str] = {}
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", _GATE_SCRIPT, "aidge-perf-gate", *argv],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        try:
            fds, names, refused = _open_group(counters, proc.pid)
            stdin = proc.stdin
            if stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    stdin.write(b"go\n")
                    stdin.close()
        except BaseException:
            # never leave the gate waiting forever
            kill_group(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            for fd in fds:
                os.close(fd)
            raise
        try:
            status, _rusage, timed_out = wait_child(proc.pid, timeout_s, kill_grace_s)
            readings = _read_group(fds[0], names) if fds else {}
        finally:
            for fd in fds:
                os.close(fd)
    duration = time.perf_counter() - started
    returncode, sig = decode_status(status, timed_out)
    proc.returncode = returncode if returncode is not None else -9
    unavailable = dict(refused)
    for name, reading in readings.items():
        if reading.time_enabled_ns <= 0:
            unavailable[name] = "never enabled: the program did not start"
        elif reading.scaled is None:
            unavailable[name] = (
                "never scheduled on the PMU (all counters busy, or pinned by another user)"
            )
    run = ProcessRun(
        argv=tuple(argv),
        returncode=returncode,
        signal=sig,
        stdout=stdout_path.read_text(encoding="utf-8", errors="replace"),
        stderr=stderr_path.read_text(encoding="utf-8", errors="replace"),
        duration_s=duration,
        timed_out=timed_out,
        # not measured: a child forked from this (large) Python process inherits the parent's
        # RSS high-water mark into ru_maxrss at exec; perf_run.c measures it cleanly
        peak_rss_bytes=None,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
    )
    return CountedRun(
        run=run,
        readings=MappingProxyType({k: v for k, v in readings.items() if k not in unavailable}),
        unavailable=MappingProxyType(unavailable),
    )


__all__ = [
    "CountedRun",
    "CounterReading",
    "PerfUnsupportedError",
    "explain_errno",
    "linux_perf_counters",
    "paranoid_level",
    "perf_event_open",
    "probe_available",
    "run_with_counters",
]
