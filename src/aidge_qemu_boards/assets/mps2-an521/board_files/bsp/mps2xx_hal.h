/* mps2xx_hal.h -- the HAL header the generated code includes for hal_board "mps2". */
#ifndef MPS2XX_HAL_H
#define MPS2XX_HAL_H
#include "aidge_qemu_hal.h"
#endif
