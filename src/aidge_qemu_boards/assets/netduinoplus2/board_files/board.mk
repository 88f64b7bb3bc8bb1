# Netduino Plus 2 (STM32F405RG, Cortex-M4F, 168 MHz) as emulated by qemu-system-arm -M netduinoplus2.
BOARD := netduinoplus2
ELF_NAME := aidge_netduinoplus2.elf
CPU_FLAGS := -mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard
HAL_HEADER := stm32f4xx_hal.h
QEMU_MACHINE := netduinoplus2
# ceil(log2(1e9 / 168 MHz)): one emulated instruction = 8 ns = 1.344 SysTick ticks.
ICOUNT_SHIFT := 3
