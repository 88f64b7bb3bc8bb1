/* board.h -- Arm MPS2 AN505 (Cortex-M33, SSE-200 IoT kit) as emulated by QEMU 7.2. */
#ifndef AIDGE_QEMU_BOARD_H
#define AIDGE_QEMU_BOARD_H

#define BOARD_NAME "mps2-an505"
#define BOARD_CPU_HZ 20000000U       /* QEMU sysclk = SysTick clock */
#define BOARD_NUM_IRQS 96
#define BOARD_UART_CMSDK 1
#define BOARD_UART_BASE 0x50200000U  /* CMSDK APB UART0 (Secure alias) = serial0 */
#define BOARD_UART_CLOCK_HZ 20000000U /* AN505 peripheral clock = sysclk */
#define BOARD_UART_HANDLE huart0

#endif
