/*
 * system.c -- clock, tick and cycle counter of the QEMU board BSP.
 *
 * SysTick runs from the core clock (CLKSOURCE=1: the MPS3 and STM32 machines have no
 * usable reference clock) with a 1 ms period; its interrupt increments uwTick, which is
 * HAL_GetTick(). aidge_qemu_cycles() extends it into a 64-bit count of SysTick clocks,
 * which is what DWT->CYCCNT returns (QEMU has no DWT).
 */
#include <stdint.h>

#include "aidge_qemu_hal.h"
#include "board.h"
#include "bsp_regs.h"

uint32_t SystemCoreClock = BOARD_CPU_HZ;

static volatile uint32_t uwTick;
static volatile int s_tick_started;

#define SYSTICK_RELOAD ((BOARD_CPU_HZ / 1000U) - 1U)

void SysTick_Handler(void) { uwTick = uwTick + 1U; }

static void systick_start(void)
{
    SYST_CSR = 0U;
    SYST_RVR = SYSTICK_RELOAD;
    SYST_CVR = 0U;
    /*
     * Enable without the interrupt first: QEMU loads RVR into the counter on the first
     * tick after enable, and an interrupt taken at that reload would count a millisecond
     * that never elapsed. Once the counter is running, clear any stale pending state and
     * only then enable the interrupt with the tick count at zero.
     */
    SYST_CSR = SYST_CSR_CLKSOURCE | SYST_CSR_ENABLE;
    while (SYST_CVR == 0U) {
    }
    (void)SYST_CSR; /* reading clears COUNTFLAG */
    SCB_ICSR = SCB_ICSR_PENDSTCLR;
    uwTick = 0U;
    SYST_CSR = SYST_CSR_CLKSOURCE | SYST_CSR_TICKINT | SYST_CSR_ENABLE;
    s_tick_started = 1;
}

HAL_StatusTypeDef HAL_Init(void)
{
    if (!s_tick_started) {
        systick_start();
    }
    return HAL_OK;
}

uint32_t HAL_GetTick(void) { return uwTick; }

void HAL_Delay(uint32_t delay_ms)
{
    const uint32_t start = HAL_GetTick();
    while ((HAL_GetTick() - start) < delay_ms) {
    }
}

uint32_t HAL_RCC_GetHCLKFreq(void) { return SystemCoreClock; }

/* The count itself, shared by the two read functions below: each keeps an address of its
 * own (the emulated PMU tells layer reads from per-inference reads by it). */
static inline uint64_t cycles_now(void)
{
    const uint32_t primask = __get_PRIMASK();
    __disable_irq();
    uint32_t ticks = uwTick;
    uint32_t current = SYST_CVR;
    /*
     * With interrupts masked a wrap can be pending but not yet counted. Whether it
     * happened before or after the CVR read, re-reading CVR gives a post-wrap value that
     * matches ticks + 1, so the result stays monotonic.
     */
    if (SCB_ICSR & SCB_ICSR_PENDSTSET) {
        current = SYST_CVR;
        ticks += 1U;
    }
    __set_PRIMASK(primask);
    return (uint64_t)ticks * (SYSTICK_RELOAD + 1U) + (uint64_t)(SYSTICK_RELOAD - current);
}

/* noipa: never inlined, and never folded into one function with the other (identical
 * bodies: -fipa-icf would give both one address) */
__attribute__((noipa)) uint64_t aidge_qemu_cycles(void) { return cycles_now(); }

__attribute__((noipa)) uint64_t aidge_qemu_sample_cycles(void) { return cycles_now(); }

/* ---- power gate ---- */

/* Level of the gate, for a debugger; the edges are the calls themselves (see the header). */
volatile uint32_t aidge_power_gate_level;

__attribute__((noinline)) void aidge_power_gate_open(void)
{
    aidge_power_gate_level = 1U;
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void aidge_power_gate_close(void)
{
    aidge_power_gate_level = 0U;
    __asm__ volatile("" ::: "memory");
}

/* ---- semihosting exit and fault reporting ---- */

#define SEMIHOSTING_SYS_EXIT 0x18U
#define ADP_STOPPED_APPLICATION_EXIT 0x20026U /* QEMU exit status 0 */
#define ADP_STOPPED_RUNTIME_ERROR 0x20023U    /* QEMU exit status 1 */

void aidge_qemu_uart_flush(void);
void aidge_qemu_uart_puts(const char *text);

__NO_RETURN void aidge_qemu_exit(int status)
{
    aidge_qemu_uart_flush();
    register uint32_t op __asm__("r0") = SEMIHOSTING_SYS_EXIT;
    register uint32_t reason __asm__("r1") =
        (status == 0) ? ADP_STOPPED_APPLICATION_EXIT : ADP_STOPPED_RUNTIME_ERROR;
    __asm__ volatile("bkpt 0xab" : "+r"(op) : "r"(reason) : "memory");
    /* Only reached without a semihosting host (never the case under QEMU here). */
    __disable_irq();
    for (;;) {
        __WFI();
    }
}

static void put_hex(const char *label, uint32_t value)
{
    char text[24];
    static const char digits[] = "0123456789abcdef";
    unsigned pos = 0;
    while (*label != '\0' && pos < 10U) {
        text[pos++] = *label++;
    }
    text[pos++] = '0';
    text[pos++] = 'x';
    for (int shift = 28; shift >= 0; shift -= 4) {
        text[pos++] = digits[(value >> shift) & 0xFU];
    }
    text[pos] = '\0';
    aidge_qemu_uart_puts(text);
}

/* Called by HardFault_Handler with the stacked exception frame (r0-r3, r12, lr, pc, xpsr). */
__NO_RETURN void aidge_qemu_fault_report(const uint32_t *frame)
{
    aidge_qemu_uart_puts("\r\n[FATAL] HardFault");
    put_hex(" pc=", frame[6]);
    put_hex(" lr=", frame[5]);
    put_hex(" cfsr=", SCB_CFSR);
    put_hex(" hfsr=", SCB_HFSR);
    aidge_qemu_uart_puts("\r\n");
    aidge_qemu_exit(1);
}
