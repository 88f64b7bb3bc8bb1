# Arm MPS2 AN500 (Cortex-M7, double-precision FPU, 25 MHz) as emulated by qemu-system-arm -M mps2-an500.
BOARD := mps2-an500
ELF_NAME := aidge_mps2_an500.elf
CPU_FLAGS := -mcpu=cortex-m7 -mthumb -mfpu=fpv5-d16 -mfloat-abi=hard
HAL_HEADER := mps2xx_hal.h
QEMU_MACHINE := mps2-an500
# ceil(log2(1e9 / 25 MHz)): one emulated instruction = 64 ns = 1.6 SysTick ticks.
ICOUNT_SHIFT := 6
