/*
 * thumb_decode.c: Thumb / Thumb-2 instruction classification for the timing model.
 *
 * Encodings follow the Armv7-M and Armv8-M Architecture Reference Manuals (16-bit and
 * 32-bit Thumb instruction encoding tables; the coprocessor space for FP and MVE). Only
 * what prices an instruction is decoded; see thumb_decode.h.
 */
#include "thumb_decode.h"

#include <string.h>

#define R(n) ((uint16_t)(1u << ((n) & 15)))
#define PC_BIT R(15)

static uint16_t bits(uint32_t value, int hi, int lo) {
    return (uint16_t)((value >> lo) & ((1u << (hi - lo + 1)) - 1u));
}

static int popcount16(uint16_t v) {
    int n = 0;
    for (; v; v &= (uint16_t)(v - 1)) {
        ++n;
    }
    return n;
}

/* Single-precision register masks: Sd from Vd:D, Dd as S2d and S2d+1, Qd as S4d..S4d+3. */
static uint32_t sreg(unsigned n) { return n < 32 ? 1u << n : 0; }
static uint32_t dreg(unsigned n) { return n < 16 ? 3u << (2 * n) : 0; }
static uint32_t qreg(unsigned n) { return n < 8 ? 0xFu << (4 * n) : 0; }

static void set(struct insn_info *d, enum insn_class cls, uint16_t dst, uint16_t src) {
    d->cls = (uint8_t)cls;
    d->dst = dst;
    d->src = src;
}

/* ---- 16-bit encodings --------------------------------------------------------------------- */

static void decode16(uint16_t hw, struct insn_info *d) {
    unsigned rd = bits(hw, 2, 0), rn3 = bits(hw, 5, 3), rm = bits(hw, 8, 6), r8 = bits(hw, 10, 8);
    switch (hw >> 12) {
    case 0x0:
    case 0x1:
        if (bits(hw, 12, 11) != 3) { /* LSL, LSR, ASR (immediate) */
            set(d, IC_ALU, R(rd), R(rn3));
        } else if (bits(hw, 10, 10) == 0) { /* ADD, SUB (register) */
            set(d, IC_ALU, R(rd), R(rn3) | R(rm));
        } else { /* ADD, SUB (3-bit immediate) */
            set(d, IC_ALU, R(rd), R(rn3));
        }
        d->flags |= IF_SETS_FLAGS;
        d->flags |= IF_DUAL_ISSUE * (bits(hw, 10, 10) == 1); /* ADDS/SUBS #imm3 */
        return;
    case 0x2:
    case 0x3: { /* MOV, CMP, ADD, SUB (8-bit immediate) */
        unsigned op = bits(hw, 12, 11);
        set(d, IC_ALU, op == 1 ? 0 : R(r8), op == 0 ? 0 : R(r8));
        d->flags |= IF_SETS_FLAGS;
        if (op != 1) {
            d->flags |= IF_DUAL_ISSUE;
        }
        return;
    }
    case 0x4:
        if (bits(hw, 11, 10) == 0) { /* data processing (register) */
            unsigned op = bits(hw, 9, 6);
            int compare = op == 0x8 || op == 0xA || op == 0xB; /* TST, CMP, CMN */
            set(d, op == 0xD ? IC_MUL : IC_ALU, compare ? 0 : R(rd), R(rd) | R(rn3));
            if (op == 0xF || op == 0x9) { /* MVN, RSB read only Rm / Rn */
                d->src = R(rn3);
            }
            d->flags |= IF_SETS_FLAGS; /* every one of them, outside an IT block */
            return;
        }
        if (bits(hw, 11, 10) == 1) { /* special data processing, branch and exchange */
            unsigned op = bits(hw, 9, 8), rdn = (bits(hw, 7, 7) << 3) | rd, rm4 = bits(hw, 6, 3);
            if (op == 3) { /* BX, BLX */
                set(d, IC_BRANCH_REG, bits(hw, 7, 7) ? R(14) : 0, R(rm4));
                d->flags |= IF_CONTROL;
            } else if (op == 1) { /* CMP (high registers) */
                set(d, IC_ALU, 0, R(rdn) | R(rm4));
                d->flags |= IF_SETS_FLAGS;
            } else { /* ADD / MOV (high registers) */
                set(d, IC_ALU, R(rdn), R(rm4) | (op == 0 ? R(rdn) : 0));
                if (op == 2) {
                    d->flags |= IF_DUAL_ISSUE;
                }
                if (rdn == 15) {
                    d->cls = IC_BRANCH_REG;
                    d->flags |= IF_CONTROL | IF_WRITES_PC;
                }
            }
            return;
        }
        /* LDR (literal) */
        set(d, IC_LOAD, R(r8), PC_BIT);
        d->addr = PC_BIT;
        return;
    case 0x5: { /* load/store (register offset) */
        unsigned op = bits(hw, 11, 9);
        int store = op <= 2;
        set(d, store ? IC_STORE : IC_LOAD, store ? 0 : R(rd), R(rn3) | R(rm) | (store ? R(rd) : 0));
        d->addr = R(rn3) | R(rm);
        d->flags |= IF_REG_OFFSET;
        if (op == 3 || op >= 5) { /* LDRSB, LDRH, LDRB, LDRSH */
            d->flags |= IF_SUBWORD;
        }
        return;
    }
    case 0x6:
    case 0x7:
    case 0x8: { /* load/store word, byte, halfword (immediate) */
        int load = bits(hw, 11, 11);
        unsigned scale = (hw >> 12) == 0x6 ? 4 : (hw >> 12) == 0x7 ? 1 : 2;
        set(d, load ? IC_LOAD : IC_STORE, load ? R(rd) : 0, R(rn3) | (load ? 0 : R(rd)));
        d->addr = R(rn3);
        d->base = (uint8_t)rn3;
        d->offset = (int16_t)(bits(hw, 10, 6) * scale);
        if (load && scale != 4) {
            d->flags |= IF_SUBWORD;
        }
        return;
    }
    case 0x9: { /* load/store SP-relative */
        int load = bits(hw, 11, 11);
        set(d, load ? IC_LOAD : IC_STORE, load ? R(r8) : 0, R(13) | (load ? 0 : R(r8)));
        d->addr = R(13);
        d->base = 13;
        d->offset = (int16_t)(bits(hw, 7, 0) * 4);
        return;
    }
    case 0xA: /* ADR, ADD (SP plus immediate) */
        set(d, IC_ALU, R(r8), bits(hw, 11, 11) ? R(13) : PC_BIT);
        return;
    case 0xB:
        break; /* miscellaneous, below */
    case 0xC: { /* STM, LDM */
        int load = bits(hw, 11, 11);
        uint16_t list = bits(hw, 7, 0);
        set(d, load ? IC_LOAD_MULTI : IC_STORE_MULTI, load ? list : 0, R(r8) | (load ? 0 : list));
        if (!load || !(list & R(r8))) {
            d->dst |= R(r8); /* writeback */
        }
        d->addr = R(r8);
        d->nregs = (uint8_t)popcount16(list);
        return;
    }
    case 0xD: {
        unsigned cond = bits(hw, 11, 8);
        if (cond == 0xF) { /* SVC */
            set(d, IC_OTHER, 0, 0);
            d->flags |= IF_CONTROL;
        } else if (cond == 0xE) { /* UDF */
            set(d, IC_OTHER, 0, 0);
        } else { /* B<cond> */
            set(d, IC_BRANCH, 0, 0);
            d->flags |= IF_CONTROL | IF_DUAL_ISSUE | IF_CONDITIONAL;
        }
        return;
    }
    case 0xE: /* B (unconditional) */
        set(d, IC_BRANCH, 0, 0);
        d->flags |= IF_CONTROL | IF_DUAL_ISSUE;
        return;
    default:
        set(d, IC_OTHER, 0, 0);
        return;
    }
    /* 1011 xxxx: miscellaneous 16-bit instructions */
    unsigned op = bits(hw, 11, 5);
    if ((op & 0x7C) == 0x00) { /* ADD/SUB SP, SP, #imm7 */
        set(d, IC_ALU, R(13), R(13));
        d->flags |= IF_DUAL_ISSUE;
    } else if ((op & 0x28) == 0x08) { /* CBZ, CBNZ */
        set(d, IC_BRANCH, 0, R(rd));
        d->flags |= IF_CONTROL | IF_DUAL_ISSUE | IF_CONDITIONAL;
    } else if ((op & 0x78) == 0x10) { /* SXTH, SXTB, UXTH, UXTB */
        set(d, IC_ALU, R(rd), R(rn3));
        d->flags |= IF_DUAL_ISSUE | IF_DSP;
        d->early = R(rn3);
    } else if ((op & 0x70) == 0x20) { /* PUSH */
        uint16_t list = (uint16_t)(bits(hw, 7, 0) | (bits(hw, 8, 8) ? R(14) : 0));
        set(d, IC_STORE_MULTI, R(13), R(13) | list);
        d->addr = R(13);
        d->nregs = (uint8_t)popcount16(list);
    } else if ((op & 0x7E) == 0x32) { /* CPS */
        set(d, IC_SYSTEM, 0, 0);
    } else if ((op & 0x78) == 0x50) { /* REV, REV16, REVSH */
        set(d, IC_ALU, R(rd), R(rn3));
        d->flags |= IF_DSP;
        d->early = R(rn3);
    } else if ((op & 0x70) == 0x60) { /* POP */
        uint16_t list = (uint16_t)(bits(hw, 7, 0) | (bits(hw, 8, 8) ? PC_BIT : 0));
        set(d, IC_LOAD_MULTI, (uint16_t)(list | R(13)), R(13));
        d->addr = R(13);
        d->nregs = (uint8_t)popcount16(list);
        if (list & PC_BIT) {
            d->flags |= IF_CONTROL | IF_WRITES_PC;
        }
    } else if ((op & 0x78) == 0x70) { /* BKPT */
        set(d, IC_OTHER, 0, 0);
    } else if ((op & 0x78) == 0x78) { /* IT, hints */
        set(d, bits(hw, 3, 0) ? IC_IT : IC_NOP, 0, 0);
        d->flags |= IF_DUAL_ISSUE;
    } else {
        set(d, IC_OTHER, 0, 0);
    }
}

/* ---- 32-bit encodings: floating point and MVE (coprocessor space) ------------------------- */

/* MVE in the "Advanced SIMD"-like space (111U 1111): the pipeline from the opcode field. */
static enum insn_class mve_simd_class(uint16_t hw1, uint16_t hw2) {
    if (bits(hw1, 7, 7) == 0) { /* three registers of the same length */
        unsigned opc = bits(hw2, 11, 8);
        /* multiplies (VMUL/VMLA 1001, VQDMULH 1011) and floating point (1100-1111) */
        return (opc == 0x9 || opc == 0xB || opc >= 0xC) ? IC_MVE_FPMUL : IC_MVE_INT;
    }
    if ((hw1 & 0x00B0) == 0x00B0 && bits(hw2, 4, 4) == 0) { /* two registers, miscellaneous */
        unsigned group = bits(hw1, 1, 0);
        if (group == 3) { /* VCVT, VRINT */
            return IC_MVE_FPMUL;
        }
        if (group == 1 && bits(hw2, 10, 10)) { /* VABS.F, VNEG.F, VCMP.F #0 */
            return IC_MVE_FPMUL;
        }
        return IC_MVE_INT;
    }
    if (bits(hw2, 7, 7) == 0 && bits(hw2, 4, 4) == 1 && bits(hw1, 5, 3) == 0) {
        return IC_MVE_FPMUL; /* VMOV (immediate): the float pipeline's E3 write */
    }
    return IC_MVE_INT; /* shifts by immediate, VSHLL, VQSHRN, ... */
}

/* MVE in the 111U 1110 space with coprocessor field 0b111x. */
static enum insn_class mve_other_class(uint16_t hw1, uint16_t hw2) {
    if ((hw2 & 0x0FFF) == 0x0F4D) { /* VPST, VPNOT */
        return IC_MVE_SYS;
    }
    if (bits(hw1, 7, 7) == 1 && bits(hw1, 5, 4) == 2 && bits(hw2, 12, 12) == 0 &&
        bits(hw2, 8, 8) == 1) {
        return IC_MVE_INT; /* VMOVL, VMAXV, VMINV: the integer pipeline */
    }
    if (bits(hw2, 8, 8) == 1 && bits(hw2, 12, 12) == 0 && bits(hw2, 6, 6) == 1 &&
        bits(hw1, 7, 4) == 0x2 && bits(hw2, 5, 5) == 0) {
        return IC_MVE_INT; /* VADD/VSUB with a scalar (qr forms) */
    }
    if (bits(hw1, 7, 4) == 0x3 && bits(hw2, 8, 8) == 1 && bits(hw2, 6, 4) == 0 &&
        bits(hw2, 0, 0) == 1) {
        return IC_MVE_INT; /* VPSEL */
    }
    /* the rest: VMLADAV/VMLAV/VADDV/VADDLV, VMLA/VFMA/VMUL with a scalar, VMULL, VQDMULH,
     * VCMP/VPT, VMOVN (int, E4; counted with the float/multiply beats, see the data file) */
    return IC_MVE_FPMUL;
}

static void decode_coprocessor(uint16_t hw1, uint16_t hw2, struct insn_info *d) {
    unsigned coproc = bits(hw2, 11, 8);
    int vfp = coproc == 0xA || coproc == 0xB, mve = coproc >= 0xE;
    int dbl = coproc == 0xB;
    unsigned rn = bits(hw1, 3, 0), rt = bits(hw2, 15, 12);
    unsigned vd = bits(hw2, 15, 12), dbit = bits(hw1, 6, 6);
    uint32_t fd = dbl ? dreg((dbit << 4) | vd) : sreg((vd << 1) | dbit);
    if ((hw1 & 0xEFE0) == 0xEC40) { /* 64-bit transfers: VMOV two core registers */
        set(d, vfp ? IC_FP_MOVE : (mve ? IC_MVE_INT : IC_OTHER), 0, 0);
        if (bits(hw1, 4, 4)) {
            d->dst = (uint16_t)(R(rt) | R(rn));
        } else {
            d->src = (uint16_t)(R(rt) | R(rn));
        }
        d->flags |= IF_DOUBLE;
        return;
    }
    if ((hw1 & 0xEE00) == 0xEC00) { /* loads and stores */
        int load = bits(hw1, 4, 4), p = bits(hw1, 8, 8), w = bits(hw1, 5, 5);
        d->addr = R(rn);
        d->src = R(rn);
        if (w) {
            d->dst = R(rn);
        }
        if (mve) {
            /* VLDR/VSTR (Qd = hw1[6]? no: Qd in hw2[15:13]), VLD2x/VLD4x, gathers */
            unsigned q = bits(hw2, 15, 13);
            d->cls = load ? IC_MVE_LOAD : IC_MVE_STORE;
            if (load) {
                d->fdst = qreg(q);
            } else {
                d->fsrc = qreg(q);
            }
            return;
        }
        if (!vfp) {
            set(d, IC_OTHER, d->dst, d->src);
            return;
        }
        if (p && !w) { /* VLDR, VSTR */
            d->cls = load ? IC_FP_LOAD : IC_FP_STORE;
            d->nregs = dbl ? 2 : 1;
            if (rn != 15) {
                int words = bits(hw2, 7, 0);
                d->base = (uint8_t)rn;
                d->offset = (int16_t)(bits(hw1, 7, 7) ? 4 * words : -4 * words);
            }
        } else { /* VLDM, VSTM, VPUSH, VPOP */
            unsigned words = bits(hw2, 7, 0);
            d->cls = load ? IC_FP_LOAD_MULTI : IC_FP_STORE_MULTI;
            d->nregs = (uint8_t)(dbl ? words & ~1u : words);
            uint32_t mask = 0;
            unsigned first = dbl ? 2 * ((dbit << 4) | vd) : ((vd << 1) | dbit);
            for (unsigned i = 0; i < d->nregs && first + i < 32; ++i) {
                mask |= 1u << (first + i);
            }
            fd = mask;
        }
        if (load) {
            d->fdst = fd;
        } else {
            d->fsrc = fd;
        }
        if (dbl) {
            d->flags |= IF_DOUBLE;
        }
        return;
    }
    if ((hw1 & 0xEF00) == 0xEF00) { /* MVE: the Advanced-SIMD-like space */
        d->cls = (uint8_t)mve_simd_class(hw1, hw2);
        d->fdst = qreg(bits(hw2, 15, 13));
        d->fsrc = qreg(bits(hw1, 3, 1)) | qreg(bits(hw2, 3, 1));
        return;
    }
    /* (hw1 & 0xEF00) == 0xEE00: data processing and register transfers */
    if (mve) {
        d->cls = (uint8_t)mve_other_class(hw1, hw2);
        d->fdst = qreg(bits(hw2, 15, 13));
        d->fsrc = qreg(bits(hw1, 3, 1)) | qreg(bits(hw2, 3, 1));
        if (bits(hw2, 12, 12) == 0 && bits(hw2, 8, 8) == 1 && bits(hw1, 7, 7) == 1 &&
            (bits(hw1, 5, 4) == 3 || bits(hw1, 5, 4) == 1)) {
            /* reductions to core registers (VADDV, VMLADAV, VMAXV, ...): RdaLo in hw2[15:13]*2 */
            d->fdst = 0;
            d->dst = R(2 * bits(hw2, 15, 13));
            d->src = d->dst;
        } else if (bits(hw2, 6, 6) == 1 && bits(hw2, 4, 4) == 0) {
            d->src = R(bits(hw2, 3, 0)); /* a scalar operand (qr forms) */
        }
        return;
    }
    if (!vfp) {
        set(d, IC_OTHER, 0, 0);
        return;
    }
    if (dbl) {
        d->flags |= IF_DOUBLE;
    }
    if (bits(hw2, 4, 4) == 1) { /* register transfers */
        if (dbl && bits(hw1, 7, 7) == 1 && bits(hw1, 4, 4) == 0) { /* MVE VDUP */
            set(d, IC_MVE_INT, 0, R(rt));
            d->fdst = qreg((bits(hw1, 3, 1)));
            d->flags &= (uint16_t)~IF_DOUBLE;
            return;
        }
        if ((hw1 & 0xFFEF) == 0xEEE1) { /* VMRS, VMSR (FPSCR) */
            int to_core = bits(hw1, 4, 4);
            set(d, IC_FP_SYSTEM, to_core && rt != 15 ? R(rt) : 0, to_core ? 0 : R(rt));
            return;
        }
        int to_core = bits(hw1, 4, 4);
        unsigned vn = (bits(hw1, 3, 0) << 1) | bits(hw2, 7, 7);
        set(d, IC_FP_MOVE, to_core ? R(rt) : 0, to_core ? 0 : R(rt));
        if (to_core) {
            d->fsrc = sreg(vn);
        } else {
            d->fdst = sreg(vn);
        }
        return;
    }
    unsigned opc1 = (bits(hw1, 7, 7) << 2) | bits(hw1, 5, 4);
    unsigned vn = bits(hw1, 3, 0), nbit = bits(hw2, 7, 7), vm = bits(hw2, 3, 0), mbit = bits(hw2, 5, 5);
    uint32_t fn = dbl ? dreg((nbit << 4) | vn) : sreg((vn << 1) | nbit);
    uint32_t fm = dbl ? dreg((mbit << 4) | vm) : sreg((vm << 1) | mbit);
    d->fdst = fd;
    d->fsrc = fn | fm;
    switch (opc1) {
    case 0: /* VMLA, VMLS */
    case 1: /* VNMLA, VNMLS */
    case 5: /* VFNMA, VFNMS */
    case 6: /* VFMA, VFMS */
        d->cls = IC_FP_MAC;
        d->fsrc |= fd; /* the accumulator */
        return;
    case 2: /* VMUL, VNMUL */
        d->cls = IC_FP_MUL;
        return;
    case 3: /* VADD, VSUB */
        d->cls = IC_FP_ALU;
        return;
    case 4: /* VDIV */
        d->cls = IC_FP_DIV;
        return;
    default: /* VMOV (immediate, register), VABS, VNEG, VSQRT, VCMP, VCVT, VRINT */
        d->fsrc = fm;
        if (bits(hw2, 6, 6) == 0) { /* VMOV (immediate) */
            d->fsrc = 0;
            d->cls = IC_FP_ALU;
        } else if (bits(hw1, 3, 0) == 1 && bits(hw2, 7, 7) == 1) {
            d->cls = IC_FP_DIV; /* VSQRT */
        } else {
            d->cls = IC_FP_ALU;
            if ((bits(hw1, 3, 0) & 0xE) == 0x4) { /* VCMP, VCMPE: flags only */
                d->fdst = 0;
                d->fsrc = fd | (bits(hw1, 0, 0) ? 0 : fm);
            }
        }
        return;
    }
}

/* ---- 32-bit encodings: the rest ----------------------------------------------------------- */

static void decode_branch_misc(uint16_t hw1, uint16_t hw2, struct insn_info *d) {
    unsigned op1 = bits(hw2, 14, 12);
    if ((op1 & 0x5) == 0x1 || (op1 & 0x5) == 0x5) { /* B.W (T4), BL */
        set(d, IC_BRANCH, (op1 & 0x4) ? R(14) : 0, 0);
        d->flags |= IF_CONTROL;
        return;
    }
    if ((op1 & 0x5) == 0x4) { /* Armv8.1-M low-overhead loops and branch future */
        if ((hw1 & 0xFFCF) == 0xF00F && (hw2 & 0xF001) == 0xC001) { /* LE, LETP */
            set(d, IC_LOOP_END, R(14), R(14));
            d->flags |= IF_CONTROL;
        } else if ((hw1 & 0xFF80) == 0xF000 && hw2 == 0xE001) { /* DLS, DLSTP */
            set(d, IC_ALU, R(14), R(bits(hw1, 3, 0)));
        } else if ((hw1 & 0xFF80) == 0xF000 && (hw2 & 0xF001) == 0xC001) { /* WLS, WLSTP */
            set(d, IC_BRANCH, R(14), R(bits(hw1, 3, 0)));
            d->flags |= IF_CONTROL;
        } else if ((hw1 & 0xFFC0) == 0xF000 && hw2 == 0xE801) { /* VCTP */
            set(d, IC_MVE_SYS, 0, R(bits(hw1, 3, 0)));
        } else { /* BF, BFX, BFL, BFLX, BFCSEL: branch-future hints */
            set(d, IC_NOP, 0, 0);
        }
        return;
    }
    /* op1 = 0x0 / 0x2: conditional branch or miscellaneous control */
    if (bits(hw1, 9, 7) != 0x7) { /* B<cond>.W */
        set(d, IC_BRANCH, 0, 0);
        d->flags |= IF_CONTROL | IF_CONDITIONAL;
        return;
    }
    unsigned op = bits(hw1, 10, 4);
    if (op == 0x38 || op == 0x39) { /* MSR */
        set(d, IC_SYSTEM, 0, R(bits(hw1, 3, 0)));
    } else if (op == 0x3A) { /* hints, CPS */
        set(d, IC_NOP, 0, 0);
    } else if (op == 0x3B) { /* DSB, DMB, ISB, CLREX */
        set(d, IC_BARRIER, 0, 0);
    } else if (op == 0x3E || op == 0x3F) { /* MRS */
        set(d, IC_SYSTEM, R(bits(hw2, 11, 8)), 0);
    } else {
        set(d, IC_OTHER, 0, 0);
    }
}

static void decode_load_store_single(uint16_t hw1, uint16_t hw2, struct insn_info *d) {
    int load = bits(hw1, 4, 4), size = bits(hw1, 6, 5);
    unsigned rn = bits(hw1, 3, 0), rt = bits(hw2, 15, 12), rm = bits(hw2, 3, 0);
    int reg = bits(hw1, 7, 7) == 0 && bits(hw2, 11, 6) == 0 && rn != 15;
    int wback = bits(hw1, 7, 7) == 0 && bits(hw2, 11, 11) == 1 && bits(hw2, 8, 8) == 1;
    d->addr = (uint16_t)(R(rn) | (reg ? R(rm) : 0));
    if (reg) {
        d->flags |= IF_REG_OFFSET;
    } else if (rn != 15) {
        d->base = (uint8_t)rn;
        if (bits(hw1, 7, 7)) { /* imm12 */
            d->offset = (int16_t)bits(hw2, 11, 0);
        } else if (bits(hw2, 11, 11) && bits(hw2, 10, 10)) { /* imm8, offset or pre-indexed */
            d->offset = (int16_t)(bits(hw2, 9, 9) ? bits(hw2, 7, 0) : -(int)bits(hw2, 7, 0));
        } /* post-indexed: the base itself */
    }
    if (load && size != 2) {
        d->flags |= IF_SUBWORD;
    }
    if (!load) {
        set(d, IC_STORE, wback ? R(rn) : 0, (uint16_t)(d->addr | R(rt)));
        return;
    }
    if (rt == 15) {
        if (size == 2) { /* LDR PC */
            set(d, IC_LOAD_PC, (uint16_t)(PC_BIT | (wback ? R(rn) : 0)), d->addr);
            d->flags |= IF_CONTROL | IF_WRITES_PC;
        } else { /* PLD, PLI */
            set(d, IC_NOP, 0, d->addr);
        }
        return;
    }
    set(d, IC_LOAD, (uint16_t)(R(rt) | (wback ? R(rn) : 0)), d->addr);
}

static void decode_dual_exclusive(uint16_t hw1, uint16_t hw2, struct insn_info *d) {
    unsigned op1 = bits(hw1, 8, 7), op2 = bits(hw1, 5, 4), op3 = bits(hw2, 7, 4);
    unsigned rn = bits(hw1, 3, 0), rt = bits(hw2, 15, 12), rt2 = bits(hw2, 11, 8);
    d->addr = R(rn);
    if (op1 == 1 && op2 == 1 && (op3 == 0 || op3 == 1)) { /* TBB, TBH */
        set(d, IC_TABLE_BRANCH, 0, (uint16_t)(R(rn) | R(bits(hw2, 3, 0))));
        d->addr = d->src;
        d->flags |= IF_CONTROL | IF_WRITES_PC;
        return;
    }
    if (op1 == 0 && op2 == 0) { /* STREX */
        set(d, IC_STORE, R(rt2), (uint16_t)(R(rn) | R(rt)));
        return;
    }
    if (op1 == 0 && op2 == 1) { /* LDREX */
        set(d, IC_LOAD, R(rt), R(rn));
        return;
    }
    if (op1 == 1 && (op2 == 0 || op2 == 1)) { /* STREXB/H, LDREXB/H, LDA*, STL* */
        int load = op2 == 1;
        set(d, load ? IC_LOAD : IC_STORE, load ? R(rt) : (op3 >= 4 ? R(bits(hw2, 3, 0)) : 0),
            (uint16_t)(R(rn) | (load ? 0 : R(rt))));
        return;
    }
    /* LDRD, STRD (immediate, literal) */
    int load = bits(hw1, 4, 4), wback = bits(hw1, 5, 5);
    set(d, load ? IC_LOAD_DUAL : IC_STORE_DUAL,
        (uint16_t)((load ? R(rt) | R(rt2) : 0) | (wback ? R(rn) : 0)),
        (uint16_t)(R(rn) | (load ? 0 : R(rt) | R(rt2))));
}

static void decode32(uint16_t hw1, uint16_t hw2, struct insn_info *d) {
    unsigned rn = bits(hw1, 3, 0), rd = bits(hw2, 11, 8), rm = bits(hw2, 3, 0);
    if ((hw1 & 0xEC00) == 0xEC00) { /* coprocessor, floating point, MVE */
        decode_coprocessor(hw1, hw2, d);
        return;
    }
    if ((hw1 & 0xFE40) == 0xE800) { /* LDM, STM (IA, DB), PUSH.W, POP.W */
        int load = bits(hw1, 4, 4), wback = bits(hw1, 5, 5);
        uint16_t list = hw2;
        set(d, load ? IC_LOAD_MULTI : IC_STORE_MULTI, (uint16_t)((load ? list : 0) | (wback ? R(rn) : 0)),
            (uint16_t)(R(rn) | (load ? 0 : list)));
        d->addr = R(rn);
        d->nregs = (uint8_t)popcount16(list);
        if (load && (list & PC_BIT)) {
            d->flags |= IF_CONTROL | IF_WRITES_PC;
        }
        return;
    }
    if ((hw1 & 0xFE40) == 0xE840) {
        decode_dual_exclusive(hw1, hw2, d);
        return;
    }
    if ((hw1 & 0xFE00) == 0xEA00) { /* data processing (shifted register) */
        unsigned op = bits(hw1, 8, 5);
        int s = bits(hw1, 4, 4);
        int compare = s && rd == 15 && (op == 0x0 || op == 0x4 || op == 0x8 || op == 0xD);
        set(d, IC_ALU, compare ? 0 : R(rd), (uint16_t)((rn == 15 ? 0 : R(rn)) | R(rm)));
        unsigned amount = (bits(hw2, 14, 12) << 2) | bits(hw2, 7, 6), type = bits(hw2, 5, 4);
        if (s) {
            d->flags |= IF_SETS_FLAGS;
        }
        if (op == 0x6 && !s) { /* PKHBT, PKHTB */
            d->flags |= IF_DSP | IF_DSP_LATE;
            d->early = R(rm);
        } else if ((amount || type) && !(rn == 15 && (op == 0x2 || op == 0x3))) {
            /* a shifted second operand (MOV/MVN with a shift are plain shifts) */
            d->flags |= IF_SHIFTED | (type == 0 ? IF_SHIFT_LSL : 0);
            d->early = R(rm);
        }
        return;
    }
    if ((hw1 & 0xF800) == 0xF000) {
        if (bits(hw2, 15, 15)) {
            decode_branch_misc(hw1, hw2, d);
            return;
        }
        /* data processing (modified or plain binary immediate) */
        int compare = bits(hw1, 9, 9) == 0 && bits(hw1, 4, 4) && rd == 15;
        set(d, IC_ALU, compare ? 0 : R(rd), rn == 15 ? 0 : R(rn));
        unsigned op = bits(hw1, 8, 4);
        if (!bits(hw1, 9, 9)) { /* modified immediate */
            if (bits(hw1, 4, 4)) {
                d->flags |= IF_SETS_FLAGS;
            }
            if (((bits(hw1, 10, 10) << 3) | bits(hw2, 14, 12)) >= 4) {
                d->flags |= IF_SHIFTED; /* a rotated constant: through the shifter */
            }
        } else if (op == 0x4 || op == 0xC) {
            d->src = op == 0xC ? R(rd) : 0; /* MOVW writes; MOVT keeps the low half */
            d->flags |= op == 0xC ? IF_MOVT : IF_MOVW;
        } else if (op >= 0x10) { /* SSAT, SBFX, BFI/BFC, USAT, UBFX */
            d->flags |= IF_DSP;
            if (op == 0x10 || op == 0x12 || op == 0x18 || op == 0x1A) {
                d->flags |= IF_DSP_LATE; /* saturation */
            }
            if (op == 0x16) {
                d->src |= R(rd); /* BFI/BFC keep the other bits */
            }
            d->early = rn == 15 ? 0 : R(rn);
        }
        return;
    }
    if ((hw1 & 0xFE00) == 0xF800) {
        decode_load_store_single(hw1, hw2, d);
        return;
    }
    if ((hw1 & 0xFF00) == 0xFA00) { /* data processing (register), parallel add/sub, misc */
        set(d, IC_ALU, R(rd), (uint16_t)((rn == 15 ? 0 : R(rn)) | R(rm)));
        if (!bits(hw1, 7, 7) && !bits(hw2, 7, 7)) { /* LSL/LSR/ASR/ROR by a register */
            d->flags |= bits(hw1, 4, 4) ? IF_SETS_FLAGS : 0;
        } else if (!bits(hw1, 7, 7)) { /* SXTAH ... UXTB: extends, and extend-and-add */
            d->flags |= IF_DSP | (rn == 15 ? 0 : IF_DSP_LATE);
            d->early = R(rm);
        } else if (bits(hw2, 7, 6) == 2 && bits(hw1, 6, 4) == 1) { /* REV, REV16, RBIT, REVSH */
            d->flags |= IF_DSP;
            d->src = R(rm);
            d->early = R(rm);
        } else if (bits(hw2, 7, 6) == 2 && bits(hw1, 6, 4) >= 2) { /* SEL, CLZ */
            d->flags |= IF_DSP;
            if (bits(hw1, 6, 4) == 3) {
                d->src = R(rm);
            }
        } else { /* parallel add/subtract, QADD/QSUB/QDADD/QDSUB */
            d->flags |= IF_DSP | IF_DSP_LATE;
        }
        return;
    }
    if ((hw1 & 0xFF80) == 0xFB00) { /* multiply, multiply accumulate, absolute difference */
        unsigned ra = bits(hw2, 15, 12);
        set(d, IC_MUL, R(rd), (uint16_t)(R(rn) | R(rm) | (ra == 15 ? 0 : R(ra))));
        d->acc = ra == 15 ? 0 : R(ra);
        return;
    }
    if ((hw1 & 0xFF80) == 0xFB80) { /* long multiply, long multiply accumulate, divide */
        unsigned op1 = bits(hw1, 6, 4), op2 = bits(hw2, 7, 4), lo = bits(hw2, 15, 12);
        if ((op1 == 1 || op1 == 3) && op2 == 0xF) { /* SDIV, UDIV */
            set(d, IC_DIV, R(rd), (uint16_t)(R(rn) | R(rm)));
            return;
        }
        int accumulate = op1 >= 4;
        set(d, IC_MUL, (uint16_t)(R(lo) | R(rd)),
            (uint16_t)(R(rn) | R(rm) | (accumulate ? R(lo) | R(rd) : 0)));
        d->acc = accumulate ? (uint16_t)(R(lo) | R(rd)) : 0;
        return;
    }
    set(d, IC_OTHER, 0, 0);
}

size_t thumb_insn_length(const uint8_t *bytes, size_t available) {
    if (available < 2) {
        return 0;
    }
    uint16_t hw1 = (uint16_t)(bytes[0] | (bytes[1] << 8));
    return (hw1 >> 11) >= 0x1D ? 4 : 2;
}

void thumb_decode(const uint8_t *bytes, size_t len, struct insn_info *out) {
    memset(out, 0, sizeof *out);
    out->base = NO_BASE;
    size_t size = thumb_insn_length(bytes, len);
    if (size == 0) {
        out->size = 2;
        return; /* IC_OTHER */
    }
    uint16_t hw1 = (uint16_t)(bytes[0] | (bytes[1] << 8));
    if (size == 4) {
        out->size = 4;
        out->flags = IF_WIDE;
        if (len >= 4) {
            decode32(hw1, (uint16_t)(bytes[2] | (bytes[3] << 8)), out);
        }
        return;
    }
    out->size = 2;
    decode16(hw1, out);
    if (out->dst & PC_BIT) { /* a 16-bit write to the PC not already a branch */
        out->flags |= IF_CONTROL;
    }
}
