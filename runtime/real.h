/* real.h: the floating-point type of CPU programs: float, or double when built with PLAIT_REAL_DOUBLE
 * (gradient checks against finite differences). */
#ifndef PLAIT_REAL_H
#define PLAIT_REAL_H

#ifdef PLAIT_REAL_DOUBLE
typedef double real;
#define REAL_NAME "f64"
#else
typedef float real;
#define REAL_NAME "f32"
#endif

#endif
