/*
 * child_exec: exec a program that must not outlive the process that started it.
 *
 * Usage: child_exec PARENT_PID [--no-thp] [--] PROGRAM [ARGS...]
 *
 * Why a launcher: Python's subprocess cannot set a parent-death signal without forking the
 * whole interpreter (a preexec_fn disables vfork), and an emulated board's QEMU must die
 * with the host process even when that one is SIGKILLed (nothing then runs its cleanup).
 * So this small program, exec'd in its place, sets PR_SET_PDEATHSIG (SIGKILL), checks that
 * PARENT_PID is still its parent (it may have died before the signal was armed: then it
 * exits 125 instead of leaving an orphan), and execs PROGRAM, which keeps the signal.
 *
 * --no-thp sets PR_SET_THP_DISABLE, kept across exec: QEMU asks for transparent huge pages
 * for its guest RAM and its translation buffer, and a short emulated run touches a few
 * kilobytes in each 2 MB region, which the kernel then zeroes whole on the first touch
 * (measured: ~4 ms of a 60 ms deploy of a small model on mps2-an386).
 *
 * Exit status: PROGRAM's (this process becomes it); 127 if it could not be executed; 126 on
 * a usage error; 125 if the parent was already gone.
 *
 * Build: cc -O2 -o child_exec child_exec.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: child_exec PARENT_PID [--no-thp] [--] PROGRAM [ARGS...]\n");
        return 126;
    }
    char *end = NULL;
    long parent = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || parent <= 0) {
        fprintf(stderr, "child_exec: bad parent pid %s\n", argv[1]);
        return 126;
    }
    int i = 2;
    if (i < argc && strcmp(argv[i], "--no-thp") == 0) {
        /* a kernel without THP refuses it (EINVAL): nothing to disable then */
        (void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
        ++i;
    }
    if (i < argc && strcmp(argv[i], "--") == 0) {
        ++i;
    }
    if (i >= argc) {
        fprintf(stderr, "child_exec: no program to run\n");
        return 126;
    }
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
        fprintf(stderr, "child_exec: cannot set the parent-death signal: %s\n", strerror(errno));
        return 126;
    }
    if ((long)getppid() != parent) {
        return 125; /* the parent died before the signal was armed */
    }
    execvp(argv[i], argv + i);
    fprintf(stderr, "child_exec: cannot execute %s: %s\n", argv[i], strerror(errno));
    return 127;
}
