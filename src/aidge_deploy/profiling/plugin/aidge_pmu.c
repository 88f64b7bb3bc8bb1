/*
 * aidge_pmu: an emulated PMU for QEMU TCG (plugin API v1, QEMU >= 7.2).
 *
 * QEMU models no cycle counter and no Armv8-M PMU, so emulated boards get deterministic
 * guest event counts from this plugin instead. Counted, for the whole guest (all vCPUs
 * into one set of counters; Cortex-M machines have one):
 *
 *   instructions    guest instructions executed (an inline +1 before each instruction,
 *                   so an instruction that faults is still counted once)
 *   loads           guest memory reads, one per access QEMU performs (an LDM of 4 words
 *                   counts 4, a literal-pool LDR counts 1; MMIO reads included)
 *   stores          guest memory writes, likewise (PUSH/STM count once per word)
 *   branches_taken  control transfers: each time a translation block starts executing at
 *                   an address other than the end of the block executed just before it.
 *                   Every branch, call, return, LE loop-back, exception entry and
 *                   exception return ends a block in QEMU, so this counts taken branches
 *                   (conditional ones only when taken) plus exception entries/returns;
 *                   blocks split for other reasons continue sequentially and count 0.
 *
 * Arguments (-plugin libaidge_pmu.so,boundary=0x...,out=FILE):
 *   boundary=ADDR  (repeatable, up to 16) snapshot the counters each time execution
 *                  reaches ADDR (bit 0, the Thumb bit, is ignored). A snapshot holds the
 *                  counts of everything executed *before* the instruction at ADDR,
 *                  including the branch that reached it.
 *   out=FILE       where snapshots go (default: QEMU's plugin log, -d plugin).
 *
 * Output, one record per line, flushed as written (nothing lost if QEMU is killed):
 *   # aidge_pmu 1 instructions loads stores branches_taken
 *   B <boundary-index> 0x<address>
 *   S <seq> <boundary-index> <instructions> <loads> <stores> <branches_taken>
 *   T <instructions> <loads> <stores> <branches_taken>      (at exit)
 *
 * Build: gcc -O2 -shared -fPIC -fvisibility=hidden -o libaidge_pmu.so aidge_pmu.c
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu_plugin_api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = AIDGE_QEMU_PLUGIN_VERSION;

#define MAX_BOUNDARIES 16
#define NO_BLOCK UINT64_MAX

static uint64_t n_insns, n_loads, n_stores, n_taken;
static uint64_t last_block_end = NO_BLOCK;
static uint64_t seq;
static uint64_t boundaries[MAX_BOUNDARIES];
static int n_boundaries;
static FILE *out;

struct block_span {
    uint64_t start;
    uint64_t end;
};

static void emit(const char *line) {
    if (out) {
        fputs(line, out);
        fflush(out);
    } else {
        qemu_plugin_outs(line);
    }
}

/* Blocks of 32-bit guests fit in the userdata pointer itself (no allocation per
 * translation; an even end address keeps bit 0 clear); others get a heap record, tagged
 * with bit 0, that lives as long as QEMU (a block may run until the emulator exits). */
static void *pack_span(uint64_t start, uint64_t end) {
    if (sizeof(void *) >= 8 && start <= UINT32_MAX && end <= UINT32_MAX && (end & 1u) == 0) {
        return (void *)(uintptr_t)((start << 32) | end);
    }
    struct block_span *span = malloc(sizeof *span);
    if (!span) {
        abort();
    }
    span->start = start;
    span->end = end;
    return (void *)((uintptr_t)span | 1u); /* heap records are tagged with bit 0 */
}

static void unpack_span(void *udata, uint64_t *start, uint64_t *end) {
    uintptr_t raw = (uintptr_t)udata;
    if (sizeof(void *) >= 8 && (raw & 1u) == 0) {
        *start = (uint64_t)raw >> 32;
        *end = (uint64_t)raw & UINT32_MAX;
        return;
    }
    const struct block_span *span = (const struct block_span *)(raw & ~(uintptr_t)1u);
    *start = span->start;
    *end = span->end;
}

static void on_block(unsigned int vcpu, void *udata) {
    (void)vcpu;
    uint64_t start, end;
    unpack_span(udata, &start, &end);
    if (last_block_end != NO_BLOCK && start != last_block_end) {
        ++n_taken;
    }
    last_block_end = end;
}

static void on_boundary(unsigned int vcpu, void *udata) {
    (void)vcpu;
    char line[160];
    snprintf(line, sizeof line, "S %" PRIu64 " %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
             seq++, (int)(intptr_t)udata, n_insns, n_loads, n_stores, n_taken);
    emit(line);
    ++n_insns; /* the boundary instruction itself: counted after the snapshot */
}

static void on_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata) {
    (void)vcpu;
    (void)vaddr;
    (void)udata;
    if (qemu_plugin_mem_is_store(info)) {
        ++n_stores;
    } else {
        ++n_loads;
    }
}

static int boundary_index(uint64_t vaddr) {
    for (int i = 0; i < n_boundaries; ++i) {
        if (boundaries[i] == vaddr) {
            return i;
        }
    }
    return -1;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0) {
        return;
    }
    struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
    uint64_t start = qemu_plugin_tb_vaddr(tb);
    uint64_t end = qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last);
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS,
                                         pack_span(start, end));
    for (size_t i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        int b = n_boundaries ? boundary_index(qemu_plugin_insn_vaddr(insn)) : -1;
        if (b >= 0) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_boundary, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)(intptr_t)b);
        } else {
            qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &n_insns, 1);
        }
        qemu_plugin_register_vcpu_mem_cb(insn, on_access, QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_RW, NULL);
    }
}

static void on_plugin_exit(qemu_plugin_id_t id, void *udata) {
    (void)id;
    (void)udata;
    char line[128];
    snprintf(line, sizeof line, "T %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", n_insns,
             n_loads, n_stores, n_taken);
    emit(line);
    if (out) {
        fclose(out);
        out = NULL;
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv) {
    (void)info;
    const char *out_path = NULL;
    for (int i = 0; i < argc; ++i) {
        const char *arg = argv[i];
        if (strncmp(arg, "boundary=", 9) == 0) {
            char *end = NULL;
            unsigned long long addr = strtoull(arg + 9, &end, 0);
            if (end == arg + 9 || *end != '\0' || n_boundaries >= MAX_BOUNDARIES) {
                fprintf(stderr, "aidge_pmu: bad or too many boundary arguments: %s\n", arg);
                return -1;
            }
            boundaries[n_boundaries++] = (uint64_t)addr & ~1ull; /* drop the Thumb bit */
        } else if (strncmp(arg, "out=", 4) == 0) {
            out_path = arg + 4;
        } else {
            fprintf(stderr, "aidge_pmu: unknown argument %s\n", arg);
            return -1;
        }
    }
    if (out_path) {
        out = fopen(out_path, "w");
        if (!out) {
            fprintf(stderr, "aidge_pmu: cannot write %s\n", out_path);
            return -1;
        }
    }
    emit("# aidge_pmu 1 instructions loads stores branches_taken\n");
    for (int i = 0; i < n_boundaries; ++i) {
        char line[64];
        snprintf(line, sizeof line, "B %d 0x%" PRIx64 "\n", i, boundaries[i]);
        emit(line);
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
    return 0;
}
