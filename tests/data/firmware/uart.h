#ifndef TESTFW_UART_H
#define TESTFW_UART_H
#include <stdint.h>

void uart_init(void);
void uart_putc(char c);
int uart_getc(void);
void uart_puts(const char *s);
void uart_put_hex(uint32_t value);
void uart_put_dec(uint32_t value);

#endif
