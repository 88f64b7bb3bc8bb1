/* board.h -- Arm MPS2 AN500 (Cortex-M7) as emulated by QEMU 7.2. */
#ifndef AIDGE_QEMU_BOARD_H
#define AIDGE_QEMU_BOARD_H

#define BOARD_NAME "mps2-an500"
#define BOARD_CPU_HZ 25000000U       /* QEMU cpuclk = SysTick clock */
#define BOARD_NUM_IRQS 48
#define BOARD_UART_CMSDK 1
#define BOARD_UART_BASE 0x40004000U  /* CMSDK APB UART0 = QEMU serial0 */
#define BOARD_UART_CLOCK_HZ 25000000U
#define BOARD_UART_HANDLE huart0

#endif
