/* Cortex-M55 timing-model microbenchmarks (mps3-an547): scalar issue and latencies, dual
 * issue, the MVE beat model, VFP latencies, low-overhead loops; each a function called
 * between two calls of mark() (the plugin's boundary). tests/test_timing_model.py derives,
 * by hand, the cycles the model's sources (LLVM's Cortex-M55 scheduling model, the
 * Armv8.1-M low-overhead-branch extension) predict for each.
 *
 * Every benchmark and every "bl mark; bl bench; bl mark" triple starts on a 4-byte
 * boundary; r1 holds &g_buf throughout.
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

FUNC m_empty
    bx lr

FUNC m_dual_issue
    adds r2, #1
    movs r3, #1
    adds r4, #1
    movs r5, #2
    add.w r6, r6, #1
    bx lr

FUNC m_load_use
    ldr r2, [r1]
    add.w r4, r2, #1
    ldr r3, [r1, #4]
    add.w r5, r2, #1
    bx lr

FUNC m_mul_chain
    mul.w r2, r2, r3
    mul.w r2, r2, r3
    mul.w r2, r2, r3
    bx lr

FUNC m_divide
    sdiv r2, r3, r4
    add.w r5, r2, #1
    bx lr

FUNC m_multiple
    ldmia.w r1, {r2-r5}
    bx lr

FUNC m_mve_pipes
    vldrw.u32 q0, [r1]
    vadd.i32 q1, q0, q0
    vmul.f32 q2, q1, q1
    vstrw.32 q2, [r1, #16]
    bx lr

FUNC m_mve_same_pipe
    vldrw.u32 q0, [r1]
    vldrb.u32 q1, [r1]
    vadd.i32 q2, q1, q0
    vstrw.32 q2, [r1, #16]
    bx lr

FUNC m_mve_reduce
    vmladava.s8 r2, q0, q1
    vmladava.s8 r2, q0, q1
    bx lr

FUNC m_vfp_chain
    vadd.f32 s0, s0, s1
    vadd.f32 s0, s0, s1
    vdiv.f32 s2, s0, s1
    vadd.f32 s3, s2, s1
    bx lr

FUNC m_branch_loop
    mov.w r0, #3
1:  subs.w r0, r0, #1
    bne.w 1b
    bx lr

FUNC m_low_overhead_loop
    push {r7, lr}
    mov.w r0, #3
    dls lr, r0
1:  add.w r2, r2, #1
    le lr, 1b
    pop {r7, pc}

    .balign 4
    .global run
    .type run, %function
    .thumb_func
run:
    push {r4-r11, lr}
    ldr r1, =g_buf
    BENCH m_empty
    BENCH m_dual_issue
    BENCH m_load_use
    movs r3, #3
    BENCH m_mul_chain
    movs r3, #100
    movs r4, #3
    BENCH m_divide
    BENCH m_multiple
    BENCH m_mve_pipes
    BENCH m_mve_same_pipe
    BENCH m_mve_reduce
    BENCH m_vfp_chain
    BENCH m_branch_loop
    BENCH m_low_overhead_loop
    pop {r4-r11, pc}
    .ltorg
