/* The compiled block of the compare kernel (gate/comparator/kernels_fused.py loads it with ctypes;
 * no Python API is used, so one build serves every CPython version).
 *
 * gate_compare_block computes, in one pass over a block of two float32 or two float16 arrays, what
 * gate.comparator.kernels_blocks.BlockDiffs computes with about twenty numpy passes, element for
 * element equal to it (tests/test_kernels_fused.py):
 *   absdiff[i] = |x - y|,  reldiff[i] = absdiff[i] / |y == 0 ? eps : y|   (float32 arithmetic)
 * with x, y the float32 values of a[i], b[i] (float16 converted exactly, as numpy converts it), and
 * their maxima, the number of zeros in b, the number of elements with absdiff >= lo_abs and
 * reldiff >= lo_rel (the caller's thresholds, the smallest float32 numpy calls greater than atol and
 * rtol), the largest absdiff among those, the indices numpy's argmax gives, and the float64 sums
 * of absdiff and reldiff by numpy's pairwise summation (DOUBLE_pairwise_sum of
 * numpy/_core/src/umath/loops_utils.h.src: blocks of at most 128 elements with 8 accumulators,
 * halves rounded down to a multiple of 8), the order numpy sums a float64 array in.
 *
 * Comparisons and maxima are taken on the bits: for the non-negative values here (the sign bit is
 * cleared) the unsigned order of the bits is the order of the values, and a NaN is above every
 * other value. A block whose differences hold a NaN returns 1 and the caller takes the numpy path
 * (NaN and infinities on both sides need the full definition); otherwise 0.
 *
 * Built with -ffp-contract=off (no fused multiply-add) and without -ffast-math: every float
 * operation is the IEEE 754 one numpy performs. No float value is subnormal on the float16 path
 * (float16 values are normal float32), so a thread's flush-to-zero setting cannot change it.
 */
#include <stdint.h>
#include <string.h>

#define NAN_BITS 0x7f800000u /* bits above this (sign cleared) are a NaN */

/* The version of this file's functions and their arguments, checked by kernels_fused at load (a
 * library built from another version of this file is not used). Change it with any signature. */
#define GATE_FUSED_ABI 6
int gate_fused_abi(void) { return GATE_FUSED_ABI; }

#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__)
#define GATE_X86 1
#include <immintrin.h>
#define GATE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GATE_CLONES
#endif

static inline float f_of(uint32_t bits) {
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint32_t b_of(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return bits;
}

/* IEEE 754 binary16 bits -> binary32 bits, as numpy's npy_halfbits_to_floatbits: normal values
 * move their exponent (bias 15 -> 127) and fraction; subnormals are fraction * 2**-24 (exact: both
 * factors and the product are normal float32); infinities and NaN keep their payload. Branch-free
 * selects, so the loop vectorises. */
static inline uint32_t half_bits(uint32_t h) {
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exponent = h & 0x7c00u;
    uint32_t fraction = h & 0x03ffu;
    uint32_t normal = (((h & 0x7fffu) << 13) + 0x38000000u) | sign;
    uint32_t special = sign | 0x7f800000u | (fraction << 13);
    uint32_t subnormal = b_of((float)(int32_t)fraction * 0x1p-24f) | sign;
    uint32_t is_special = 0u - (uint32_t)(exponent == 0x7c00u);
    uint32_t is_subnormal = 0u - (uint32_t)(exponent == 0);
    return (special & is_special) | (subnormal & is_subnormal) | (normal & ~(is_special | is_subnormal));
}

/* The running maxima and counts of a block's pass. */
typedef struct {
    uint32_t top, top_rel, zeros, over_count, worst;
    int bracketed;           /* 1: also count against t (order-statistics brackets) */
    int k;                   /* the thresholds counted of each difference: 1 to 4 */
    uint32_t t[8], c[8];     /* thresholds on absdiff (0-3) and reldiff (4-7) bits; counts below */
} Acc;

/* One element of the pass: absdiff, reldiff (bits, sign cleared), maxima and counts. */
#define ELEMENT                                                                                \
    uint32_t db = b_of(f_of(x[i]) - f_of(y[i])) & 0x7fffffffu;                                 \
    uint32_t ya = y[i] & 0x7fffffffu;                                                          \
    uint32_t zero = ya == 0;                                                                   \
    uint32_t qb = b_of(f_of(db) / f_of(zero ? eps_bits : ya)) & 0x7fffffffu;                  \
    absdiff[i] = db;                                                                           \
    reldiff[i] = qb;                                                                           \
    top = db > top ? db : top;                                                                 \
    top_rel = qb > top_rel ? qb : top_rel;                                                     \
    zeros += zero;                                                                             \
    uint32_t over = (uint32_t)(db >= lo_abs) & (uint32_t)(qb >= lo_rel);                       \
    over_count += over;                                                                        \
    uint32_t over_value = db & (0u - over);                                                    \
    worst = over_value > worst ? over_value : worst;

/* absdiff, reldiff (bits, sign cleared) of n elements from the float32 bits x, y, accumulated into
 * acc; with acc->bracketed, also the counts of each difference below its bracket's thresholds (the
 * same pass, no second read of the block). The loops have no branch, so they vectorise.
 *
 * The counts compare signed (one instruction on AVX2, unlike unsigned comparisons): a non-NaN
 * difference's bits are at most 0x7f800000, and a threshold clamped to 0x7fffffff counts the same.
 * A threshold of 0 counts nothing: gate_compare_block moves the others of each difference to its
 * first acc->k slots (t[0..k) for absdiff, t[4..4+k) for reldiff), and the loop counts k of each
 * (1 to 4): the inclusive bracket needs one, the point one or two, the exclusive three. */
#define COUNT1 c0 += (int32_t)db < t0; c4 += (int32_t)qb < t4;
#define COUNT2 COUNT1 c1 += (int32_t)db < t1; c5 += (int32_t)qb < t5;
#define COUNT3 COUNT2 c2 += (int32_t)db < t2; c6 += (int32_t)qb < t6;
#define COUNT4 COUNT3 c3 += (int32_t)db < t3; c7 += (int32_t)qb < t7;
GATE_CLONES
static void pass_words(const uint32_t *restrict x, const uint32_t *restrict y, int64_t n, uint32_t eps_bits,
                       uint32_t lo_abs, uint32_t lo_rel, uint32_t *restrict absdiff, uint32_t *restrict reldiff,
                       Acc *acc) {
    uint32_t top = acc->top, top_rel = acc->top_rel, zeros = acc->zeros;
    uint32_t over_count = acc->over_count, worst = acc->worst;
    if (acc->bracketed) {
        int32_t t[8];
        for (int j = 0; j < 8; j++) {
            t[j] = (int32_t)(acc->t[j] > 0x7fffffffu ? 0x7fffffffu : acc->t[j]);
        }
        int32_t t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3], t4 = t[4], t5 = t[5], t6 = t[6], t7 = t[7];
        uint32_t c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0;
        if (acc->k == 1) {
            for (int64_t i = 0; i < n; i++) {
                ELEMENT
                COUNT1
            }
        } else if (acc->k == 2) {
            for (int64_t i = 0; i < n; i++) {
                ELEMENT
                COUNT2
            }
        } else if (acc->k == 3) {
            for (int64_t i = 0; i < n; i++) {
                ELEMENT
                COUNT3
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                ELEMENT
                COUNT4
            }
        }
        acc->c[0] += c0;
        acc->c[1] += c1;
        acc->c[2] += c2;
        acc->c[3] += c3;
        acc->c[4] += c4;
        acc->c[5] += c5;
        acc->c[6] += c6;
        acc->c[7] += c7;
    } else {
        for (int64_t i = 0; i < n; i++) {
            ELEMENT
        }
    }
    acc->top = top;
    acc->top_rel = top_rel;
    acc->zeros = zeros;
    acc->over_count = over_count;
    acc->worst = worst;
}

GATE_CLONES
static void half_to_words(const uint16_t *restrict h, uint32_t *restrict out, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        out[i] = half_bits(h[i]);
    }
}

#if defined(GATE_X86)
/* The same conversion by the F16C instruction (exact for every value but NaN payloads, which never
 * reach a result: a NaN input makes the block take numpy's passes). Used only where the CPU has it
 * and the thread does not treat subnormal inputs as zero (MXCSR.DAZ), so the result is numpy's. */
__attribute__((target("avx2,f16c")))
static void half_to_words_f16c(const uint16_t *restrict h, uint32_t *restrict out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i packed = _mm_loadu_si128((const __m128i *)(h + i));
        _mm256_storeu_ps((float *)(out + i), _mm256_cvtph_ps(packed));
    }
    for (; i < n; i++) {
        out[i] = half_bits(h[i]);
    }
}

static int f16c_usable(void) {
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2") && !(_mm_getcsr() & 0x0040u);
}
#else
static void half_to_words_f16c(const uint16_t *h, uint32_t *out, int64_t n) { half_to_words(h, out, n); }
static int f16c_usable(void) { return 0; }
#endif

/* The kept values of one block of an order-statistics bracket (kernels_select.Bracket): of the n
 * float32 differences d of gate_compare_block (non-negative, no NaN: their bits order as their
 * values), those with lo <= bits < hi, copied in order to out (room for n); returns how many.
 * lo <= v < hi is one unsigned comparison, v - lo < hi - lo (lo <= hi).
 * method: 0 the fastest this CPU has; 1 scalar, 2 AVX2, 3 AVX-512 (for tests; one the CPU lacks:
 * scalar). The vector versions compress 8 or 16 values at a time and store them whole at out + k:
 * k <= i, so a store ends at most at i + 16 <= n, within out. */
static int64_t keep_scalar(const uint32_t *restrict d, int64_t n, uint32_t lo, uint32_t width,
                           uint32_t *restrict out) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) { /* a store per element, no branch to mispredict */
        uint32_t v = d[i];
        out[k] = v;
        k += v - lo < width;
    }
    return k;
}

#if defined(GATE_X86)
static uint8_t compress_lanes[256][8]; /* mask -> the lanes of its set bits, in order */

__attribute__((constructor)) static void compress_lanes_init(void) {
    for (int mask = 0; mask < 256; mask++) {
        int k = 0;
        for (int lane = 0; lane < 8; lane++) {
            if (mask & (1 << lane)) {
                compress_lanes[mask][k++] = (uint8_t)lane;
            }
        }
        for (; k < 8; k++) {
            compress_lanes[mask][k] = 0;
        }
    }
}

__attribute__((target("avx2")))
static int64_t keep_avx2(const uint32_t *restrict d, int64_t n, uint32_t lo, uint32_t width, uint32_t *restrict out) {
    /* AVX2 compares signed only: x < w unsigned is (x ^ 2**31) < (w ^ 2**31) signed. */
    const __m256i bias = _mm256_set1_epi32((int)0x80000000u);
    const __m256i vlo = _mm256_set1_epi32((int)lo);
    const __m256i vw = _mm256_xor_si256(_mm256_set1_epi32((int)width), bias);
    int64_t k = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(d + i));
        __m256i x = _mm256_xor_si256(_mm256_sub_epi32(v, vlo), bias);
        int mask = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(vw, x)));
        __m256i lanes = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)compress_lanes[mask]));
        _mm256_storeu_si256((__m256i *)(out + k), _mm256_permutevar8x32_epi32(v, lanes));
        k += __builtin_popcount((unsigned)mask);
    }
    return k + keep_scalar(d + i, n - i, lo, width, out + k); /* the last few */
}

__attribute__((target("avx512f")))
static int64_t keep_avx512(const uint32_t *restrict d, int64_t n, uint32_t lo, uint32_t width, uint32_t *restrict out) {
    const __m512i vlo = _mm512_set1_epi32((int)lo), vw = _mm512_set1_epi32((int)width);
    int64_t k = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_loadu_si512((const void *)(d + i));
        __mmask16 mask = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(v, vlo), vw);
        /* compress into a register, then a plain store (a compressing store is slow on some CPUs) */
        _mm512_storeu_si512((void *)(out + k), _mm512_maskz_compress_epi32(mask, v));
        k += __builtin_popcount((unsigned)mask);
    }
    return k + keep_scalar(d + i, n - i, lo, width, out + k); /* the last few */
}
#endif

#define SUB 2048 /* float16 elements converted at a time (2 x 8 KiB on the stack, in L1) */

static void pass_half(const uint16_t *a, const uint16_t *b, int64_t n, uint32_t eps_bits, uint32_t lo_abs,
                      uint32_t lo_rel, uint32_t *absdiff, uint32_t *reldiff, Acc *acc) {
    uint32_t x[SUB], y[SUB];
    int f16c = f16c_usable();
    for (int64_t start = 0; start < n; start += SUB) {
        int64_t m = n - start < SUB ? n - start : SUB;
        if (f16c) {
            half_to_words_f16c(a + start, x, m);
            half_to_words_f16c(b + start, y, m);
        } else {
            half_to_words(a + start, x, m);
            half_to_words(b + start, y, m);
        }
        pass_words(x, y, m, eps_bits, lo_abs, lo_rel, absdiff + start, reldiff + start, acc);
    }
}

/* numpy's pairwise float64 sum of at most 128 float32 values (see the top of this file). */
GATE_CLONES
static double leaf_sum(const float *a, int64_t n) {
    if (n < 8) {
        double res = 0.;
        for (int64_t i = 0; i < n; i++) {
            res += (double)a[i];
        }
        return res;
    }
    double r[8];
    int64_t i;
    for (int j = 0; j < 8; j++) {
        r[j] = (double)a[j];
    }
    for (i = 8; i < n - (n % 8); i += 8) {
        for (int j = 0; j < 8; j++) {
            r[j] += (double)a[i + j];
        }
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) {
        res += (double)a[i];
    }
    return res;
}

/* numpy's pairwise float64 sum of n float32 values: halves (rounded down to a multiple of 8) down
 * to blocks of at most 128. */
/* The same sum of exactly 512 values: numpy splits them into four leaves of 128, summed here side by
 * side (four independent chains of additions instead of one, same operations in the same order). */
GATE_CLONES
static double sum512(const float *a) {
    double r[4][8];
    for (int k = 0; k < 4; k++) {
        for (int j = 0; j < 8; j++) {
            r[k][j] = (double)a[128 * k + j];
        }
    }
    for (int i = 8; i < 128; i += 8) {
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < 8; j++) {
                r[k][j] += (double)a[128 * k + i + j];
            }
        }
    }
    double leaf[4];
    for (int k = 0; k < 4; k++) {
        leaf[k] = ((r[k][0] + r[k][1]) + (r[k][2] + r[k][3])) + ((r[k][4] + r[k][5]) + (r[k][6] + r[k][7]));
    }
    return (leaf[0] + leaf[1]) + (leaf[2] + leaf[3]);
}

static double pairwise_sum(const float *a, int64_t n) {
    if (n <= 128) {
        return leaf_sum(a, n);
    }
    if (n == 512) {
        return sum512(a);
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

/* The first index of `value` in bits[0, n) (it is there). */
static int64_t first_index(const uint32_t *bits, int64_t n, uint32_t value) {
    for (int64_t i = 0; i < n; i++) {
        if (bits[i] == value) {
            return i;
        }
    }
    return -1;
}

/* half: 1 for float16 inputs, 0 for float32. a, b: n >= 1 elements each, contiguous, native byte
 * order. absdiff, reldiff: n float32 each (written). eps_bits: the float32 added to a zero of the
 * reference. lo_abs, lo_rel: float32 bits of the thresholds (0xffffffff: count nothing).
 * u (5 uint32): max absdiff bits, max reldiff bits, zeros in b, elements over both thresholds,
 * max absdiff bits among those. idx (2 int64): argmax of absdiff, argmax of absdiff among the
 * elements over both thresholds (-1 if none). sums (2 float64): pairwise sums of absdiff, reldiff.
 * bt (8 uint32, or NULL): bracket thresholds on absdiff (0-3) and reldiff (4-7) bits; bcounts (8
 * int64): the elements of each difference below each (n < 2**32). Returns 1 (nothing but u[0],
 * u[1] valid) when a difference is NaN, else 0. */
int gate_compare_block(int half, const void *a, const void *b, int64_t n, uint32_t eps_bits, uint32_t lo_abs,
                       uint32_t lo_rel, float *absdiff, float *reldiff, uint32_t *u, int64_t *idx, double *sums,
                       const uint32_t *bt, int64_t *bcounts) {
    uint32_t *ad = (uint32_t *)absdiff, *rd = (uint32_t *)reldiff;
    Acc acc;
    memset(&acc, 0, sizeof acc);
    int slot[8]; /* bt[j] is counted in acc.t[slot[j]] (-1: bt[j] == 0 counts nothing) */
    if (bt != NULL) {
        acc.bracketed = 1;
        int used[2] = {0, 0};
        for (int j = 0; j < 8; j++) {
            int side = j / 4;
            slot[j] = bt[j] ? 4 * side + used[side]++ : -1;
            if (slot[j] >= 0) {
                acc.t[slot[j]] = bt[j];
            }
        }
        int most = used[0] > used[1] ? used[0] : used[1];
        acc.k = most < 1 ? 1 : most;
    }
    if (half) {
        pass_half((const uint16_t *)a, (const uint16_t *)b, n, eps_bits, lo_abs, lo_rel, ad, rd, &acc);
    } else {
        pass_words((const uint32_t *)a, (const uint32_t *)b, n, eps_bits, lo_abs, lo_rel, ad, rd, &acc);
    }
    u[0] = acc.top;
    u[1] = acc.top_rel;
    u[2] = acc.zeros;
    u[3] = acc.over_count;
    u[4] = acc.worst;
    if (u[0] > NAN_BITS || u[1] > NAN_BITS) {
        return 1;
    }
    idx[0] = first_index(ad, n, u[0]);
    idx[1] = -1;
    if (u[3]) {
        if (ad[idx[0]] >= lo_abs && rd[idx[0]] >= lo_rel) {
            idx[1] = idx[0]; /* the first largest difference is over both: the worst of those too */
        } else {
            for (int64_t i = 0; i < n; i++) {
                if (ad[i] == u[4] && ad[i] >= lo_abs && rd[i] >= lo_rel) {
                    idx[1] = i;
                    break;
                }
            }
        }
    }
    sums[0] = 0. + pairwise_sum(absdiff, n);
    sums[1] = 0. + pairwise_sum(reldiff, n);
    if (bt != NULL) {
        for (int j = 0; j < 8; j++) {
            bcounts[j] = slot[j] >= 0 ? acc.c[slot[j]] : 0;
        }
    }
    return 0;
}

/* For tests: n float16 bits -> float32 by the integer formula (method 0) or F16C (method 1, where
 * usable; else the integer formula). */
void gate_convert_half(const uint16_t *h, float *out, int64_t n, int method) {
    if (method == 1 && f16c_usable()) {
        half_to_words_f16c(h, (uint32_t *)out, n);
    } else {
        half_to_words(h, (uint32_t *)out, n);
    }
}

int64_t gate_bracket_block(const uint32_t *d, int64_t n, uint32_t lo, uint32_t hi, uint32_t *out, int method) {
    uint32_t width = hi - lo;
#if defined(GATE_X86)
    if ((method == 0 || method == 3) && __builtin_cpu_supports("avx512f")) {
        return keep_avx512(d, n, lo, width, out);
    }
    if ((method == 0 || method == 2) && __builtin_cpu_supports("avx2")) {
        return keep_avx2(d, n, lo, width, out);
    }
#endif
    return keep_scalar(d, n, lo, width, out);
}

/* The elements of a and b (each n_total elements of itemsize 1, 2, 4 or 8 bytes, contiguous) at the
 * m positions p (each in [0, n_total)) copied to sa, sb: the order-statistics sample
 * (kernels_select.sample_positions). The positions are scattered over the whole arrays, so nearly
 * every read is a cache miss: the loads of DIST positions ahead are prefetched to have many in
 * flight (about 3x numpy's fancy indexing on a cold cache). */
#define DIST 64
#define GATHER(T)                                                                               \
    {                                                                                           \
        const T *x = (const T *)a, *y = (const T *)b;                                           \
        T *ox = (T *)sa, *oy = (T *)sb;                                                         \
        for (int64_t i = 0; i < m; i++) {                                                       \
            if (i + DIST < m) {                                                                 \
                __builtin_prefetch(x + p[i + DIST]);                                            \
                __builtin_prefetch(y + p[i + DIST]);                                            \
            }                                                                                   \
            ox[i] = x[p[i]];                                                                    \
            oy[i] = y[p[i]];                                                                    \
        }                                                                                       \
    }
void gate_gather(int itemsize, const void *a, const void *b, const int64_t *p, int64_t m, void *sa, void *sb) {
    switch (itemsize) {
    case 1: GATHER(uint8_t) break;
    case 2: GATHER(uint16_t) break;
    case 4: GATHER(uint32_t) break;
    default: GATHER(uint64_t) break;
    }
}
