/*
 * cmsis_compiler.h -- the subset of CMSIS-Core compiler intrinsics the Aidge Cortex-M
 * kernels use (dnn/include/utils/cpp/macs.hpp includes <cmsis_compiler.h>), plus the
 * barrier/interrupt helpers of this BSP. GCC only. The SIMD intrinsics need the DSP
 * extension (Cortex-M4F and Cortex-M55 both have it); semantics follow the Armv7-M/
 * Armv8-M ARM (SXTB16, UXTB16, SMLAD, SMLALD, ...).
 */
#ifndef AIDGE_QEMU_CMSIS_COMPILER_H
#define AIDGE_QEMU_CMSIS_COMPILER_H

#include <stdint.h>

#ifndef __ASM
#define __ASM __asm
#endif
#ifndef __INLINE
#define __INLINE inline
#endif
#ifndef __STATIC_INLINE
#define __STATIC_INLINE static inline
#endif
#ifndef __STATIC_FORCEINLINE
#define __STATIC_FORCEINLINE __attribute__((always_inline)) static inline
#endif
#ifndef __NO_RETURN
#define __NO_RETURN __attribute__((__noreturn__))
#endif
#ifndef __USED
#define __USED __attribute__((used))
#endif
#ifndef __WEAK
#define __WEAK __attribute__((weak))
#endif
#ifndef __PACKED
#define __PACKED __attribute__((packed, aligned(1)))
#endif
#ifndef __ALIGNED
#define __ALIGNED(x) __attribute__((aligned(x)))
#endif
#ifndef __RESTRICT
#define __RESTRICT __restrict
#endif

#if !defined(__ARM_FEATURE_DSP) || (__ARM_FEATURE_DSP != 1)
#error "cmsis_compiler.h: the Aidge Cortex-M kernels need the DSP extension (M4F/M7/M33/M55)."
#endif

/* ---- barriers and interrupt masking ---- */
__STATIC_FORCEINLINE void __NOP(void) { __ASM volatile("nop"); }
__STATIC_FORCEINLINE void __WFI(void) { __ASM volatile("wfi"); }
__STATIC_FORCEINLINE void __DSB(void) { __ASM volatile("dsb 0xF" ::: "memory"); }
__STATIC_FORCEINLINE void __ISB(void) { __ASM volatile("isb 0xF" ::: "memory"); }
__STATIC_FORCEINLINE void __DMB(void) { __ASM volatile("dmb 0xF" ::: "memory"); }
__STATIC_FORCEINLINE void __enable_irq(void) { __ASM volatile("cpsie i" ::: "memory"); }
__STATIC_FORCEINLINE void __disable_irq(void) { __ASM volatile("cpsid i" ::: "memory"); }

__STATIC_FORCEINLINE uint32_t __get_PRIMASK(void)
{
    uint32_t result;
    __ASM volatile("mrs %0, primask" : "=r"(result)::"memory");
    return result;
}

__STATIC_FORCEINLINE void __set_PRIMASK(uint32_t priMask)
{
    __ASM volatile("msr primask, %0" ::"r"(priMask) : "memory");
}

/* ---- bit manipulation ---- */
__STATIC_FORCEINLINE uint32_t __ROR(uint32_t op1, uint32_t op2)
{
    op2 %= 32U;
    return (op2 == 0U) ? op1 : (op1 >> op2) | (op1 << (32U - op2));
}

__STATIC_FORCEINLINE uint32_t __REV(uint32_t value) { return __builtin_bswap32(value); }

__STATIC_FORCEINLINE uint8_t __CLZ(uint32_t value)
{
    return (value == 0U) ? 32U : (uint8_t)__builtin_clz(value);
}

/* ---- saturation (immediate bit position, as in CMSIS) ---- */
#define __SSAT(ARG1, ARG2)                                                             \
    __extension__({                                                                    \
        int32_t __RES, __ARG1 = (ARG1);                                                \
        __ASM volatile("ssat %0, %1, %2" : "=r"(__RES) : "I"(ARG2), "r"(__ARG1) : "cc"); \
        __RES;                                                                         \
    })

#define __USAT(ARG1, ARG2)                                                             \
    __extension__({                                                                    \
        uint32_t __RES;                                                                \
        int32_t __ARG1 = (ARG1);                                                       \
        __ASM volatile("usat %0, %1, %2" : "=r"(__RES) : "I"(ARG2), "r"(__ARG1) : "cc"); \
        __RES;                                                                         \
    })

/* ---- DSP SIMD ---- */
/* Sign-extend bytes 0 and 2 into two signed halfwords. */
__STATIC_FORCEINLINE uint32_t __SXTB16(uint32_t op1)
{
    uint32_t result;
    __ASM("sxtb16 %0, %1" : "=r"(result) : "r"(op1));
    return result;
}

/* Zero-extend bytes 0 and 2 into two unsigned halfwords. */
__STATIC_FORCEINLINE uint32_t __UXTB16(uint32_t op1)
{
    uint32_t result;
    __ASM("uxtb16 %0, %1" : "=r"(result) : "r"(op1));
    return result;
}

__STATIC_FORCEINLINE uint32_t __SXTAB16(uint32_t op1, uint32_t op2)
{
    uint32_t result;
    __ASM("sxtab16 %0, %1, %2" : "=r"(result) : "r"(op1), "r"(op2));
    return result;
}

__STATIC_FORCEINLINE uint32_t __UXTAB16(uint32_t op1, uint32_t op2)
{
    uint32_t result;
    __ASM("uxtab16 %0, %1, %2" : "=r"(result) : "r"(op1), "r"(op2));
    return result;
}

/* Dual 16x16 signed multiply, both products added to a 32-bit accumulator. */
__STATIC_FORCEINLINE uint32_t __SMLAD(uint32_t op1, uint32_t op2, uint32_t op3)
{
    uint32_t result;
    __ASM volatile("smlad %0, %1, %2, %3" : "=r"(result) : "r"(op1), "r"(op2), "r"(op3));
    return result;
}

/* Dual 16x16 signed multiply, both products added to a 64-bit accumulator. */
__STATIC_FORCEINLINE uint64_t __SMLALD(uint32_t op1, uint32_t op2, uint64_t acc)
{
    union {
        uint32_t w32[2];
        uint64_t w64;
    } llr;
    llr.w64 = acc;
    __ASM volatile("smlald %0, %1, %2, %3"
                   : "=r"(llr.w32[0]), "=r"(llr.w32[1])
                   : "r"(op1), "r"(op2), "0"(llr.w32[0]), "1"(llr.w32[1]));
    return llr.w64;
}

__STATIC_FORCEINLINE uint32_t __SMUAD(uint32_t op1, uint32_t op2)
{
    uint32_t result;
    __ASM volatile("smuad %0, %1, %2" : "=r"(result) : "r"(op1), "r"(op2));
    return result;
}

__STATIC_FORCEINLINE int32_t __QADD(int32_t op1, int32_t op2)
{
    int32_t result;
    __ASM volatile("qadd %0, %1, %2" : "=r"(result) : "r"(op1), "r"(op2));
    return result;
}

__STATIC_FORCEINLINE int32_t __QSUB(int32_t op1, int32_t op2)
{
    int32_t result;
    __ASM volatile("qsub %0, %1, %2" : "=r"(result) : "r"(op1), "r"(op2));
    return result;
}

#define __PKHBT(ARG1, ARG2, ARG3)                                                      \
    ((((uint32_t)(ARG1)) & 0x0000FFFFUL) | ((((uint32_t)(ARG2)) << (ARG3)) & 0xFFFF0000UL))
#define __PKHTB(ARG1, ARG2, ARG3)                                                      \
    ((((uint32_t)(ARG1)) & 0xFFFF0000UL) | ((((uint32_t)(ARG2)) >> (ARG3)) & 0x0000FFFFUL))

#endif /* AIDGE_QEMU_CMSIS_COMPILER_H */
