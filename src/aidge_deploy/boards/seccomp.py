"""The seccomp profile of containers that count perf events, shipped as package data.

Why this module exists: Docker's default seccomp profile refuses ``perf_event_open``, so a
counter pass inside a board's container got nothing — and running it ``seccomp=unconfined``
would drop the filter altogether. ``data/perf-seccomp.json`` keeps a filter of the same kind:
an allow-list of the kernel's system calls (unknown ones answer ENOSYS, so libc falls back),
``clone`` without namespace flags, ``clone3`` answered ENOSYS (its flags cannot be filtered),
a fixed set of ``personality`` values, and the calls that change the machine, other
processes or the kernel (mounts, namespaces, modules, kexec, ptrace, keyrings, BPF,
io_uring, clocks, reboot, ...) refused with EPERM — with ``perf_event_open`` allowed. The
kernel's own checks (``perf_event_paranoid``, capabilities) still apply inside. It is
written by ``scripts/make_seccomp_profile.py`` from the kernel's system-call tables.
"""

from __future__ import annotations

import hashlib
import posixpath
from importlib import resources
from pathlib import Path

PROFILE_NAME = "perf-seccomp.json"


def perf_profile() -> Path:
    """The profile file inside the installed package."""
    return Path(str(resources.files("aidge_deploy.boards").joinpath("data", PROFILE_NAME)))


def perf_profile_folder(tools_root: str) -> str:
    """Where the profile goes on a board: under its tools folder, one folder per version."""
    digest = hashlib.sha256(perf_profile().read_bytes()).hexdigest()[:12]
    return posixpath.join(tools_root, f"seccomp-{digest}")


__all__ = ["PROFILE_NAME", "perf_profile", "perf_profile_folder"]
