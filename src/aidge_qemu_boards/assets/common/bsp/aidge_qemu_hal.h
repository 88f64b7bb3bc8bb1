/*
 * aidge_qemu_hal.h -- the slice of the STM32 HAL API the Aidge Cortex-M firmwares use,
 * implemented for QEMU-emulated boards (each board's <hal_board>xx_hal.h includes this).
 *
 * Used by the generated code: HAL_GetTick() (1 ms SysTick tick), UART_HandleTypeDef,
 * HAL_UART_Receive/Transmit, HAL_OK, HAL_MAX_DELAY, SystemCoreClock, and the CoreDebug/DWT
 * cycle counter. QEMU does not implement the DWT (DEMCR/DWT_CTRL/CYCCNT read as zero), so
 * DWT->CYCCNT here is a C++ proxy returning the low 32 bits of a 64-bit counter derived
 * from SysTick (ms ticks * reload + elapsed counts). Under `-icount shift=N,align=off,
 * sleep=off` that counter advances by cpu_hz * 2^N / 1e9 per emulated instruction: it is
 * an emulated instruction count, not a cycle count.
 */
#ifndef AIDGE_QEMU_HAL_H
#define AIDGE_QEMU_HAL_H

#include <stddef.h>
#include <stdint.h>

#include "board.h"
#include "cmsis_compiler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    HAL_OK = 0x00U,
    HAL_ERROR = 0x01U,
    HAL_BUSY = 0x02U,
    HAL_TIMEOUT = 0x03U
} HAL_StatusTypeDef;

#define HAL_MAX_DELAY 0xFFFFFFFFU

typedef struct {
    uint32_t BaudRate;
} UART_InitTypeDef;

typedef struct {
    uintptr_t Instance; /* peripheral base address */
    UART_InitTypeDef Init;
} UART_HandleTypeDef;

/* The console UART handle, named as the hardware target's `uart_handle`. */
extern UART_HandleTypeDef BOARD_UART_HANDLE;

/* Emulated core clock (Hz): the SysTick clock, and the base of the "us" conversions. */
extern uint32_t SystemCoreClock;

HAL_StatusTypeDef HAL_Init(void);
uint32_t HAL_GetTick(void);
void HAL_Delay(uint32_t delay_ms);
uint32_t HAL_RCC_GetHCLKFreq(void);

HAL_StatusTypeDef HAL_UART_Init(UART_HandleTypeDef *huart);
HAL_StatusTypeDef HAL_UART_Transmit(UART_HandleTypeDef *huart, const uint8_t *pData,
                                    uint16_t Size, uint32_t Timeout);
HAL_StatusTypeDef HAL_UART_Receive(UART_HandleTypeDef *huart, uint8_t *pData, uint16_t Size,
                                   uint32_t Timeout);

/* 64-bit SysTick-derived counter (see the header comment). */
uint64_t aidge_qemu_cycles(void);
/* The same counter, read by the benchmark entry right before and right after each timed
 * forward. Never inlined: the emulated PMU snapshots its counters at this function's
 * address, so its figures bracket exactly what the printed cycles bracket. */
uint64_t aidge_qemu_sample_cycles(void);
/* Power-gate edges around the measured window of the power variant. On the emulated
 * boards the emulated-PMU plugin snapshots its counters at these two functions; a board
 * with a real monitor drives its gate GPIO here. Never inlined: their addresses are the
 * gate. */
void aidge_power_gate_open(void);
void aidge_power_gate_close(void);
/* Wait until the UART has sent everything queued. */
void aidge_qemu_uart_flush(void);
/* Wait for the UART to drain, then end QEMU through semihosting SYS_EXIT. */
__NO_RETURN void aidge_qemu_exit(int status);

#ifdef __cplusplus
}
#endif

/* ---- CoreDebug / DWT ---- */
#define CoreDebug_DEMCR_TRCENA_Msk (1UL << 24)
#define DWT_CTRL_CYCCNTENA_Msk (1UL)

#ifdef __cplusplus
/* Reads give the SysTick-derived count since the last write (writes set the origin). */
struct AidgeQemuCycleCounter {
    uint64_t origin = 0;

    operator uint32_t() const { return (uint32_t)(aidge_qemu_cycles() - origin); }

    AidgeQemuCycleCounter &operator=(uint32_t value)
    {
        origin = aidge_qemu_cycles() - (uint64_t)value;
        return *this;
    }
};

struct AidgeQemuDWT_Type {
    uint32_t CTRL = 0; /* kept for source compatibility; the counter always runs */
    AidgeQemuCycleCounter CYCCNT;
};

struct AidgeQemuCoreDebug_Type {
    uint32_t DEMCR = 0;
};

inline AidgeQemuDWT_Type aidge_qemu_dwt;
inline AidgeQemuCoreDebug_Type aidge_qemu_coredebug;

#define DWT (&aidge_qemu_dwt)
#define CoreDebug (&aidge_qemu_coredebug)
#endif /* __cplusplus */

#endif /* AIDGE_QEMU_HAL_H */
