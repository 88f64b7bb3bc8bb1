# Arm MPS2 AN521 (two Cortex-M33 in an SSE-200, FPU, DSP, 20 MHz) as emulated by
# qemu-system-arm -M mps2-an521. `make build` makes core 0's program; a heterogeneous export
# (its main.cpp defines AIDGE_DUAL_CORE) makes core 1's too (board_post.mk).
BOARD := mps2-an521
ELF_NAME := aidge_mps2_an521_core0.elf
CPU_FLAGS := -mcpu=cortex-m33 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard
HAL_HEADER := mps2xx_hal.h
QEMU_MACHINE := mps2-an521
# ceil(log2(1e9 / 20 MHz)): one emulated instruction = 64 ns = 1.28 SysTick ticks.
ICOUNT_SHIFT := 6
