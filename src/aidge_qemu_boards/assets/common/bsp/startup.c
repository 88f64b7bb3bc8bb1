/*
 * startup.c -- vector table and reset handler of the QEMU board BSP.
 *
 * Reset_Handler: enable CP10/CP11 (FPU, and MVE on the Cortex-M55), point VTOR at this
 * table (needed when the image is loaded by a debugger rather than booted from address 0),
 * copy .data and zero .bss, start the tick and the UART, run the static constructors, call
 * main() and exit() with its status (the semihosting exit ends QEMU).
 */
#include <stdint.h>
#include <stdlib.h>

#include "aidge_qemu_hal.h"
#include "board.h"
#include "bsp_regs.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern void __libc_init_array(void);
extern int main(void);

void Reset_Handler(void);
void Default_Handler(void);
void HardFault_Handler(void);
void SysTick_Handler(void);
void NMI_Handler(void) __attribute__((weak, alias("Default_Handler")));
void MemManage_Handler(void) __attribute__((weak, alias("Default_Handler")));
void BusFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UsageFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SecureFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SVC_Handler(void) __attribute__((weak, alias("Default_Handler")));
void DebugMon_Handler(void) __attribute__((weak, alias("Default_Handler")));
void PendSV_Handler(void) __attribute__((weak, alias("Default_Handler")));

typedef void (*vector_t)(void);

__attribute__((section(".isr_vector"), used)) const vector_t g_vectors[16 + BOARD_NUM_IRQS] = {
    [0] = (vector_t)(uintptr_t)&_estack,
    [1] = Reset_Handler,
    [2] = NMI_Handler,
    [3] = HardFault_Handler,
    [4] = MemManage_Handler,
    [5] = BusFault_Handler,
    [6] = UsageFault_Handler,
    [7] = SecureFault_Handler, /* reserved on Armv7-M */
    [11] = SVC_Handler,
    [12] = DebugMon_Handler,
    [14] = PendSV_Handler,
    [15] = SysTick_Handler,
    [16 ... 16 + BOARD_NUM_IRQS - 1] = Default_Handler,
};

/* No crti/crtn are linked (-nostartfiles): __libc_init_array still calls these. */
void _init(void) {}
void _fini(void) {}

void Reset_Handler(void)
{
    SCB_CPACR |= (0xFUL << 20); /* CP10 + CP11 full access */
    __DSB();
    __ISB();
    SCB_VTOR = (uint32_t)(uintptr_t)g_vectors;
    __DSB();

    uint32_t *src = &_sidata;
    for (uint32_t *dst = &_sdata; dst < &_edata;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = &_sbss; dst < &_ebss;) {
        *dst++ = 0U;
    }

    (void)HAL_Init();
    (void)HAL_UART_Init(&BOARD_UART_HANDLE);
    __libc_init_array();
    exit(main());
}

/* An unexpected exception: report its number and stop QEMU with a failure status. */
void Default_Handler(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    static const char digits[] = "0123456789";
    char text[] = "\r\n[FATAL] unexpected exception 000\r\n";
    text[31] = digits[(ipsr / 100U) % 10U];
    text[32] = digits[(ipsr / 10U) % 10U];
    text[33] = digits[ipsr % 10U];
    extern void aidge_qemu_uart_puts(const char *text);
    aidge_qemu_uart_puts(text);
    aidge_qemu_exit(1);
}

/* Pass the stacked frame (MSP or PSP, from EXC_RETURN bit 2) to the C reporter. */
__attribute__((naked)) void HardFault_Handler(void)
{
    __asm__ volatile("tst lr, #4\n"
                     "ite eq\n"
                     "mrseq r0, msp\n"
                     "mrsne r0, psp\n"
                     "b aidge_qemu_fault_report\n");
}
