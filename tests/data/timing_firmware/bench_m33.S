/* Cortex-M33 timing-model microbenchmarks (mps2-an505): one per rule of the model, each a
 * function called between two calls of mark() (the plugin's boundary).
 * tests/test_timing_model.py derives, by hand, the cycles the model's sources (measurements
 * of the RP2350's Cortex-M33 by jnk0le and SLOTHY, LLVM's model) predict for each.
 *
 * Every benchmark and every "bl mark; bl bench; bl mark" triple starts on a 4-byte
 * boundary; r1 holds &g_buf throughout; registers a benchmark needs are set before its
 * first mark.
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

FUNC t_empty
    bx lr

FUNC t_alu
    adds r2, #1
    adds r3, #1
    adds r4, #1
    adds r5, #1
    bx lr

FUNC t_nop
    adds r2, #1
    nop
    adds r3, #1
    nop
    bx lr

FUNC t_load_use
    ldr r2, [r1]
    adds r3, r2, #1
    bx lr

FUNC t_load_independent
    ldr r2, [r1]
    ldr r3, [r1, #4]
    ldr r4, [r1, #8]
    bx lr

FUNC t_load_store
    ldr r2, [r1]
    str r2, [r1, #16]
    bx lr

FUNC t_pointer_chase
    ldr r2, [r1, #12]
    ldr r3, [r2]
    bx lr

FUNC t_shifted
    add.w r2, r3, r4, ror #8
    add.w r5, r2, #1
    bx lr

FUNC t_shifted_lsl
    add.w r2, r3, r4, lsl #2
    add.w r5, r2, #1
    bx lr

FUNC t_dsp
    uadd16 r2, r3, r4
    add.w r5, r2, #1
    bx lr

FUNC t_mac_chain
    mla r2, r3, r4, r2
    mla r2, r3, r4, r2
    mla r2, r3, r4, r2
    bx lr

FUNC t_mul_chain
    mul.w r2, r2, r3
    mul.w r2, r2, r3
    mul.w r2, r2, r3
    bx lr

FUNC t_muls
    muls r2, r3, r2
    adds r4, #1
    bx lr

FUNC t_divide
    sdiv r2, r3, r4
    add.w r5, r2, #1
    bx lr

FUNC t_multiple
    ldm.w r1, {r2-r5}
    push {r4-r7}
    pop {r4-r7}
    bx lr

FUNC t_dual
    ldrd r2, r3, [r1]
    strd r2, r3, [r1, #16]
    bx lr

FUNC t_it
    cmp r2, r3
    it eq
    moveq r4, r5
    cmp.w r2, r3
    it eq
    moveq r4, r5
    bx lr

FUNC t_branch_loop
    movs r0, #3
1:  subs r0, #1
    bne 1b
    bx lr

FUNC t_branch_flags_ready
    movs r0, #3
1:  subs r0, #1
    mov r8, r8
    bne 1b
    bx lr

FUNC t_pop_pc
    push {r4, lr}
    pop {r4, pc}

FUNC t_fp
    vldr s0, [r1]
    vadd.f32 s1, s0, s0
    vmul.f32 s2, s1, s1
    vfma.f32 s3, s2, s2
    vadd.f32 s4, s3, s3
    vstr s4, [r1, #16]
    bx lr

FUNC t_vdiv_overlap
    vdiv.f32 s2, s0, s1
    adds r2, #1
    adds r3, #1
    vadd.f32 s3, s2, s2
    bx lr

FUNC t_table_branch
    tbb [pc, r0]
.Ltable:
    .byte (.Lcase - .Ltable) / 2
    .byte 0
.Lcase:
    bx lr

    .balign 4
    .global run
    .type run, %function
    .thumb_func
run:
    push {r4-r11, lr}
    ldr r1, =g_buf
    BENCH t_empty
    BENCH t_alu
    BENCH t_nop
    BENCH t_load_use
    BENCH t_load_independent
    BENCH t_load_store
    BENCH t_pointer_chase
    BENCH t_shifted
    BENCH t_shifted_lsl
    BENCH t_dsp
    movs r3, #3
    movs r4, #5
    BENCH t_mac_chain
    BENCH t_mul_chain
    BENCH t_muls
    movs r3, #100
    movs r4, #3
    BENCH t_divide
    BENCH t_multiple
    BENCH t_dual
    movs r2, #1
    movs r3, #1
    BENCH t_it
    BENCH t_branch_loop
    BENCH t_branch_flags_ready
    BENCH t_pop_pc
    BENCH t_fp
    BENCH t_vdiv_overlap
    movs r0, #0
    BENCH t_table_branch
    pop {r4-r11, pc}
    .ltorg
