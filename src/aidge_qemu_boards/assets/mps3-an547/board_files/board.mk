# Arm MPS3 AN547 (Corstone-300, Cortex-M55, 32 MHz) as emulated by qemu-system-arm -M mps3-an547.
BOARD := mps3-an547
ELF_NAME := aidge_mps3_an547.elf
CPU_FLAGS := -mcpu=cortex-m55 -mthumb -mfloat-abi=hard
HAL_HEADER := mps3xx_hal.h
QEMU_MACHINE := mps3-an547
# ceil(log2(1e9 / 32 MHz)): one emulated instruction = 32 ns = 1.024 SysTick ticks.
ICOUNT_SHIFT := 5
