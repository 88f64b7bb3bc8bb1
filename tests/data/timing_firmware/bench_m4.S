/* Cortex-M4 timing-model microbenchmarks (mps2-an386, netduinoplus2): one per row of the
 * model, each a function called between two calls of mark() (the plugin's boundary).
 * tests/test_timing_model.py derives the cycles the Cortex-M4 TRM predicts for each, by hand.
 *
 * Layout rules the expected counts rely on: every benchmark function and every
 * "bl mark; bl bench; bl mark" triple starts on a 4-byte boundary, so no branch of the
 * bracketing targets a 32-bit instruction at a halfword-aligned address. r1 holds &g_buf
 * throughout; registers a benchmark needs are set before its first mark.
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

.macro BENCH name
    .balign 4
    bl mark
    bl \name
    bl mark
.endm

.macro FUNC name
    .balign 4
    .global \name
    .type \name, %function
    .thumb_func
\name:
.endm

FUNC b_empty
    bx lr

FUNC b_alu
    adds r2, r2, #1
    adds r2, r2, #1
    adds r2, r2, #1
    adds r2, r2, #1
    bx lr

FUNC b_load_independent
    ldr r2, [r1]
    ldr r3, [r1, #4]
    ldr r4, [r1, #8]
    bx lr

FUNC b_load_dependent
    ldr r2, [r1, #12]
    ldr r3, [r2]
    bx lr

FUNC b_load_store
    ldr r2, [r1]
    str r2, [r1, #16]
    str r2, [r1, r3]
    bx lr

FUNC b_store_after_load
    ldr r2, [r1]
    str r2, [r1, r3]
    bx lr

FUNC b_address_dependency
    adds r5, r1, #0
    ldr r2, [r5]
    bx lr

FUNC b_mac
    mla r2, r3, r4, r2
    mla r2, r3, r4, r2
    smlad r2, r3, r4, r2
    smlad r2, r3, r4, r2
    bx lr

FUNC b_divide
    sdiv r2, r3, r4
    udiv r2, r3, r4
    bx lr

FUNC b_loop
    movs r0, #4
1:  subs r0, r0, #1
    bne 1b
    bx lr

FUNC b_loop_wide_target
    movs r0, #4
1:  subs.w r0, r0, #1
    bne 1b
    bx lr

FUNC b_multiple
    ldmia.w r1, {r2-r5}
    stmia.w r1, {r2, r3}
    push {r4-r7}
    pop {r4-r7}
    bx lr

FUNC b_pop_pc
    push {r4, lr}
    pop {r4, pc}

FUNC b_it
    cmp r2, r3
    it eq
    moveq r2, r3
    cmp.w r2, r3
    it eq
    moveq r2, r3
    bx lr

FUNC b_vfp
    vldr s0, [r1]
    vadd.f32 s1, s0, s0
    vmul.f32 s2, s1, s1
    vfma.f32 s3, s1, s2
    vdiv.f32 s4, s3, s1
    vstr s4, [r1, #24]
    bx lr

FUNC b_vfp_multiple
    vldmia r1, {s0-s3}
    vpush {s16-s17}
    vpop {s16-s17}
    bx lr

FUNC b_table_branch
    tbb [pc, r0]
.Ltable:
    .byte (.Lcase - .Ltable) / 2
    .byte 0
.Lcase:
    bx lr

FUNC b_flash_load
    ldr r2, [r6]
    bx lr

    .balign 4
    .global run
    .type run, %function
    .thumb_func
run:
    push {r4-r11, lr}
    ldr r1, =g_buf
    ldr r6, =g_const
    BENCH b_empty
    BENCH b_alu
    BENCH b_load_independent
    BENCH b_load_dependent
    movs r3, #20
    BENCH b_load_store
    BENCH b_store_after_load
    BENCH b_address_dependency
    movs r3, #3
    movs r4, #5
    BENCH b_mac
    movs r3, #100
    movs r4, #3
    BENCH b_divide
    BENCH b_loop
    BENCH b_loop_wide_target
    BENCH b_multiple
    BENCH b_pop_pc
    movs r2, #1
    movs r3, #1
    BENCH b_it
    BENCH b_vfp
    BENCH b_vfp_multiple
    movs r0, #0
    BENCH b_table_branch
    BENCH b_flash_load
    pop {r4-r11, pc}
    .ltorg
