/*
 * perf_run: run a program under Linux perf_event counters and report them as JSON.
 *
 * Why: on SSH boards there may be no Python, and a program's peak RSS is only clean when
 * it is forked from a small process (a child inherits its parent's RSS high-water mark
 * across exec). This launcher forks, holds the child on a pipe until the counter group is
 * opened on it with enable_on_exec, lets it exec the program, waits with wait4 and prints
 * one JSON object: the counters (scaled by enabled/running time), the ones the kernel
 * refused with errno and reason, peak RSS (ru_maxrss), CPU times, wall time, and how the
 * program ended. The program's exit status is preserved (128+N if killed by signal N).
 *
 * It is the one perf_event implementation of aidge-deploy: the host, SSH boards and
 * containers all run it (the Python side only builds its command line and reads its JSON),
 * so an event is reported the same way everywhere: counted (scaled by enabled/running
 * time, with the running ratio), or unavailable with errno and reason — refused at open,
 * never enabled (the program did not start) or never scheduled on the PMU — never a zero
 * and never a made-up ratio.
 *
 * Build: gcc -O2 -o perf_run perf_run.c        (also: aarch64-linux-gnu-gcc -O2 -static)
 * Usage: perf_run [-o report.json] [-e name=type:config]... [--] program [args...]
 *        perf_run --probe [-o report.json] [-e name=type:config]...
 *   -e may be repeated (type and config as in linux/perf_event.h, decimal or 0x hex); without
 *   -e: task-clock, page-faults, context-switches, cycles, instructions.
 *   --probe opens each event on the launcher itself, one at a time, and reports which the
 *   kernel allows (schema aidge-deploy.perf-probe), without running anything.
 *   Without -o the report is one line on stderr, prefixed "AIDGE_PERF_RUN ".
 * Exit status: the program's; 127 if it could not be executed; 126 on a usage error; 0 for
 * --probe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 32
#define NAME_LEN 64

#ifndef __NR_perf_event_open
#if defined(__x86_64__)
#define __NR_perf_event_open 298
#elif defined(__aarch64__)
#define __NR_perf_event_open 241
#elif defined(__arm__)
#define __NR_perf_event_open 364
#endif
#endif

/* struct perf_event_attr up to config1 (PERF_ATTR_SIZE_VER0 = 64 bytes): declared here so
 * the launcher builds against any libc, kernel headers or not. */
struct attr_v0 {
    uint32_t type;
    uint32_t size;
    uint64_t config;
    uint64_t sample_period;
    uint64_t sample_type;
    uint64_t read_format;
    uint64_t flags;
    uint32_t wakeup_events;
    uint32_t bp_type;
    uint64_t config1;
};

#define FMT_TOTAL_TIME_ENABLED (1u << 0)
#define FMT_TOTAL_TIME_RUNNING (1u << 1)
#define FMT_GROUP (1u << 3)
#define BIT_DISABLED (1ull << 0)
#define BIT_EXCLUDE_KERNEL (1ull << 5)
#define BIT_EXCLUDE_HV (1ull << 6)
#define BIT_ENABLE_ON_EXEC (1ull << 12)
#define FLAG_FD_CLOEXEC (1ul << 3)

struct event {
    char name[NAME_LEN];
    uint32_t type;
    uint64_t config;
    int fd;     /* -1 when refused */
    int err;    /* errno of the refusal */
    int slot;   /* index in the group read */
};

static struct event events[MAX_EVENTS];
static int n_events;

static char paranoid_reason[192];

/* EACCES/EPERM: say the paranoid level, the usual cause, as the Python side used to. */
static const char *not_permitted(void) {
    int level = -99;
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    if (f) {
        if (fscanf(f, "%d", &level) != 1) {
            level = -99;
        }
        fclose(f);
    }
    if (level == -99) {
        return "not permitted (kernel.perf_event_paranoid, missing CAP_PERFMON, or a seccomp "
               "profile blocking perf_event_open in a container)";
    }
    snprintf(paranoid_reason, sizeof paranoid_reason,
             "not permitted (kernel.perf_event_paranoid=%d: lower it or grant CAP_PERFMON; in a "
             "container a seccomp profile may block perf_event_open)", level);
    return paranoid_reason;
}

static const char *reason(int err) {
    switch (err) {
    case ENOENT: return "no such event on this machine (no hardware PMU driver, or not implemented by the CPU)";
    case EACCES:
    case EPERM: return not_permitted();
    case ENOSYS: return "perf_event_open is not implemented here (qemu-user, or no CONFIG_PERF_EVENTS)";
    case EOPNOTSUPP: return "the PMU cannot count this event in this mode";
    case ENODEV: return "the PMU of this CPU does not support this event";
    case EINVAL: return "the kernel rejected this event configuration";
    case EMFILE: return "too many open files";
    default: return strerror(err);
    }
}

static const char *errname(int err) {
    switch (err) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case ENODEV: return "ENODEV";
    case EINVAL: return "EINVAL";
    case EMFILE: return "EMFILE";
    default: return "E?";
    }
}

static int add_event(const char *spec) {
    const char *eq = strchr(spec, '=');
    const char *colon = eq ? strchr(eq, ':') : NULL;
    char *end = NULL;
    if (n_events >= MAX_EVENTS || !eq || !colon || eq == spec || (size_t)(eq - spec) >= NAME_LEN) {
        return -1;
    }
    struct event *ev = &events[n_events];
    memcpy(ev->name, spec, (size_t)(eq - spec));
    ev->name[eq - spec] = '\0';
    for (char *c = ev->name; *c; ++c) {
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) {
            return -1; /* keep the JSON trivially valid */
        }
    }
    errno = 0;
    ev->type = (uint32_t)strtoul(eq + 1, &end, 0);
    if (errno || end != colon) {
        return -1;
    }
    ev->config = strtoull(colon + 1, &end, 0);
    if (errno || *end != '\0') {
        return -1;
    }
    ev->fd = -1;
    ev->err = 0;
    ev->slot = -1;
    ++n_events;
    return 0;
}

static long open_event(struct event *ev, pid_t pid, int group_fd) {
#ifdef __NR_perf_event_open
    struct attr_v0 attr;
    memset(&attr, 0, sizeof attr);
    attr.type = ev->type;
    attr.size = sizeof attr;
    attr.config = ev->config;
    attr.read_format = FMT_GROUP | FMT_TOTAL_TIME_ENABLED | FMT_TOTAL_TIME_RUNNING;
    attr.flags = BIT_EXCLUDE_KERNEL | BIT_EXCLUDE_HV;
    if (group_fd < 0) {
        attr.flags |= BIT_DISABLED | BIT_ENABLE_ON_EXEC; /* members follow the leader */
    }
    return syscall(__NR_perf_event_open, &attr, pid, -1, group_fd, FLAG_FD_CLOEXEC);
#else
    (void)ev; (void)pid; (void)group_fd;
    errno = ENOSYS;
    return -1;
#endif
}

static double seconds(struct timeval tv) {
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void usage(void) {
    fputs("usage: perf_run [-o report.json] [-e name=type:config]... [--] program [args...]\n"
          "       perf_run --probe [-o report.json] [-e name=type:config]...\n", stderr);
}

static FILE *open_report(const char *out_path) {
    FILE *out = stderr;
    if (out_path) {
        out = fopen(out_path, "w");
        if (!out) {
            fprintf(stderr, "perf_run: cannot write %s: %s\n", out_path, strerror(errno));
            out = stderr;
        }
    }
    if (out == stderr) {
        fputs("AIDGE_PERF_RUN ", out);
    }
    return out;
}

/* --probe: can each event be opened here? Opened on ourselves, alone, then closed. */
static int probe(const char *out_path) {
    for (int k = 0; k < n_events; ++k) {
        long fd = open_event(&events[k], 0, -1);
        if (fd < 0) {
            events[k].err = errno;
        } else {
            close((int)fd);
        }
    }
    FILE *out = open_report(out_path);
    fputs("{\"schema\":\"aidge-deploy.perf-probe\",\"schema_version\":1,\"available\":[", out);
    int first = 1;
    for (int k = 0; k < n_events; ++k) {
        if (events[k].err == 0) {
            fprintf(out, "%s\"%s\"", first ? "" : ",", events[k].name);
            first = 0;
        }
    }
    fputs("],\"unavailable\":[", out);
    first = 1;
    for (int k = 0; k < n_events; ++k) {
        if (events[k].err != 0) {
            fprintf(out, "%s{\"name\":\"%s\",\"errno\":\"%s\",\"reason\":\"%s\"}", first ? "" : ",",
                    events[k].name, errname(events[k].err), reason(events[k].err));
            first = 0;
        }
    }
    fputs("]}\n", out);
    if (out != stderr) {
        fclose(out);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *out_path = NULL;
    int probing = 0;
    int i = 1;
    for (; i < argc; ++i) {
        if (strcmp(argv[i], "--") == 0) {
            ++i;
            break;
        } else if (strcmp(argv[i], "--probe") == 0) {
            probing = 1;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc) {
            if (add_event(argv[++i]) != 0) {
                fprintf(stderr, "perf_run: bad event spec '%s' (want name=type:config)\n", argv[i]);
                return 126;
            }
        } else if (argv[i][0] == '-') {
            usage();
            return 126;
        } else {
            break;
        }
    }
    if (i >= argc && !probing) {
        usage();
        return 126;
    }
    if (n_events == 0) {
        add_event("task-clock=1:1");
        add_event("page-faults=1:2");
        add_event("context-switches=1:3");
        add_event("cycles=0:0");
        add_event("instructions=0:1");
    }
    if (probing) {
        return probe(out_path);
    }

    int gate[2];
    if (pipe(gate) != 0) {
        perror("perf_run: pipe");
        return 126;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("perf_run: fork");
        return 126;
    }
    if (pid == 0) {
        char go;
        close(gate[1]);
        /* wait until the parent opened the counters; EOF also releases us */
        while (read(gate[0], &go, 1) < 0 && errno == EINTR) {
        }
        close(gate[0]);
        execvp(argv[i], &argv[i]);
        fprintf(stderr, "perf_run: cannot execute %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    close(gate[0]);

    int leader = -1, n_open = 0;
    for (int k = 0; k < n_events; ++k) {
        long fd = open_event(&events[k], pid, leader);
        if (fd < 0) {
            events[k].err = errno;
            continue;
        }
        events[k].fd = (int)fd;
        events[k].slot = n_open++;
        if (leader < 0) {
            leader = (int)fd;
        }
    }
    if (write(gate[1], "g", 1) != 1) {
        /* the child sees EOF and runs anyway */
    }
    close(gate[1]);

    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("perf_run: wait4");
            return 126;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);

    uint64_t buf[3 + MAX_EVENTS];
    memset(buf, 0, sizeof buf);
    int have_values = 0;
    if (leader >= 0) {
        ssize_t want = (ssize_t)(sizeof(uint64_t) * (size_t)(3 + n_open));
        have_values = read(leader, buf, (size_t)want) == want;
    }
    /* enabled time 0: the exec never happened, so the zeros mean nothing; running time 0:
     * the group was enabled but never on the PMU (counters busy or pinned by someone else),
     * so there is no count to scale and no ratio to report */
    int never_ran = have_values && buf[1] == 0;
    int never_scheduled = have_values && !never_ran && buf[2] == 0;
    int counted = have_values && !never_ran && !never_scheduled;

    FILE *out = open_report(out_path);
    int exited = WIFEXITED(status);
    int code = exited ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(out, "{\"schema\":\"aidge-deploy.perf-run\",\"schema_version\":1,");
    fprintf(out, "\"exit_code\":%d,\"signal\":%d,", exited ? code : -1, exited ? 0 : WTERMSIG(status));
    fprintf(out, "\"peak_rss_kb\":%ld,\"user_s\":%.6f,\"system_s\":%.6f,\"wall_s\":%.6f,",
            (long)ru.ru_maxrss, seconds(ru.ru_utime), seconds(ru.ru_stime), wall);
    fprintf(out, "\"time_enabled_ns\":%llu,\"time_running_ns\":%llu,\"counters\":[",
            (unsigned long long)(have_values ? buf[1] : 0), (unsigned long long)(have_values ? buf[2] : 0));
    int first = 1;
    for (int k = 0; k < n_events; ++k) {
        if (events[k].fd < 0 || !counted) {
            continue;
        }
        fprintf(out, "%s{\"name\":\"%s\",\"value\":%llu}", first ? "" : ",", events[k].name,
                (unsigned long long)buf[3 + events[k].slot]);
        first = 0;
    }
    fputs("],\"unavailable\":[", out);
    first = 1;
    for (int k = 0; k < n_events; ++k) {
        if (events[k].fd >= 0 && counted) {
            continue;
        }
        const char *code_name = errname(events[k].err);
        const char *why = reason(events[k].err);
        if (events[k].fd >= 0) {
            if (never_ran) {
                code_name = "NOTRUN";
                why = "never enabled: the program did not start";
            } else if (never_scheduled) {
                code_name = "NOTSCHED";
                why = "never scheduled on the PMU (all counters busy, or pinned by another user)";
            } else {
                code_name = "EIO";
                why = "the counter group could not be read";
            }
        }
        fprintf(out, "%s{\"name\":\"%s\",\"errno\":\"%s\",\"reason\":\"%s\"}", first ? "" : ",",
                events[k].name, code_name, why);
        first = 0;
    }
    fputs("]}\n", out);
    if (out != stderr) {
        fclose(out);
    }
    for (int k = 0; k < n_events; ++k) {
        if (events[k].fd >= 0) {
            close(events[k].fd);
        }
    }
    return code;
}
