/* Linker script of the test firmware, run through the C preprocessor first
 * (arm-none-eabi-gcc -E -P -x c), so one file serves every board and variant.
 *
 * LINK_OUTSIDE_FLASH moves the image to 0x30000000, where QEMU's mps2/netduino machines
 * map no memory at all: the flasher must notice that the write did not stick.
 */
#if defined(BOARD_MPS2_AN386)
#define FLASH_ORIGIN 0x00000000
#define FLASH_LENGTH 4M
#define RAM_ORIGIN 0x20000000
#define RAM_LENGTH 4M
#elif defined(BOARD_NETDUINOPLUS2)
#define FLASH_ORIGIN 0x08000000
#define FLASH_LENGTH 1M
#define RAM_ORIGIN 0x20000000
#define RAM_LENGTH 128K
#endif

#if defined(LINK_OUTSIDE_FLASH)
#undef FLASH_ORIGIN
#define FLASH_ORIGIN 0x30000000
#endif

MEMORY
{
  FLASH (rx)  : ORIGIN = FLASH_ORIGIN, LENGTH = FLASH_LENGTH
  RAM   (rwx) : ORIGIN = RAM_ORIGIN,   LENGTH = RAM_LENGTH
}

ENTRY(Reset_Handler)

SECTIONS
{
  .isr_vector : { KEEP(*(.isr_vector)) } > FLASH
  .text : { *(.text*) *(.rodata*) . = ALIGN(4); } > FLASH
  .data : { _sdata = .; *(.data*) . = ALIGN(4); _edata = .; } > RAM AT > FLASH
  _sidata = LOADADDR(.data);
  .bss (NOLOAD) : { _sbss = .; *(.bss*) *(COMMON) . = ALIGN(4); _ebss = .; } > RAM
  _estack = ORIGIN(RAM) + LENGTH(RAM);
  /DISCARD/ : { *(.ARM.exidx*) *(.ARM.attributes) *(.comment) }
}
