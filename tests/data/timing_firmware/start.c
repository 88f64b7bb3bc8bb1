/* Start-up of the timing-model microbenchmarks (tests/test_timing_model.py).
 *
 * Reset_Handler enables the FPU (and MVE on the Cortex-M55: CP10/CP11), prepares the data
 * the benchmarks read (g_buf) and calls run() (bench_m4.S or bench_m55.S), which brackets
 * each benchmark between two calls of mark(), the plugin's boundary; then a semihosting
 * exit ends QEMU (-semihosting-config enable=on,target=native).
 */
#include <stdint.h>

extern uint32_t _estack;
void Reset_Handler(void);
void Default_Handler(void);
void run(void);

__attribute__((section(".isr_vector"), used)) const void *const g_vectors[16] = {
    &_estack,        Reset_Handler,   Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, 0,
    0,               0,               0,               Default_Handler,
    Default_Handler, 0,               Default_Handler, Default_Handler,
};

/* RAM the benchmarks load from and store to; g_const is read-only data (in flash on the
 * boards whose code runs from flash). */
volatile uint32_t g_buf[32] __attribute__((aligned(16)));
const uint32_t g_const[4] = {1u, 2u, 3u, 4u};

static void semihosting_exit(int code) {
    register uint32_t r0 __asm__("r0") = 0x18u; /* SYS_EXIT */
    register uint32_t r1 __asm__("r1") = code == 0 ? 0x20026u : 0x20023u;
    __asm__ volatile("bkpt 0xAB" : : "r"(r0), "r"(r1) : "memory");
    for (;;) {
    }
}

void Default_Handler(void) {
    semihosting_exit(1);
}

void Reset_Handler(void) {
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10, CP11 full access */
    __asm__ volatile("dsb\n isb" ::: "memory");
    for (unsigned i = 0; i < 32; ++i) {
        g_buf[i] = 0x3F800000u; /* 1.0f */
    }
    g_buf[3] = (uint32_t)(uintptr_t)&g_buf[0]; /* a pointer, for the dependent load */
    run();
    semihosting_exit(0);
}
