#!/usr/bin/env python3
"""Regenerate src/aidge_deploy/boards/data/perf-seccomp.json, the container seccomp profile of
counter passes (see aidge_deploy/boards/seccomp.py for what it allows and why).

The allowed names are every system call of the Linux UAPI tables on this machine (x86_64,
i386 and the generic table of aarch64/riscv64, from linux-libc-dev), plus the 32-bit Arm
specific ones and calls newer than those headers, minus the privileged calls listed below.
Run it after a kernel-headers upgrade and review the diff:

    python3 scripts/make_seccomp_profile.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "aidge_deploy" / "boards" / "data" / "perf-seccomp.json"
TABLES = (
    Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    Path("/usr/include/x86_64-linux-gnu/asm/unistd_32.h"),
    Path("/usr/include/asm-generic/unistd.h"),
)
EPERM, ENOSYS = 1, 38

#: the point of this profile: counting events around the program
PERF = ("perf_event_open",)

#: 32-bit Arm (EABI) calls that no table above has
ARM_EXTRA = (
    "arm_fadvise64_64",
    "arm_sync_file_range",
    "sync_file_range2",
    "breakpoint",
    "cacheflush",
    "set_tls",
)
#: calls newer than Debian 12's headers that an ordinary program may use
NEWER = (
    "cachestat",
    "fchmodat2",
    "futex_requeue",
    "futex_wait",
    "futex_wake",
    "map_shadow_stack",
    "mseal",
    "listmount",
    "statmount",
    "getxattrat",
    "listxattrat",
    "removexattrat",
    "setxattrat",
)

#: refused with EPERM: calls that change the system, other processes or the kernel, or that
#: widen the kernel surface, and that an inference program never needs
PRIVILEGED = {
    # mounts and namespaces
    "mount", "umount", "umount2", "pivot_root", "unshare", "setns", "fsopen", "fsconfig",
    "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    # kernel modules and kexec
    "init_module", "finit_module", "delete_module", "create_module", "query_module",
    "get_kernel_syms", "kexec_load", "kexec_file_load",
    # the machine's state
    "reboot", "swapon", "swapoff", "settimeofday", "stime", "clock_settime",
    "clock_settime64", "clock_adjtime", "clock_adjtime64", "acct", "quotactl", "quotactl_fd",
    "syslog", "vhangup", "lookup_dcookie", "nfsservctl", "_sysctl", "sysfs", "ustat", "uselib",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd",
    # keyrings, BPF, userfaultfd, io_uring
    "add_key", "request_key", "keyctl", "bpf", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register",
    # file handles, NUMA placement, fanotify
    "open_by_handle_at", "name_to_handle_at", "mbind", "set_mempolicy", "get_mempolicy",
    "move_pages", "migrate_pages", "set_mempolicy_home_node", "fanotify_init",
    # x86 I/O ports, LDT, vm86
    "ioperm", "iopl", "modify_ldt", "vm86", "vm86old",
}  # fmt: skip
#: never implemented, or removed from the kernel: left to the default answer (ENOSYS)
UNIMPLEMENTED = {
    "afs_syscall", "break", "ftime", "getpmsg", "putpmsg", "gtty", "stty", "lock", "mpx",
    "prof", "profil", "security", "tuxcall", "ulimit", "vserver", "idle", "bdflush",
    "syscalls", "arch_specific_syscall",
}  # fmt: skip
#: allowed only with these arguments (below)
WITH_ARGS = {"clone", "clone3", "personality"}

#: clone() flags that create namespaces: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
#: NEWPID, NEWNET
CLONE_NEW_MASK = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
CLONE_NEW_MASK |= 0x20000000 | 0x40000000
#: personality(): PER_LINUX, PER_LINUX32, UNAME26, PER_LINUX32|UNAME26, and the query
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)


def table_names() -> set[str]:
    names: set[str] = set()
    for table in TABLES:
        names |= set(re.findall(r"#define __NR(?:3264)?_(\w+)\s", table.read_text()))
    return names


def profile() -> dict[str, object]:
    names = (table_names() | set(ARM_EXTRA) | set(NEWER) | set(PERF)) - UNIMPLEMENTED
    allowed = sorted(names - PRIVILEGED - WITH_ARGS)
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": ENOSYS,
        "archMap": [
            {
                "architecture": "SCMP_ARCH_X86_64",
                "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            },
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
            {"architecture": "SCMP_ARCH_RISCV64", "subArchitectures": None},
        ],
        "syscalls": [
            {"names": allowed, "action": "SCMP_ACT_ALLOW"},
            {
                "names": ["clone"],
                "action": "SCMP_ACT_ALLOW",
                "args": [
                    {"index": 0, "value": CLONE_NEW_MASK, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
                ],
            },
            # clone3 passes its flags in memory seccomp cannot read: make libc fall back to clone
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS},
            *(
                {
                    "names": ["personality"],
                    "action": "SCMP_ACT_ALLOW",
                    "args": [{"index": 0, "value": value, "op": "SCMP_CMP_EQ"}],
                }
                for value in PERSONALITIES
            ),
            {"names": sorted(PRIVILEGED), "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM},
        ],
    }


def main() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(profile(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
