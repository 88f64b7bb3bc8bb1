/*
 * thumb_decode: what the timing model needs to know about one Thumb / Thumb-2 instruction
 * (Armv7E-M with FPv4-SP for the Cortex-M4, Armv8.1-M with MVE and FPv5 for the Cortex-M55),
 * decoded from its bytes (qemu_plugin_insn_data) at translation time.
 *
 * Only the facts that price an instruction are extracted: its class (a row of the core's
 * timing table), its width, the core and floating-point / vector registers it reads and
 * writes, the registers that form a load's or store's address, the register count of a
 * multiple transfer and, for a control transfer, which kind it is. Encodings the decoder
 * does not know are IC_OTHER (priced as one cycle by the model).
 */
#ifndef AIDGE_THUMB_DECODE_H
#define AIDGE_THUMB_DECODE_H

#include <stddef.h>
#include <stdint.h>

enum insn_class {
    IC_OTHER = 0,     /* unknown, SVC, BKPT, UDF, coprocessor */
    IC_ALU,           /* data processing, moves, shifts, extends, bit fields, saturation, CLZ,
                         REV, parallel add/subtract, SEL, DLS/DLSTP */
    IC_MUL,           /* MUL/MLA/MLS, long multiplies, DSP multiplies (SMLAD, SMULxy, ...) */
    IC_DIV,           /* SDIV, UDIV */
    IC_LOAD,          /* single load into a core register other than PC (LDREX included) */
    IC_STORE,         /* single store (STREX included) */
    IC_LOAD_DUAL,     /* LDRD */
    IC_STORE_DUAL,    /* STRD */
    IC_LOAD_MULTI,    /* LDM, POP (nregs registers) */
    IC_STORE_MULTI,   /* STM, PUSH */
    IC_BRANCH,        /* B, B<cond>, BL, CBZ, CBNZ, WLS: direct target */
    IC_BRANCH_REG,    /* BX, BLX, MOV PC, ADD PC: target from a register */
    IC_LOAD_PC,       /* LDR PC (a load-to-PC branch; POP/LDM with PC are IC_LOAD_MULTI) */
    IC_TABLE_BRANCH,  /* TBB, TBH */
    IC_LOOP_END,      /* LE, LETP (low-overhead loop end) */
    IC_IT,            /* IT */
    IC_NOP,           /* NOP and the hints (YIELD, SEV, WFE, WFI), PLD, PLI */
    IC_SYSTEM,        /* MRS, MSR, CPSID, CPSIE */
    IC_BARRIER,       /* DMB, DSB, ISB, CLREX */
    IC_FP_ALU,        /* VADD, VSUB, VABS, VNEG, VCMP, VCVT, VMOV (immediate, register), VRINT */
    IC_FP_MUL,        /* VMUL, VNMUL */
    IC_FP_MAC,        /* VMLA, VMLS, VNMLA, VNMLS, VFMA, VFMS, VFNMA, VFNMS */
    IC_FP_DIV,        /* VDIV, VSQRT */
    IC_FP_LOAD,       /* VLDR */
    IC_FP_STORE,      /* VSTR */
    IC_FP_LOAD_MULTI, /* VLDM, VPOP (nregs 32-bit words) */
    IC_FP_STORE_MULTI,/* VSTM, VPUSH */
    IC_FP_MOVE,       /* VMOV between core and floating-point registers */
    IC_FP_SYSTEM,     /* VMRS, VMSR */
    IC_MVE_LOAD,      /* MVE VLDR{B,H,W}, VLD2x, VLD4x, gathers */
    IC_MVE_STORE,     /* MVE VSTR{B,H,W}, VST2x, VST4x, scatters */
    IC_MVE_INT,       /* MVE integer pipeline */
    IC_MVE_FPMUL,     /* MVE float / multiply pipeline */
    IC_MVE_SYS,       /* MVE VPST, VPNOT, VCTP */
    IC_COUNT
};

enum insn_flag {
    IF_WIDE = 1u << 0,        /* 32-bit encoding */
    IF_REG_OFFSET = 1u << 1,  /* load/store with a register offset */
    IF_CONTROL = 1u << 2,     /* may write the PC: ends a translation block */
    IF_DOUBLE = 1u << 3,      /* double-precision floating point */
    IF_DUAL_ISSUE = 1u << 4,  /* 16-bit instruction a Cortex-M55 can issue beside another */
    IF_WRITES_PC = 1u << 5,   /* a load or move that writes the PC (a return, a jump) */
    IF_SETS_FLAGS = 1u << 6,  /* writes the condition flags (S forms, CMP/CMN/TST/TEQ; the
                                 16-bit ALU forms, as outside an IT block) */
    IF_SUBWORD = 1u << 7,     /* byte or halfword load */
    IF_SHIFTED = 1u << 8,     /* operand 2 is a shifted register or a rotated constant */
    IF_SHIFT_LSL = 1u << 9,   /* ... shifted left (LSL #n) */
    IF_DSP = 1u << 10,        /* bit field, extend, reverse, CLZ, SEL, saturate, pack, parallel
                                 add/subtract: the shifter/SIMD path */
    IF_DSP_LATE = 1u << 11,   /* ... of those, the two-stage ones: parallel add/subtract,
                                 saturating arithmetic, pack, extend-and-add, USAD8 */
    IF_CONDITIONAL = 1u << 12,/* conditional branch: B<cond>, CBZ, CBNZ */
    IF_MOVW = 1u << 13,       /* MOVW */
    IF_MOVT = 1u << 14,       /* MOVT */
};

#define NO_BASE 0xFF

struct insn_info {
    uint8_t cls;       /* enum insn_class */
    uint8_t size;      /* 2 or 4 bytes */
    uint16_t flags;    /* enum insn_flag */
    uint8_t nregs;     /* registers (words for VLDM/VSTM) of a multiple transfer */
    uint8_t base;      /* a load's or store's base register with an immediate offset, else
                          NO_BASE */
    int16_t offset;    /* ... and the offset, bytes */
    uint16_t dst;      /* core registers written (bit n: Rn) */
    uint16_t src;      /* core registers read */
    uint16_t addr;     /* core registers that form a load's or store's address */
    uint16_t acc;      /* core registers read as a multiply's accumulator */
    uint16_t early;    /* core registers read by the shifter ahead of the ALU (a shifted
                          operand, a bit field's or an extend's source) */
    uint32_t fdst;     /* floating-point registers written (bit n: Sn; a Qn is S4n..S4n+3) */
    uint32_t fsrc;     /* floating-point registers read */
};

/* The length of the Thumb instruction at ``bytes`` (2 or 4), from its first halfword alone:
 * a first halfword 0b11101, 0b11110 or 0b11111 in its top five bits opens a 32-bit
 * instruction (Armv7-M / Armv8-M ARM, "Thumb instruction set encoding"). ``available`` is
 * how many bytes QEMU gave: never trusted as the length, since QEMU 7.2 counts in it the
 * halfword its Thumb translator peeks at past an instruction ending 2 bytes before a page
 * end (to see whether the next one crosses the page), giving a 16-bit instruction at ...fc
 * a size of 4 and a 32-bit one at ...fa a size of 6. 0 when fewer than 2 bytes were given. */
size_t thumb_insn_length(const uint8_t *bytes, size_t available);

/* Decode the instruction at ``bytes``: ``len`` bytes are readable (its length is decoded
 * from the first halfword, thumb_insn_length; a 32-bit instruction given fewer than 4 bytes
 * is IC_OTHER). */
void thumb_decode(const uint8_t *bytes, size_t len, struct insn_info *out);

#endif
