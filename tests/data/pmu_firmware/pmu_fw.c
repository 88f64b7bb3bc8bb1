/* Firmware for the emulated-PMU tests (mps2-an386, Cortex-M4): loops of known length.
 *
 * run() calls pmu_mark() (the plugin's boundary), kernel(1000), pmu_mark(), kernel(3000),
 * pmu_mark(), kernel_io(1000), pmu_mark(), all in hand-written assembly so every executed
 * instruction is known:
 *   kernel(n): n x {ldr, str, subs, bne} then bx lr -> 4n+1 instructions, n loads,
 *              n stores, n-1 taken bne + the return.
 *   kernel_io(n): the same loop whose ldr reads a device register (UART0's STATE) instead
 *              of RAM: under -icount QEMU stops the block at that read and replays it alone
 *              each time round, which must not change a single count.
 * Between two marks (one kernel(n) call) the plugin must therefore count exactly
 *   instructions 4n + 6  (mark's bx lr, movw, ldr literal, bl, 4n+1 in kernel, bl mark)
 *   loads        n + 1   (the literal-pool ldr of buf's address)
 *   stores       n
 *   taken        n + 3   (return from mark, bl kernel, n-1 loop-backs, return, bl mark)
 * It ends with a semihosting exit (QEMU needs -semihosting-config enable=on,target=native).
 */
#include <stdint.h>

extern uint32_t _estack;
void Reset_Handler(void);
void Default_Handler(void);
void pmu_mark(void);
void run(void);

__attribute__((section(".isr_vector"), used)) const void *const g_vectors[16] = {
    &_estack,        Reset_Handler,   Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, 0,
    0,               0,               0,               Default_Handler,
    Default_Handler, 0,               Default_Handler, Default_Handler,
};

volatile uint32_t g_buf[2];

__asm__(
    ".syntax unified\n"
    ".thumb\n"
    ".text\n"
    ".global pmu_mark\n"
    ".type pmu_mark, %function\n"
    ".thumb_func\n"
    "pmu_mark:\n"
    "    bx lr\n"
    ".global kernel\n"
    ".type kernel, %function\n"
    ".thumb_func\n"
    "kernel:\n"
    "1:  ldr r2, [r1]\n"
    "    str r2, [r1, #4]\n"
    "    subs r0, r0, #1\n"
    "    bne 1b\n"
    "    bx lr\n"
    ".global kernel_io\n"
    ".type kernel_io, %function\n"
    ".thumb_func\n"
    "kernel_io:\n"
    "1:  ldr r2, [r3]\n"
    "    str r2, [r1, #4]\n"
    "    subs r0, r0, #1\n"
    "    bne 1b\n"
    "    bx lr\n"
    ".global run\n"
    ".type run, %function\n"
    ".thumb_func\n"
    "run:\n"
    "    push {r4, lr}\n"
    "    bl pmu_mark\n"
    "    movw r0, #1000\n"
    "    ldr r1, =g_buf\n"
    "    bl kernel\n"
    "    bl pmu_mark\n"
    "    movw r0, #3000\n"
    "    ldr r1, =g_buf\n"
    "    bl kernel\n"
    "    bl pmu_mark\n"
    "    movw r0, #1000\n"
    "    ldr r1, =g_buf\n"
    "    ldr r3, =0x40004004\n" /* UART0 STATE (CMSDK APB UART on mps2-an386) */
    "    bl kernel_io\n"
    "    bl pmu_mark\n"
    "    pop {r4, pc}\n"
    ".ltorg\n");

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
    run();
    semihosting_exit(0);
}
