/* The test program: prints a few lines over the UART, then "END DEMO", then exits
 * through semihosting. Variants (-D):
 *   VARIANT_HANG  prints, then spins forever without END (capture must time out)
 *   VARIANT_ECHO  answers every received line with "ECHO <line>" until "quit"
 *   VARIANT_FAIL  prints, then exits with semihosting status 1 without END
 */
#include <stdint.h>

#include "uart.h"

extern const uint32_t g_blob[];
extern const uint32_t g_blob_size;
static volatile uint32_t g_counter = 7u; /* lives in .data: proves the .data copy */

static uint32_t blob_checksum(void) {
    uint32_t acc = 2166136261u;
    for (uint32_t i = 0; i < g_blob_size; ++i) {
        acc = (acc ^ g_blob[i]) * 16777619u;
    }
    return acc;
}

#if defined(VARIANT_ECHO)
static int read_line(char *buf, int cap) {
    int n = 0;
    for (;;) {
        int c = uart_getc();
        if (c == '\r') {
            continue;
        }
        if (c == '\n') {
            buf[n] = '\0';
            return n;
        }
        if (n < cap - 1) {
            buf[n++] = (char)c;
        }
    }
}

static int streq(const char *a, const char *b) {
    while (*a && *a == *b) {
        ++a;
        ++b;
    }
    return *a == *b;
}
#endif

int main(void) {
    uart_init();
    uart_puts("BOOT aidge-deploy test firmware\r\n");
    uart_puts("DATA counter=");
    uart_put_dec(g_counter);
    uart_puts("\r\n");
    uart_puts("CHECKSUM ");
    uart_put_hex(blob_checksum());
    /* one line ends "\n\r", as some vendor BSPs do, to exercise the host's line splitter */
    uart_puts("\n\r");
    for (uint32_t i = 0; i < 20u; ++i) {
        uart_puts("LINE ");
        uart_put_dec(i);
        uart_puts("\r\n");
    }
#if defined(VARIANT_HANG)
    uart_puts("HANGING\r\n");
    for (;;) {
        ++g_counter;
    }
#elif defined(VARIANT_FAIL)
    uart_puts("FAILING\r\n");
    return 1;
#elif defined(VARIANT_ECHO)
    uart_puts("READY\r\n");
    char line[128];
    for (;;) {
        read_line(line, (int)sizeof line);
        if (streq(line, "quit")) {
            break;
        }
        uart_puts("ECHO ");
        uart_puts(line);
        uart_puts("\r\n");
    }
#endif
    uart_puts("********************** END DEMO *********************\r\n");
    return 0;
}
