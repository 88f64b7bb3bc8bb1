/* board.h -- Netduino Plus 2 (STM32F405RG, Cortex-M4F) as emulated by QEMU 7.2. */
#ifndef AIDGE_QEMU_BOARD_H
#define AIDGE_QEMU_BOARD_H

#define BOARD_NAME "netduinoplus2"
#define BOARD_CPU_HZ 168000000U      /* QEMU sysclk = SysTick clock */
#define BOARD_NUM_IRQS 82            /* STM32F405 vector table */
#define BOARD_UART_STM32 1
#define BOARD_UART_BASE 0x40011000U  /* USART1 = QEMU serial0 */
#define BOARD_UART_CLOCK_HZ 84000000U /* APB2 at 168 MHz / 2 */
#define BOARD_UART_HANDLE huart1

#endif
