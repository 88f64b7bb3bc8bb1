/* board.h -- Arm MPS3 AN547 (Corstone-300, Cortex-M55) as emulated by QEMU 7.2. */
#ifndef AIDGE_QEMU_BOARD_H
#define AIDGE_QEMU_BOARD_H

#define BOARD_NAME "mps3-an547"
#define BOARD_CPU_HZ 32000000U       /* QEMU cpuclk = SysTick clock (SYST_CALIB: NOREF) */
#define BOARD_NUM_IRQS 96
#define BOARD_UART_CMSDK 1
#define BOARD_UART_BASE 0x49303000U  /* CMSDK APB UART0 (non-secure alias) = serial0 */
#define BOARD_UART_CLOCK_HZ 25000000U /* AN547 peripheral clock */
#define BOARD_UART_HANDLE huart0

#endif
