"""Finds QEMU processes a test started, to prove that none is left behind.

Other sessions may run QEMU on the same machine, so a test looks only for processes whose
command line mentions its own (unique) temporary directory, which QemuMachine passes to
QEMU in ``-D <log_dir>/...``.
"""

from __future__ import annotations

from pathlib import Path


def qemu_pids_mentioning(text: str) -> list[int]:
    """PIDs of live (non-zombie) qemu-system-* processes whose argv contains ``text``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z" or not argv or b"qemu-system" not in argv[0]:
            continue
        if any(text.encode() in arg for arg in argv):
            pids.append(int(proc.name))
    return pids


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer exists at all (not even as an unreaped zombie)."""
    return not Path(f"/proc/{pid}").exists()
