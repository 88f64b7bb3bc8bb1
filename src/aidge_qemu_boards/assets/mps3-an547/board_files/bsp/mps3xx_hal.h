/* mps3xx_hal.h -- the HAL header the generated code includes for hal_board "mps3". */
#ifndef MPS3XX_HAL_H
#define MPS3XX_HAL_H
#include "aidge_qemu_hal.h"
#endif
