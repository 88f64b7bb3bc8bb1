/* Polled UART driver: CMSDK APB UART (mps2) or STM32F4 USART (netduinoplus2). */
#include "uart.h"

#include "board.h"

#define REG(off) (*(volatile uint32_t *)(UART_BASE + (off)))

#if defined(UART_CMSDK)
/* DATA +0x00, STATE +0x04 (bit0 TX full, bit1 RX full), CTRL +0x08 (bit0 TXEN, bit1 RXEN:
 * QEMU drops bytes while they are clear), BAUDDIV +0x10 (>= 16). */
void uart_init(void) {
    REG(0x10) = 16u;
    REG(0x08) = 0x3u;
}
void uart_putc(char c) {
    while (REG(0x04) & 0x1u) {
    }
    REG(0x00) = (uint32_t)(unsigned char)c;
}
int uart_getc(void) {
    while (!(REG(0x04) & 0x2u)) {
    }
    return (int)(REG(0x00) & 0xFFu);
}
#elif defined(UART_STM32)
/* SR +0x00 (bit5 RXNE, bit7 TXE), DR +0x04, BRR +0x08, CR1 +0x0C (UE | TE | RE). */
void uart_init(void) {
    REG(0x08) = 0x16Du;
    REG(0x0C) = (1u << 13) | (1u << 3) | (1u << 2);
}
void uart_putc(char c) {
    while (!(REG(0x00) & (1u << 7))) {
    }
    REG(0x04) = (uint32_t)(unsigned char)c;
}
int uart_getc(void) {
    while (!(REG(0x00) & (1u << 5))) {
    }
    return (int)(REG(0x04) & 0xFFu);
}
#endif

void uart_puts(const char *s) {
    while (*s) {
        uart_putc(*s++);
    }
}

void uart_put_hex(uint32_t value) {
    static const char digits[] = "0123456789abcdef";
    uart_puts("0x");
    for (int shift = 28; shift >= 0; shift -= 4) {
        uart_putc(digits[(value >> shift) & 0xFu]);
    }
}

void uart_put_dec(uint32_t value) {
    char buf[11];
    int i = 0;
    do {
        buf[i++] = (char)('0' + value % 10u);
        value /= 10u;
    } while (value != 0u);
    while (i > 0) {
        uart_putc(buf[--i]);
    }
}
