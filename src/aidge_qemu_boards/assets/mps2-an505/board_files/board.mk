# Arm MPS2 AN505 (Cortex-M33 in an SSE-200 IoT kit, FPU, DSP, 20 MHz) as emulated by
# qemu-system-arm -M mps2-an505.
BOARD := mps2-an505
ELF_NAME := aidge_mps2_an505.elf
CPU_FLAGS := -mcpu=cortex-m33 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard
HAL_HEADER := mps2xx_hal.h
QEMU_MACHINE := mps2-an505
# ceil(log2(1e9 / 20 MHz)): one emulated instruction = 64 ns = 1.28 SysTick ticks.
ICOUNT_SHIFT := 6
