/*
 * syscalls.c -- newlib(-nano) system calls: stdout/stderr go to the console UART,
 * stdin comes from it, the heap is bounded by the linker script, exit() ends QEMU.
 * Everything else fails with an errno, as there is no file system.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "aidge_qemu_hal.h"
#include "board.h"

#undef errno
extern int errno;

int aidge_qemu_uart_try_getc(uint8_t *byte);

#if defined(BOARD_OUTPUT_DIGEST)
/* FNV-1a of every byte stdio sent, for a dual-core board: core 1 hands its digest to core 0,
 * which compares it with its own (the same model on the same input prints the same). */
volatile uint32_t aidge_qemu_output_digest = 2166136261U;
#endif

int _write(int file, char *data, int len)
{
    if (file != 1 && file != 2) {
        errno = EBADF;
        return -1;
    }
    if (len <= 0) {
        return 0;
    }
    int sent = 0;
    while (sent < len) {
        /* HAL sizes are 16-bit. */
        int chunk = (len - sent > 0xFFFF) ? 0xFFFF : (len - sent);
        if (HAL_UART_Transmit(&BOARD_UART_HANDLE, (const uint8_t *)data + sent, (uint16_t)chunk,
                              HAL_MAX_DELAY) != HAL_OK) {
            errno = EIO;
            return sent > 0 ? sent : -1;
        }
        sent += chunk;
    }
#if defined(BOARD_OUTPUT_DIGEST)
    uint32_t digest = aidge_qemu_output_digest;
    for (int i = 0; i < len; ++i) {
        digest = (digest ^ (uint8_t)data[i]) * 16777619U;
    }
    aidge_qemu_output_digest = digest;
#endif
    return sent;
}

/* Blocks for the first byte, then returns what is already waiting, up to a newline. */
int _read(int file, char *data, int len)
{
    if (file != 0) {
        errno = EBADF;
        return -1;
    }
    if (len <= 0) {
        return 0;
    }
    uint8_t byte = 0;
    if (HAL_UART_Receive(&BOARD_UART_HANDLE, &byte, 1, HAL_MAX_DELAY) != HAL_OK) {
        errno = EIO;
        return -1;
    }
    int count = 0;
    data[count++] = (char)byte;
    while (count < len && byte != '\n' && aidge_qemu_uart_try_getc(&byte)) {
        data[count++] = (char)byte;
    }
    return count;
}

int _close(int file)
{
    (void)file;
    errno = EBADF;
    return -1;
}

int _open(const char *name, int flags, int mode)
{
    (void)name;
    (void)flags;
    (void)mode;
    errno = ENOSYS;
    return -1;
}

int _lseek(int file, int offset, int whence)
{
    (void)file;
    (void)offset;
    (void)whence;
    errno = ESPIPE;
    return -1;
}

/* A character device, so newlib line-buffers stdout (flushes at each '\n'). */
int _fstat(int file, struct stat *st)
{
    if (file < 0 || file > 2) {
        errno = EBADF;
        return -1;
    }
    st->st_mode = S_IFCHR;
    return 0;
}

int _isatty(int file) { return (file >= 0 && file <= 2) ? 1 : 0; }

int _getpid(void) { return 1; }

int _kill(int pid, int sig)
{
    (void)pid;
    (void)sig;
    errno = EINVAL;
    return -1;
}

/* Heap between the end of .bss (`end`) and `_heap_limit`, both from the linker script. */
extern char end;
extern char _heap_limit;

void *_sbrk(ptrdiff_t increment)
{
    static char *heap_top = &end;
    char *previous = heap_top;
    if (increment > 0 && (size_t)(&_heap_limit - heap_top) < (size_t)increment) {
        errno = ENOMEM;
        return (void *)-1;
    }
    heap_top += increment;
    return previous;
}

__NO_RETURN void _exit(int status) { aidge_qemu_exit(status); }
