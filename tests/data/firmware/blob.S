/* 12 KiB of pseudo-random read-only data (a 32-bit LCG), so the image spans several
 * GDB packets and the firmware can prove that every byte arrived: main() prints a
 * checksum the test recomputes in Python. */
    .section .rodata.blob, "a"
    .balign 4
    .global g_blob
g_blob:
    .set lcg, 12345
    .rept 3072
    .set lcg, (lcg * 1103515245 + 12345) & 0xffffffff
    .word lcg
    .endr
    .global g_blob_words
    .set g_blob_words, 3072
    .section .rodata.blobsize, "a"
    .balign 4
    .global g_blob_size
g_blob_size:
    .word 3072
