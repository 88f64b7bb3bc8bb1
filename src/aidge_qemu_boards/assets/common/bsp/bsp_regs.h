/*
 * bsp_regs.h -- System Control Space registers the BSP touches (Armv7-M / Armv8-M).
 */
#ifndef AIDGE_QEMU_BSP_REGS_H
#define AIDGE_QEMU_BSP_REGS_H

#include <stdint.h>

#define REG32(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

#define SYST_CSR REG32(0xE000E010UL)
#define SYST_RVR REG32(0xE000E014UL)
#define SYST_CVR REG32(0xE000E018UL)
#define SYST_CSR_ENABLE (1UL << 0)
#define SYST_CSR_TICKINT (1UL << 1)
#define SYST_CSR_CLKSOURCE (1UL << 2)

#define SCB_ICSR REG32(0xE000ED04UL)
#define SCB_ICSR_PENDSTSET (1UL << 26)
#define SCB_ICSR_PENDSTCLR (1UL << 25)
#define SCB_VTOR REG32(0xE000ED08UL)
#define SCB_CPACR REG32(0xE000ED88UL)
#define SCB_CFSR REG32(0xE000ED28UL)
#define SCB_HFSR REG32(0xE000ED2CUL)

#endif /* AIDGE_QEMU_BSP_REGS_H */
