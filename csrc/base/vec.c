/*
** vec.c: vector element types, similarity kernels, scalar quantization
** and the best-k list (vec.h says what each keeps).
**
** The float kernels are written once over RG_VLANES lanes with GCC's vector
** extensions (any SIMD width the target has, or scalar code where it has
** none; plain arrays with the same meaning for other compilers), with
** contraction into fused multiply-adds turned off for this file: the order
** of every addition is the code's, so the result is the same bits
** everywhere.  On x86-64 the kernels are also built for AVX2 and chosen at
** load time (target_clones); AVX2 without FMA computes exactly what SSE2
** does, only wider.
*/

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("fp-contract=off")
#endif
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"

#if defined(__GNUC__)
#define RG_VEXT 1
/* Lanes 0-7 and 8-15 as two vectors: one AVX register each, two SSE. */
typedef float vf8 __attribute__((vector_size(32)));
#endif

/* Builds a kernel for AVX2 beside the default, on x86-64 with GCC (not
** under the sanitizers, whose runtime must start before any resolver). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(RG_NO_CLONES)
#define RG_VCLONE __attribute__((target_clones("avx2", "default")))
#else
#define RG_VCLONE
#endif


/*
** {=====================================================================
** Types and names
** ======================================================================
*/
static const char *const tnames[RG_VT_COUNT] = {
  "float32", "float16", "int8", "uint8"
};
static const char *const dnames[RG_VD_COUNT] = {
  "cosine", "dotproduct", "euclidean"
};

static int name_is (const char *s, size_t n, const char *name) {
  size_t i;
  if (strlen(name) != n) return 0;
  for (i = 0; i < n; i++) {
    int c = (unsigned char)s[i];
    if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    if (c != name[i]) return 0;
  }
  return 1;
}

const char *rg_vtype_name (int t) {
  return t >= 0 && t < RG_VT_COUNT ? tnames[t] : "?";
}

int rg_vtype_parse (const char *s, size_t n) {
  int t;
  for (t = 0; t < RG_VT_COUNT; t++) if (name_is(s, n, tnames[t])) return t;
  return -1;
}

const char *rg_vdist_name (int d) {
  return d >= 0 && d < RG_VD_COUNT ? dnames[d] : "?";
}

int rg_vdist_parse (const char *s, size_t n) {
  int d;
  for (d = 0; d < RG_VD_COUNT; d++) if (name_is(s, n, dnames[d])) return d;
  return -1;
}

size_t rg_vtype_size (int t) {
  return t == RG_VT_FLOAT32 ? 4 : t == RG_VT_FLOAT16 ? 2 : 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Elements
** ======================================================================
*/
float rg_half_to_float (uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f,
           man = h & 0x3ff, bits;
  float f;
  if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);   /* inf, nan */
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (man << 13);
  else if (man == 0) bits = sign;
  else {                             /* subnormal: man * 2^-24, exact */
    f = (float)man * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t rg_float_to_half (float f) {
  uint32_t bits, sign, exp, man;
  memcpy(&bits, &f, 4);
  sign = (bits >> 16) & 0x8000;
  exp = (bits >> 23) & 0xff;
  man = bits & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp > 142) return (uint16_t)(sign | 0x7c00);           /* overflow */
  if (exp < 113) {                   /* a subnormal half, or zero */
    uint32_t shift, m, half, rest;
    if (exp < 102) return (uint16_t)sign;                    /* underflow */
    m = man | 0x800000;
    shift = 126 - exp;               /* 14 .. 24 */
    half = m >> shift;
    rest = m & ((1u << shift) - 1);
    if (rest > (1u << (shift - 1)) ||
        (rest == (1u << (shift - 1)) && (half & 1)))
      half++;
    return (uint16_t)(sign | half);
  } else {
    uint32_t h = ((exp - 112) << 10) | (man >> 13), rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;  /* may carry
                                                  into inf: right */
    return (uint16_t)(sign | h);
  }
}

int rg_vput (int t, void *dst, size_t i, double v) {
  switch (t) {
    case RG_VT_FLOAT32: {
      float f = (float)v;
      if (!isfinite(f)) return -1;
      ((float *)dst)[i] = f;
      return 0;
    }
    case RG_VT_FLOAT16: {
      float f = (float)v;
      uint16_t h;
      if (!isfinite(f)) return -1;
      h = rg_float_to_half(f);
      if ((h & 0x7c00) == 0x7c00) return -1;
      ((uint16_t *)dst)[i] = h;
      return 0;
    }
    case RG_VT_INT8:
      if (!(v >= -128 && v <= 127) || v != floor(v)) return -1;
      ((int8_t *)dst)[i] = (int8_t)v;
      return 0;
    default:
      if (!(v >= 0 && v <= 255) || v != floor(v)) return -1;
      ((uint8_t *)dst)[i] = (uint8_t)v;
      return 0;
  }
}

double rg_vget (int t, const void *src, size_t i) {
  switch (t) {
    case RG_VT_FLOAT32: return ((const float *)src)[i];
    case RG_VT_FLOAT16: return rg_half_to_float(((const uint16_t *)src)[i]);
    case RG_VT_INT8: return ((const int8_t *)src)[i];
    default: return ((const uint8_t *)src)[i];
  }
}

void rg_vwiden_f16 (const uint16_t *src, float *dst, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) dst[i] = rg_half_to_float(src[i]);
}
/* }===================================================================== */


/*
** {=====================================================================
** Kernels
** ======================================================================
*/
/* The lanes added in a fixed tree: 16 -> 8 -> 4 -> 2 -> 1 (inlined, so
** that each clone adds them in its own instruction set). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline float lanes_sum (const float *l) {
  float s8[8], s4[4], s2[2];
  int j;
  for (j = 0; j < 8; j++) s8[j] = l[j] + l[j + 8];
  for (j = 0; j < 4; j++) s4[j] = s8[j] + s8[j + 4];
  for (j = 0; j < 2; j++) s2[j] = s4[j] + s4[j + 2];
  return s2[0] + s2[1];
}

/*
** A float kernel: lanes 0-7 in `lo` and 8-15 in `hi` over every whole
** block of RG_VLANES elements, then the rest added into lanes 0, 1, ...
** one by one, then the lanes' fixed tree.  The plain version below means
** the same.
*/
#ifdef RG_VEXT
#define LOAD(v, p) memcpy(&(v), (p), sizeof(vf8))
#define FINISH(lo, hi, l) \
  do { memcpy((l), &(lo), sizeof(vf8)); memcpy((l) + 8, &(hi), sizeof(vf8)); \
  } while (0)

RG_VCLONE float rg_vdot_f32 (const float *a, const float *b, size_t n) {
  vf8 lo = { 0 }, hi = { 0 }, x0, x1, y0, y1;
  float l[RG_VLANES];
  size_t i, j;
  for (i = 0; i + RG_VLANES <= n; i += RG_VLANES) {
    LOAD(x0, a + i); LOAD(x1, a + i + 8);
    LOAD(y0, b + i); LOAD(y1, b + i + 8);
    lo += x0 * y0;
    hi += x1 * y1;
  }
  FINISH(lo, hi, l);
  for (j = 0; i < n; i++, j++) l[j] += a[i] * b[i];
  return lanes_sum(l);
}

RG_VCLONE float rg_vl2_f32 (const float *a, const float *b, size_t n) {
  vf8 lo = { 0 }, hi = { 0 }, x0, x1, y0, y1;
  float l[RG_VLANES];
  size_t i, j;
  for (i = 0; i + RG_VLANES <= n; i += RG_VLANES) {
    LOAD(x0, a + i); LOAD(x1, a + i + 8);
    LOAD(y0, b + i); LOAD(y1, b + i + 8);
    x0 -= y0;
    x1 -= y1;
    lo += x0 * x0;
    hi += x1 * x1;
  }
  FINISH(lo, hi, l);
  for (j = 0; i < n; i++, j++) {
    float d = a[i] - b[i];
    l[j] += d * d;
  }
  return lanes_sum(l);
}
#else
RG_VCLONE float rg_vdot_f32 (const float *a, const float *b, size_t n) {
  float l[RG_VLANES] = { 0 };
  size_t i;
  for (i = 0; i < n; i++) l[i % RG_VLANES] += a[i] * b[i];
  return lanes_sum(l);
}

RG_VCLONE float rg_vl2_f32 (const float *a, const float *b, size_t n) {
  float l[RG_VLANES] = { 0 };
  size_t i;
  for (i = 0; i < n; i++) {
    float d = a[i] - b[i];
    l[i % RG_VLANES] += d * d;
  }
  return lanes_sum(l);
}
#endif

/* Integer sums are exact, so any order gives the same result: blocks of
** 4096 products fit an int32 (255 * 255 * 4096 < 2^31). */
#define IBLOCK 4096
#define IKERNEL(name, T, EXPR)                                            \
  int64_t name (const T *a, const T *b, size_t n) {                       \
    int64_t total = 0;                                                    \
    size_t i = 0;                                                         \
    while (i < n) {                                                       \
      size_t end = n - i > IBLOCK ? i + IBLOCK : n;                       \
      int32_t acc = 0;                                                    \
      for (; i < end; i++) { int32_t x = a[i], y = b[i]; acc += EXPR; }   \
      total += acc;                                                       \
    }                                                                     \
    return total;                                                         \
  }
IKERNEL(rg_vdot_i8, int8_t, x * y)
IKERNEL(rg_vl2_i8, int8_t, (x - y) * (x - y))
IKERNEL(rg_vdot_u8, uint8_t, x * y)
IKERNEL(rg_vl2_u8, uint8_t, (x - y) * (x - y))

double rg_vnorm2 (int t, const void *a, size_t n) {
  switch (t) {
    case RG_VT_INT8: return (double)rg_vdot_i8(a, a, n);
    case RG_VT_UINT8: return (double)rg_vdot_u8(a, a, n);
    default: return rg_vdot_f32(a, a, n);
  }
}

void rg_vsums_of (int d, int t, const void *a, const void *b, size_t n,
                  double aa, double bb, rg_vsums *out) {
  out->aa = aa;
  out->bb = bb;
  if (d == RG_VD_EUCLIDEAN) {
    out->ab = t == RG_VT_INT8 ? (double)rg_vl2_i8(a, b, n)
            : t == RG_VT_UINT8 ? (double)rg_vl2_u8(a, b, n)
            : rg_vl2_f32(a, b, n);
    return;
  }
  out->ab = t == RG_VT_INT8 ? (double)rg_vdot_i8(a, b, n)
          : t == RG_VT_UINT8 ? (double)rg_vdot_u8(a, b, n)
          : rg_vdot_f32(a, b, n);
  if (d == RG_VD_COSINE) {
    if (aa < 0) out->aa = rg_vnorm2(t, a, n);
    if (bb < 0) out->bb = rg_vnorm2(t, b, n);
  }
}

int rg_vscore (int d, const rg_vsums *s, double *out) {
  double r;
  switch (d) {
    case RG_VD_COSINE:
      if (!(s->aa > 0) || !(s->bb > 0)) return -1;
      r = s->ab / sqrt(s->aa * s->bb);
      if (r > 1) r = 1;              /* rounding past the bound */
      if (r < -1) r = -1;
      break;
    case RG_VD_DOTPRODUCT: r = s->ab; break;
    default: r = sqrt(s->ab); break;
  }
  r = (float)r;                      /* scores are float32, as Cosmos DB's */
  if (!isfinite(r)) return -1;
  *out = r;
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Scalar quantization
** ======================================================================
*/
/* Integer loops: exact in any order, so the vectorizer may reorder them
** freely (O3 asks GCC to); each clone vectorizes them for its target. */
#if defined(__GNUC__) && !defined(__clang__)
#define RG_VINT RG_VCLONE __attribute__((optimize("O3")))
#else
#define RG_VINT RG_VCLONE
#endif

size_t rg_sq8_floats (size_t n) { return n + 1; }

void rg_sq8_init (rg_sq8 *q, size_t n, int dist, float *mem) {
  size_t i;
  q->n = n;
  q->dist = dist;
  q->lo = mem;
  q->step = 1;
  for (i = 0; i < n; i++) q->lo[i] = 0;
}

/* A cosine code is the code of the unit vector (x scaled into `out`). */
static const float *unit (const rg_sq8 *q, const float *x, float *out) {
  float s = rg_vdot_f32(x, x, q->n);
  size_t i;
  if (q->dist != RG_VD_COSINE || !(s > 0)) return x;
  s = 1.0f / sqrtf(s);
  for (i = 0; i < q->n; i++) out[i] = x[i] * s;
  return out;
}

int rg_sq8_train (rg_sq8 *q, const float *samples, size_t m) {
  size_t i, j, n = q->n;
  float *buf = malloc(sizeof(float) * 2 * n), *hi = buf + n, w = 0;
  if (buf == NULL) return -1;
  for (j = 0; j < m; j++) {
    const float *x = unit(q, samples + j * n, buf);
    for (i = 0; i < n; i++) {
      if (j == 0 || x[i] < q->lo[i]) q->lo[i] = x[i];
      if (j == 0 || x[i] > hi[i]) hi[i] = x[i];
    }
  }
  for (i = 0; m && i < n; i++) if (hi[i] - q->lo[i] > w) w = hi[i] - q->lo[i];
  w /= 255.0f;
  q->step = w > 0 && isfinite(w) ? w : 1.0f;
  free(buf);
  return 0;
}

int rg_sq8_encode (const rg_sq8 *q, const float *x, uint8_t *code) {
  float *buf = NULL;
  size_t i;
  if (q->dist == RG_VD_COSINE) {
    if ((buf = malloc(sizeof(float) * q->n)) == NULL) return -1;
    x = unit(q, x, buf);
  }
  for (i = 0; i < q->n; i++) {
    float c = floorf((x[i] - q->lo[i]) / q->step + 0.5f);
    code[i] = (uint8_t)(c <= 0 ? 0 : c >= 255 ? 255 : c);
  }
  free(buf);
  return 0;
}

void rg_sq8_query (const rg_sq8 *q, const float *x, int16_t *w,
                   rg_sq8q *out) {
  size_t i;
  out->q = q;
  out->w = w;
  if (q->dist == RG_VD_EUCLIDEAN) {
    /* twice the query in code units, bounded so that no sum can
    ** overflow: |w - 2c| <= 710, and 710^2 * 4096 < 2^31 */
    for (i = 0; i < q->n; i++) {
      float e = floorf(2 * (x[i] - q->lo[i]) / q->step + 0.5f);
      w[i] = (int16_t)(e < -200 ? -200 : e > 710 ? 710 : e);
    }
  } else {
    /* the query scaled to int16, with 255 * sum |w| < 2^31 */
    float mx = 0, sum = 0, k;
    for (i = 0; i < q->n; i++) {
      float a = fabsf(x[i]);
      if (a > mx) mx = a;
      sum += a;
    }
    k = mx > 0 ? 32767.0f / mx : 0;
    if (sum > 0 && k > 8000000.0f / sum) k = 8000000.0f / sum;
    for (i = 0; i < q->n; i++) w[i] = (int16_t)floorf(x[i] * k + 0.5f);
  }
}

RG_VINT static int32_t sq8_dot (const int16_t *w, const uint8_t *c,
                                 size_t n) {
  int32_t acc = 0;
  size_t i;
  for (i = 0; i < n; i++) acc += w[i] * (int32_t)c[i];
  return acc;
}

RG_VINT static int32_t sq8_l2 (const int16_t *w, const uint8_t *c,
                                size_t n) {
  int32_t acc = 0;
  size_t i;
  for (i = 0; i < n; i++) {
    int16_t d = (int16_t)(w[i] - 2 * c[i]);
    acc += (int32_t)d * d;
  }
  return acc;
}

float rg_sq8_approx (const rg_sq8q *qq, const uint8_t *code) {
  if (qq->q->dist == RG_VD_EUCLIDEAN)
    return (float)sq8_l2(qq->w, code, qq->q->n);
  return -(float)sq8_dot(qq->w, code, qq->q->n);
}
/* }===================================================================== */


/*
** {=====================================================================
** The best-k list
** ======================================================================
*/
/* Is x worse than y (a larger key, or an equal key and a larger id)? */
static int worse (const rg_vcand *x, const rg_vcand *y) {
  return x->key > y->key || (x->key == y->key && x->id > y->id);
}

void rg_vbest_init (rg_vbest *b, rg_vcand *mem, size_t cap) {
  b->c = mem;
  b->n = 0;
  b->cap = cap;
}

static void sift_down (rg_vcand *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    rg_vcand t;
    if (l < n && worse(&h[l], &h[m])) m = l;
    if (r < n && worse(&h[r], &h[m])) m = r;
    if (m == i) return;
    t = h[i]; h[i] = h[m]; h[m] = t;
    i = m;
  }
}

int rg_vbest_offer (rg_vbest *b, float key, uint32_t id) {
  rg_vcand c;
  c.key = key;
  c.id = id;
  if (b->cap == 0) return 0;
  if (b->n < b->cap) {             /* sift up */
    size_t i = b->n++;
    while (i > 0) {
      size_t p = (i - 1) / 2;
      if (!worse(&c, &b->c[p])) break;
      b->c[i] = b->c[p];
      i = p;
    }
    b->c[i] = c;
    return 1;
  }
  if (!worse(&b->c[0], &c)) return 0;
  b->c[0] = c;
  sift_down(b->c, b->n, 0);
  return 1;
}

float rg_vbest_bound (const rg_vbest *b) {
  return b->n < b->cap ? HUGE_VALF : b->c[0].key;
}

void rg_vbest_sort (rg_vbest *b) {
  size_t n = b->n;
  while (n > 1) {                  /* heapsort: the worst goes last */
    rg_vcand t = b->c[0];
    b->c[0] = b->c[n - 1];
    b->c[n - 1] = t;
    sift_down(b->c, --n, 0);
  }
}
/* }===================================================================== */
