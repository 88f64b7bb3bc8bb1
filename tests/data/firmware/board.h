/* Board selection for the aidge-deploy test firmware.
 *
 * Exactly one of BOARD_MPS2_AN386 / BOARD_NETDUINOPLUS2 is defined on the command line.
 * The values come from QEMU 7.2's memory maps (info mtree -f), see
 * /work/shared/reference/emulation.md section 2.
 */
#ifndef TESTFW_BOARD_H
#define TESTFW_BOARD_H

#if defined(BOARD_MPS2_AN386)
#define UART_CMSDK 1
#define UART_BASE 0x40004000u /* CMSDK APB UART0 = QEMU serial0 */
#elif defined(BOARD_NETDUINOPLUS2)
#define UART_STM32 1
#define UART_BASE 0x40011000u /* STM32F405 USART1 = QEMU serial0 */
#else
#error "define BOARD_MPS2_AN386 or BOARD_NETDUINOPLUS2"
#endif

#endif
