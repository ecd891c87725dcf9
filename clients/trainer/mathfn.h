// mathfn.h: exp, log and tanh from basic IEEE operations only, so the bits of
// the numeric contract do not depend on the libm version. Accuracy ~1-2 ulp.
#ifndef TR_MATHFN_H
#define TR_MATHFN_H

#include <stdint.h>
#include <string.h>

// The CUDA path compiles the same functions for the device.
#ifdef __CUDACC__
#define TR_MATH static inline __host__ __device__
#else
#define TR_MATH static inline __attribute__((always_inline))
#endif

TR_MATH float tr_bits2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
TR_MATH uint32_t tr_f2bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

// c ? a : b through the bits: GCC keeps a ?: whose operand then feeds a
// float-to-int conversion or may trap as a branch, which stops a loop from
// vectorising; masks do not. Same result as ?: for every input.
TR_MATH float tr_select(int c, float a, float b) {
    uint32_t m = 0u - (uint32_t)(c != 0);
    return tr_bits2f((tr_f2bits(a) & m) | (tr_f2bits(b) & ~m));
}

// 2^n for n in [-126, 127].
TR_MATH float tr_pow2i(int n) { return tr_bits2f((uint32_t)(n + 127) << 23); }

// e^x: x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite split), degree-7 Taylor for
// e^r. Branch-free (tr_select) so that GCC vectorises loops that call it;
// vector lanes perform the same IEEE operations as scalar code, so the bits
// are the same either way. x is clamped to [-86, 88.7]: results below e^-86
// (4.5e-38) come out as e^-86, which no caller can tell from 0 after adding
// it to a sum of at least 1.
TR_MATH float tr_expf(float x) {
    float xc = tr_select(x < -86.0f, -86.0f, x);
    xc = tr_select(xc > 88.7f, 88.7f, xc);
    float kf = xc * 1.44269504f;
    int n = (int)(kf + __builtin_copysignf(0.5f, kf)); // round half away from zero
    float r = xc - (float)n * 0.693145751953125f;
    r = r - (float)n * 1.428606765330187e-06f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
              r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    float y = p * tr_pow2i(n - 1) * 2.0f; // n - 1 >= -125 keeps 2^(n-1) normal
    y = tr_select(x > 88.72283f, tr_bits2f(0x7f800000u), y);
    return tr_select(x != x, x, y);
}

// ln x for x > 0: x = m*2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s), s = (m-1)/(m+1).
TR_MATH float tr_logf(float x) {
    if (x != x || x < 0.0f) return tr_bits2f(0x7fc00000u);
    if (x == 0.0f) return tr_bits2f(0xff800000u);
    uint32_t u = tr_f2bits(x);
    if (u >= 0x7f800000u) return x; // +inf
    int e = 0;
    if (u < 0x00800000u) { x *= 8388608.0f; u = tr_f2bits(x); e = -23; } // subnormal
    e += (int)(u >> 23) - 127;
    float m = tr_bits2f((u & 0x007fffffu) | 0x3f800000u); // [1, 2)
    if (m > 1.41421356f) { m *= 0.5f; e += 1; }
    float s = (m - 1.0f) / (m + 1.0f);
    float s2 = s * s;
    float lm = 2.0f * s * (1.0f + s2 * (0.33333334f + s2 * (0.2f + s2 * (0.14285715f + s2 * 0.11111111f))));
    return (float)e * 0.693145751953125f + ((float)e * 1.428606765330187e-06f + lm);
}

// tanh x = sign(x) (1 - e^{-2|x|}) / (1 + e^{-2|x|}); |x| >= 9 rounds to +-1.
TR_MATH float tr_tanhf(float x) {
    float ax = __builtin_fabsf(x);
    ax = tr_select(ax > 9.0f, 9.0f, ax);
    float t = tr_expf(-2.0f * ax);
    float y = (1.0f - t) / (1.0f + t);
    return __builtin_copysignf(y, x);
}

// Double-precision cos, sin, exp and log for tables built once (the DCT
// bases, the rotary embedding), not on a hot path: series on reduced
// arguments, + - * / only, so every platform builds the same tables.
TR_MATH double tr_cos(double x) {
    const double pi = 3.14159265358979323846;
    // reduce to [0, pi]: cos is even and 2*pi periodic
    if (x < 0) x = -x;
    double k = (double)(long long)(x / (2.0 * pi));
    x -= k * 2.0 * pi;
    if (x > pi) x = 2.0 * pi - x;
    // cos(x) = -cos(pi - x); use the smaller argument
    double sign = 1.0;
    if (x > pi / 2) { x = pi - x; sign = -1.0; }
    double x2 = x * x, term = 1.0, sum = 1.0;
    for (int i = 1; i < 14; i++) {
        term *= -x2 / (double)((2 * i - 1) * (2 * i));
        sum += term;
    }
    return sign * sum;
}

TR_MATH double tr_sin(double x) {
    const double pi = 3.14159265358979323846;
    double sign = 1.0;
    if (x < 0) { x = -x; sign = -1.0; }
    double k = (double)(long long)(x / (2.0 * pi));
    x -= k * 2.0 * pi;
    if (x > pi) { x -= pi; sign = -sign; } // sin(x) = -sin(x - pi)
    if (x > pi / 2) x = pi - x;
    double x2 = x * x, term = x, sum = x;
    for (int i = 1; i < 14; i++) {
        term *= -x2 / (double)((2 * i) * (2 * i + 1));
        sum += term;
    }
    return sign * sum;
}

// e^x for |x| < 700: x = n ln2 + r, |r| <= ln2/2, Taylor to 22 terms.
TR_MATH double tr_exp_d(double x) {
    const double ln2 = 0.69314718055994530942;
    long long n = (long long)(x / ln2 + (x < 0 ? -0.5 : 0.5));
    double r = x - (double)n * ln2, term = 1.0, sum = 1.0;
    for (int i = 1; i < 22; i++) {
        term *= r / (double)i;
        sum += term;
    }
    for (; n > 0; n--) sum *= 2.0;
    for (; n < 0; n++) sum *= 0.5;
    return sum;
}

// ln x for x > 0: x = m 2^e with m in [1, 2), ln m = 2 atanh((m-1)/(m+1)).
TR_MATH double tr_log_d(double x) {
    const double ln2 = 0.69314718055994530942;
    int e = 0;
    while (x >= 2.0) { x *= 0.5; e++; }
    while (x < 1.0) { x *= 2.0; e--; }
    double s = (x - 1.0) / (x + 1.0), s2 = s * s, term = s, sum = 0.0;
    for (int i = 0; i < 40; i++) {
        sum += term / (double)(2 * i + 1);
        term *= s2;
    }
    return (double)e * ln2 + 2.0 * sum;
}

#endif
