/* Layout independence of the timing models (tests/test_timing_model.py): one loop whose
 * instructions straddle a 1 KB page end or not, depending on LAYOUT_PAD alone.
 *
 * QEMU translates no block across a (1 KB, M-profile) page end: straight-line code there is
 * split into two blocks. With LAYOUT_PAD = 1016 the loop's 16-bit ADDS sits at ...3fc and
 * its 32-bit ADD.W at ...3fe, across the page end (QEMU 7.2's qemu_plugin_insn_size then
 * counts the halfword its translator peeks at past the ADDS); with LAYOUT_PAD = 256 the
 * whole loop lies inside a page. Both pads are multiples of 8, so every instruction keeps
 * its alignment, and the ADD.W consumes the MULS two instructions before it: a dependency
 * the split separates. The cycles must be the same in both layouts.
 *
 * Plain Armv7-M Thumb-2: the same source runs on every core with a timing model.
 */
    .syntax unified
    .thumb
    .text

    .balign 4
    .global mark
    .type mark, %function
    .thumb_func
mark:
    bx lr

    .balign 4
    .global run
    .type run, %function
    .thumb_func
run:
    push {r4, r5, lr}
    movs r3, #3
    .balign 4
    bl mark
    bl l_straddle
    bl mark
    pop {r4, r5, pc}

    .balign 1024
    .space LAYOUT_PAD
    .global l_straddle
    .type l_straddle, %function
    .thumb_func
l_straddle:
    movs r0, #4
1:  muls r2, r3, r2
    adds r5, #1
    .global l_straddle_wide
l_straddle_wide:
    add.w r4, r2, #1
    subs r0, #1
    bne 1b
    bx lr
