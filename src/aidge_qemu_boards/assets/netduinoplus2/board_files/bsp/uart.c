/*
 * uart.c -- polled console UART (QEMU serial0) behind the HAL_UART_* API.
 *
 * Two peripheral models, chosen by board.h:
 *  - BOARD_UART_CMSDK: Arm CMSDK APB UART (MPS2/MPS3). DATA +0x00, STATE +0x04 (bit0 TX
 *    full, bit1 RX full), CTRL +0x08 (bit0 TXEN, bit1 RXEN), BAUDDIV +0x10 (>= 16).
 *    QEMU drops TX bytes while TXEN is clear and refuses RX bytes while RXEN is clear.
 *  - BOARD_UART_STM32: STM32F2/F4 USART. SR +0x00 (bit7 TXE, bit6 TC, bit5 RXNE),
 *    DR +0x04, BRR +0x08, CR1 +0x0C (bit13 UE, bit3 TE, bit2 RE). QEMU drops RX bytes
 *    while UE/RE are clear and does not model clock gating or pin muxing.
 * Bytes are sent raw (no \n -> \r\n translation): the firmware prints its own line ends.
 */
#include <stdint.h>

#include "aidge_qemu_hal.h"
#include "board.h"
#include "bsp_regs.h"

UART_HandleTypeDef BOARD_UART_HANDLE = {BOARD_UART_BASE, {115200U}};

#if defined(BOARD_UART_CMSDK)
#define UART_DATA(base) REG32((base) + 0x00U)
#define UART_STATE(base) REG32((base) + 0x04U)
#define UART_CTRL(base) REG32((base) + 0x08U)
#define UART_BAUDDIV(base) REG32((base) + 0x10U)
#define UART_STATE_TXFULL (1UL << 0)
#define UART_STATE_RXFULL (1UL << 1)
#define UART_CTRL_TXEN (1UL << 0)
#define UART_CTRL_RXEN (1UL << 1)

static void uart_hw_init(uintptr_t base, uint32_t baud)
{
    uint32_t div = BOARD_UART_CLOCK_HZ / baud;
    UART_BAUDDIV(base) = (div < 16U) ? 16U : div;
    UART_CTRL(base) = UART_CTRL_TXEN | UART_CTRL_RXEN;
}
static int uart_tx_ready(uintptr_t base) { return (UART_STATE(base) & UART_STATE_TXFULL) == 0U; }
static void uart_tx_put(uintptr_t base, uint8_t byte) { UART_DATA(base) = byte; }
static int uart_tx_idle(uintptr_t base) { return uart_tx_ready(base); }
static int uart_rx_ready(uintptr_t base) { return (UART_STATE(base) & UART_STATE_RXFULL) != 0U; }
static uint8_t uart_rx_get(uintptr_t base) { return (uint8_t)UART_DATA(base); }

#elif defined(BOARD_UART_STM32)
#define USART_SR(base) REG32((base) + 0x00U)
#define USART_DR(base) REG32((base) + 0x04U)
#define USART_BRR(base) REG32((base) + 0x08U)
#define USART_CR1(base) REG32((base) + 0x0CU)
#define USART_SR_TXE (1UL << 7)
#define USART_SR_TC (1UL << 6)
#define USART_SR_RXNE (1UL << 5)
#define USART_CR1_UE (1UL << 13)
#define USART_CR1_TE (1UL << 3)
#define USART_CR1_RE (1UL << 2)

static void uart_hw_init(uintptr_t base, uint32_t baud)
{
    /* Oversampling by 16: BRR = f_pclk / baud, mantissa and fraction packed as in RM0090. */
    USART_BRR(base) = (BOARD_UART_CLOCK_HZ + baud / 2U) / baud;
    USART_CR1(base) = USART_CR1_UE | USART_CR1_TE | USART_CR1_RE;
}
static int uart_tx_ready(uintptr_t base) { return (USART_SR(base) & USART_SR_TXE) != 0U; }
static void uart_tx_put(uintptr_t base, uint8_t byte) { USART_DR(base) = byte; }
static int uart_tx_idle(uintptr_t base) { return (USART_SR(base) & USART_SR_TC) != 0U; }
static int uart_rx_ready(uintptr_t base) { return (USART_SR(base) & USART_SR_RXNE) != 0U; }
static uint8_t uart_rx_get(uintptr_t base) { return (uint8_t)USART_DR(base); }

#else
#error "board.h must define BOARD_UART_CMSDK or BOARD_UART_STM32"
#endif

HAL_StatusTypeDef HAL_UART_Init(UART_HandleTypeDef *huart)
{
    if (huart == NULL || huart->Instance == 0U || huart->Init.BaudRate == 0U) {
        return HAL_ERROR;
    }
    uart_hw_init(huart->Instance, huart->Init.BaudRate);
    return HAL_OK;
}

static int timed_out(uint32_t start, uint32_t timeout)
{
    return timeout != HAL_MAX_DELAY && (HAL_GetTick() - start) >= timeout;
}

HAL_StatusTypeDef HAL_UART_Transmit(UART_HandleTypeDef *huart, const uint8_t *pData,
                                    uint16_t Size, uint32_t Timeout)
{
    if (huart == NULL || (pData == NULL && Size > 0U)) {
        return HAL_ERROR;
    }
    const uint32_t start = HAL_GetTick();
    for (uint16_t i = 0; i < Size; ++i) {
        while (!uart_tx_ready(huart->Instance)) {
            if (timed_out(start, Timeout)) {
                return HAL_TIMEOUT;
            }
        }
        uart_tx_put(huart->Instance, pData[i]);
    }
    return HAL_OK;
}

HAL_StatusTypeDef HAL_UART_Receive(UART_HandleTypeDef *huart, uint8_t *pData, uint16_t Size,
                                   uint32_t Timeout)
{
    if (huart == NULL || (pData == NULL && Size > 0U)) {
        return HAL_ERROR;
    }
    const uint32_t start = HAL_GetTick();
    for (uint16_t i = 0; i < Size; ++i) {
        while (!uart_rx_ready(huart->Instance)) {
            if (timed_out(start, Timeout)) {
                return HAL_TIMEOUT;
            }
        }
        pData[i] = uart_rx_get(huart->Instance);
    }
    return HAL_OK;
}

/* Non-blocking: 1 and the byte when one is waiting, else 0. Used by _read(). */
int aidge_qemu_uart_try_getc(uint8_t *byte)
{
    if (!uart_rx_ready(BOARD_UART_HANDLE.Instance)) {
        return 0;
    }
    *byte = uart_rx_get(BOARD_UART_HANDLE.Instance);
    return 1;
}

void aidge_qemu_uart_flush(void)
{
    while (!uart_tx_idle(BOARD_UART_HANDLE.Instance)) {
    }
}

/* Interrupt-safe string output for fault reports (no stdio). */
void aidge_qemu_uart_puts(const char *text)
{
    while (*text != '\0') {
        while (!uart_tx_ready(BOARD_UART_HANDLE.Instance)) {
        }
        uart_tx_put(BOARD_UART_HANDLE.Instance, (uint8_t)*text++);
    }
}
