/* Cortex-M7 timing-model microbenchmarks (mps2-an500): dual issue and what forbids it,
 * load/store and multiply latencies, early reads by the address generator and the shifter,
 * the branch predictor, the FPU; each a function called between two calls of mark() (the
 * plugin's boundary). tests/test_timing_m33_m7.py derives, by hand, the cycles the model's
 * sources (LLVM's Cortex-M7 scheduling model, jnk0le's STM32H743 measurements) predict.
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

FUNC s_empty
    bx lr

FUNC s_dual_alu
    adds r2, #1
    adds r3, #1
    adds r4, #1
    adds r5, #1
    bx lr

FUNC s_loads_two_banks
    ldr r2, [r1]
    ldr r3, [r1, #4]
    ldr r4, [r1, #8]
    bx lr

FUNC s_loads_one_bank
    ldr r2, [r1]
    ldr r3, [r1, #8]
    ldr r4, [r1, #16]
    bx lr

FUNC s_load_use
    ldr r2, [r1]
    adds r3, r2, #1
    bx lr

FUNC s_pointer_chase
    ldr r2, [r1, #12]
    ldr r3, [r2]
    bx lr

FUNC s_subword
    ldrb r2, [r1]
    adds r3, r2, #1
    bx lr

FUNC s_alu_to_address
    adds r2, r1, #4
    ldr r3, [r2]
    bx lr

FUNC s_dsp_to_address
    ubfx r2, r1, #0, #32
    ldr r3, [r2]
    bx lr

FUNC s_shifted_pair
    add.w r2, r3, r4, lsl #2
    add.w r5, r6, r7, lsl #2
    bx lr

FUNC s_mul_to_shifter
    mul r2, r3, r4
    add.w r5, r6, r2, lsl #1
    bx lr

FUNC s_mul_to_alu
    mul r2, r3, r4
    add.w r5, r6, r2
    bx lr

FUNC s_mac_chain
    mla r2, r3, r4, r2
    mla r2, r3, r4, r2
    mla r2, r3, r4, r2
    bx lr

FUNC s_mul_chain
    mul.w r2, r2, r3
    mul.w r2, r2, r3
    mul.w r2, r2, r3
    bx lr

FUNC s_load_to_mul
    ldr r2, [r1]
    mul r3, r2, r4
    bx lr

FUNC s_mul_store
    mul r2, r3, r4
    str r5, [r1, #16]
    adds r6, #1
    bx lr

FUNC s_divide
    sdiv r2, r3, r4
    add.w r5, r2, #1
    bx lr

FUNC s_multiple
    ldm.w r1, {r2-r5}
    push {r4-r7}
    pop {r4-r7}
    bx lr

FUNC s_dual
    ldrd r2, r3, [r1]
    strd r2, r3, [r1, #16]
    bx lr

FUNC s_branch_loop
    movs r0, #4
1:  subs r0, #1
    bne 1b
    bx lr

FUNC s_pop_pc
    push {r4, lr}
    pop {r4, pc}

FUNC s_fp
    vldr s0, [r1]
    vadd.f32 s1, s0, s0
    vmul.f32 s2, s1, s1
    vfma.f32 s3, s2, s2
    vadd.f32 s4, s3, s3
    vstr s4, [r1, #16]
    bx lr

FUNC s_fp_pairs
    vldr s0, [r1]
    adds r2, #1
    vadd.f32 s1, s2, s3
    vadd.f32 s4, s5, s6
    bx lr

FUNC s_vdiv
    vdiv.f32 s2, s0, s1
    adds r2, #1
    bx lr

FUNC s_movw_movt
    movw r2, #0x1234
    movt r2, #0x5678
    bx lr

FUNC s_it
    cmp r2, r3
    it eq
    moveq r4, r5
    bx lr

    .balign 4
    .global run
    .type run, %function
    .thumb_func
run:
    push {r4-r11, lr}
    ldr r1, =g_buf
    BENCH s_empty
    BENCH s_dual_alu
    BENCH s_loads_two_banks
    BENCH s_loads_one_bank
    BENCH s_load_use
    BENCH s_pointer_chase
    BENCH s_subword
    BENCH s_alu_to_address
    BENCH s_dsp_to_address
    BENCH s_shifted_pair
    movs r3, #3
    movs r4, #5
    BENCH s_mul_to_shifter
    BENCH s_mul_to_alu
    BENCH s_mac_chain
    BENCH s_mul_chain
    BENCH s_load_to_mul
    BENCH s_mul_store
    movs r3, #100
    movs r4, #3
    BENCH s_divide
    BENCH s_multiple
    BENCH s_dual
    BENCH s_branch_loop
    BENCH s_pop_pc
    BENCH s_fp
    BENCH s_fp_pairs
    BENCH s_vdiv
    BENCH s_movw_movt
    movs r2, #1
    movs r3, #1
    BENCH s_it
    pop {r4-r11, pc}
    .ltorg
