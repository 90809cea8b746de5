/* half.h: 16-bit floating point numbers as checkpoints store them, IEEE binary16 (F16) and bfloat16
 * (BF16), read into double exactly and written from double rounded to the nearest (ties to even). */
#ifndef PLAIT_HALF_H
#define PLAIT_HALF_H

#include <stdint.h>

double half_f16_value(uint16_t bits);
double half_bf16_value(uint16_t bits);
uint16_t half_f16_bits(double x);
uint16_t half_bf16_bits(double x);

#endif
