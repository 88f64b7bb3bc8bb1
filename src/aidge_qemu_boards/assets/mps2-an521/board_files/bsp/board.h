/* board.h -- Arm MPS2 AN521 (two Cortex-M33 in an SSE-200) as emulated by QEMU 7.2.
 * The same header serves both cores' programs: the Makefile builds core 1's with
 * -DAIDGE_CORE=1, which moves its console to UART1 (QEMU serial1). */
#ifndef AIDGE_QEMU_BOARD_H
#define AIDGE_QEMU_BOARD_H

#define BOARD_NAME "mps2-an521"
#define BOARD_CPU_HZ 20000000U       /* QEMU sysclk = SysTick clock, both cores */
#define BOARD_NUM_IRQS 96
#define BOARD_UART_CMSDK 1
#define BOARD_UART_CLOCK_HZ 20000000U
#define BOARD_UART_HANDLE huart0
/* the digest of what stdio printed (syscalls.c): core 1 hands its own to core 0 */
#define BOARD_OUTPUT_DIGEST 1
#if defined(AIDGE_CORE) && AIDGE_CORE == 1
#define BOARD_UART_BASE_CORE1 0x50201000U /* CMSDK APB UART1 (Secure alias) = serial1 */
#define BOARD_UART_BASE BOARD_UART_BASE_CORE1
#else
#define BOARD_UART_BASE 0x50200000U  /* CMSDK APB UART0 (Secure alias) = serial0 */
#endif

/* SSE-200 system control (Secure): core 0 starts core 1 through these */
#define BOARD_SYSCTL_INITSVTOR1 0x50021114U
#define BOARD_SYSCTL_CPUWAIT 0x50021118U
#define BOARD_CORE1_VECTORS 0x10200000U /* ORIGIN(FLASH) of bsp/memory_core1.ld */
#define BOARD_SHARED_SRAM 0x30000000U   /* SSE-200 internal SRAM bank 0 (Secure alias) */

#endif
