/*
 * child_guard: loaded into a child process (LD_PRELOAD) so that it dies with the process
 * that started it, and runs without transparent huge pages.
 *
 * Why: an emulator started for a run must not outlive it, even when the host process is
 * SIGKILLed and none of its cleanup runs. Linux has the parent-death signal for that, but
 * Python's subprocess can set it only by forking the whole interpreter (a preexec_fn turns
 * off vfork), and a launcher program exec'd in between costs a whole extra exec (~1 ms on
 * a QEMU start of ~30 ms). This constructor runs in the child itself, before its main():
 *
 *   - PR_SET_PDEATHSIG (SIGKILL), then a check that AIDGE_DEPLOY_PARENT_PID is still its
 *     parent (it may have died before the signal was armed: then it exits 125 at once
 *     instead of living on as an orphan);
 *   - PR_SET_THP_DISABLE: QEMU asks for transparent huge pages for its guest RAM and its
 *     translation buffer, and a short emulated run touches a few kilobytes in each 2 MB
 *     region, which the kernel then zeroes whole on the first touch (measured: ~4 ms of a
 *     60 ms deploy of a small model on mps2-an386);
 *   - LD_PRELOAD gets back its value from before (AIDGE_DEPLOY_LD_PRELOAD, else it is
 *     unset), so the child's own children do not load this library.
 *
 * Without AIDGE_DEPLOY_PARENT_PID it does nothing. A statically linked program never loads
 * it: the Python side (child_guard.py) checks for a dynamic loader first.
 *
 * Build: cc -O2 -shared -fPIC -o libaidge_child_guard.so child_guard.c
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

__attribute__((constructor)) static void aidge_child_guard(void) {
    const char *parent = getenv("AIDGE_DEPLOY_PARENT_PID");
    const char *before = getenv("AIDGE_DEPLOY_LD_PRELOAD");
    if (before && *before) {
        setenv("LD_PRELOAD", before, 1);
    } else {
        unsetenv("LD_PRELOAD");
    }
    unsetenv("AIDGE_DEPLOY_LD_PRELOAD");
    if (!parent) {
        return;
    }
    long expected = strtol(parent, NULL, 10);
    unsetenv("AIDGE_DEPLOY_PARENT_PID");
    (void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0); /* EINVAL without THP: nothing to disable */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || (long)getppid() != expected) {
        _exit(125); /* no guard, or the parent is already gone */
    }
}
