/* Start-up code of the test firmware: vector table, Reset_Handler, semihosting exit.
 *
 * The image is loaded by a debugger (GDB remote protocol) into a halted QEMU, so the
 * Reset_Handler must point VTOR at our table itself and must not rely on a boot ROM.
 */
#include <stdint.h>

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern int main(void);
void Reset_Handler(void);
void Default_Handler(void);
void semihosting_exit(int code);

#define SCB_VTOR (*(volatile uint32_t *)0xE000ED08u)
#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)

__attribute__((section(".isr_vector"), used)) const void *const g_vectors[16] = {
    &_estack,        Reset_Handler,   Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, 0,
    0,               0,               0,               Default_Handler,
    Default_Handler, 0,               Default_Handler, Default_Handler,
};

void semihosting_exit(int code) {
    /* SYS_EXIT (0x18) with ADP_Stopped_ApplicationExit (0x20026) -> QEMU exit status 0,
     * ADP_Stopped_RunTimeErrorUnknown (0x20023) -> exit status 1. */
    register uint32_t r0 __asm__("r0") = 0x18u;
    register uint32_t r1 __asm__("r1") = code == 0 ? 0x20026u : 0x20023u;
    __asm__ volatile("bkpt 0xAB" : : "r"(r0), "r"(r1) : "memory");
    for (;;) {
    }
}

void Default_Handler(void) {
    semihosting_exit(1);
}

void Reset_Handler(void) {
    SCB_CPACR |= 0xFu << 20; /* FPU on (the M4F build uses hard float) */
    SCB_VTOR = (uint32_t)(uintptr_t)g_vectors;
    __asm__ volatile("dsb\n isb" ::: "memory");
    for (uint32_t *src = &_sidata, *dst = &_sdata; dst < &_edata;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = &_sbss; dst < &_ebss;) {
        *dst++ = 0u;
    }
    semihosting_exit(main());
}
