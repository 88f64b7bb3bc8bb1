/* stm32f4xx_hal.h -- the HAL header the generated code includes for hal_board "stm32f4".
 * Not ST's HAL: the QEMU board shim with the same names the Aidge firmware uses. */
#ifndef STM32F4XX_HAL_H
#define STM32F4XX_HAL_H
#include "aidge_qemu_hal.h"
#endif
