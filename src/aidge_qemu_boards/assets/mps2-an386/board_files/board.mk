# Arm MPS2 AN386 (Cortex-M4F, 25 MHz) as emulated by qemu-system-arm -M mps2-an386.
BOARD := mps2-an386
ELF_NAME := aidge_mps2_an386.elf
CPU_FLAGS := -mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard
HAL_HEADER := mps2xx_hal.h
QEMU_MACHINE := mps2-an386
# ceil(log2(1e9 / 25 MHz)): one emulated instruction = 64 ns = 1.6 SysTick ticks.
ICOUNT_SHIFT := 6
