/*
** vec.h: vectors as the vector indexes and VectorDistance see them: their
** element types, the three similarity functions, scalar quantization, and
** a bounded best-k list.
**
** A vector is `n` elements of one type: float32, float16, int8 or uint8
** (Cosmos DB's dataType).  A JSON number becomes an element only when the
** type holds it: int8 takes the integers -128..127, uint8 0..255, float16
** and float32 any number that stays finite once rounded to the type (round
** to nearest, ties to even).  Anything else makes the array no vector of
** that type, and a similarity of it is undefined, never an error.
**
** Similarities (Cosmos DB's distanceFunction): cosine (-1 .. 1) and dot
** product (any number), where higher means more similar, and euclidean
** distance (>= 0), where lower does.  A score is made from three sums, a.b
** and the squared norms a.a and b.b (euclidean: the sum of squared
** differences), by rg_vscore.  Float elements are summed in float32 over
** RG_VLANES lanes in a fixed order, then the lanes are added in a fixed
** tree, with no fused multiply-add and no reassociation; integer elements
** are summed exactly.  So the same vectors give the same bits on every
** platform, compiler and SIMD width, and a score computed from an index's
** binary copy equals the one computed from the document's JSON: rankings
** are identical everywhere.  The lane count is part of the storage format
** (stored norms are such sums).
**
** Scalar quantization (SQ8): each dimension is mapped to one byte by an
** offset of its own and a step shared by all, trained on sample vectors;
** the code of a vector is `n` bytes.  For cosine the vector is normalized
** before it is coded, so that the code alone ranks by angle.  A query is
** turned once into integer weights (rg_sq8_query) with which a code's
** approximate score is one integer pass over its bytes (rg_sq8_approx);
** such scores only choose candidates, which are then ranked on exact
** vectors.
*/

#ifndef rg_vec_h
#define rg_vec_h

#include <stddef.h>
#include <stdint.h>

enum { RG_VT_FLOAT32, RG_VT_FLOAT16, RG_VT_INT8, RG_VT_UINT8, RG_VT_COUNT };
enum { RG_VD_COSINE, RG_VD_DOTPRODUCT, RG_VD_EUCLIDEAN, RG_VD_COUNT };

#define RG_VLANES 16

/* Names as Cosmos DB writes them ("float32", "cosine", ...); parsing is
** case-insensitive.  -1 for an unknown name. */
const char *rg_vtype_name (int t);
int         rg_vtype_parse (const char *s, size_t n);
const char *rg_vdist_name (int d);
int         rg_vdist_parse (const char *s, size_t n);
/* Bytes of one element. */
size_t      rg_vtype_size (int t);
/* Is a higher score more similar (cosine, dot product)? */
static inline int rg_vdist_higher (int d) { return d != RG_VD_EUCLIDEAN; }

/* Stores `v` as element `i` of `dst` (type t): 0, or -1 when the type does
** not hold it (the array is then no vector of that type). */
int    rg_vput (int t, void *dst, size_t i, double v);
/* Element `i` of `src` as a double (exact). */
double rg_vget (int t, const void *src, size_t i);
/* float16 bits <-> float (exact one way, rounded to nearest even the
** other; HUGE_VAL beyond the range). */
float    rg_half_to_float (uint16_t h);
uint16_t rg_float_to_half (float f);

/* The sums of a similarity.  Float types take float32 elements (float16
** vectors are widened first, exactly); int8 and uint8 their own. */
typedef struct rg_vsums {
  double ab, aa, bb;        /* euclidean: ab is the sum of squared
                               differences, aa and bb unused */
} rg_vsums;
float   rg_vdot_f32 (const float *a, const float *b, size_t n);
float   rg_vl2_f32 (const float *a, const float *b, size_t n);
int64_t rg_vdot_i8 (const int8_t *a, const int8_t *b, size_t n);
int64_t rg_vl2_i8 (const int8_t *a, const int8_t *b, size_t n);
int64_t rg_vdot_u8 (const uint8_t *a, const uint8_t *b, size_t n);
int64_t rg_vl2_u8 (const uint8_t *a, const uint8_t *b, size_t n);
/* Widens n float16 elements to float32. */
void    rg_vwiden_f16 (const uint16_t *src, float *dst, size_t n);
/* The squared norm a.a of one vector (the `aa` an index stores), in the
** element type's kernel: float32 elements for the float types. */
double  rg_vnorm2 (int t, const void *a, size_t n);
/* The sums of two vectors of type t (float32 elements for both float
** types), `aa` and `bb` taken from the caller when known (>= 0) and
** computed otherwise (cosine only). */
void    rg_vsums_of (int d, int t, const void *a, const void *b, size_t n,
                     double aa, double bb, rg_vsums *out);
/* The score of a similarity from its sums, rounded to float32 (as Cosmos
** DB's scores are); 0, or -1 when it has none (a cosine with a zero
** vector, or a result that is not finite). */
int     rg_vscore (int d, const rg_vsums *s, double *out);

/*
** SQ8: a per-dimension offset and one step for every dimension, trained on
** sample vectors (float32 elements, `n` each; cosine: normalized first);
** then codes are n bytes.  A query becomes n int16 weights, and a code's
** approximate score is an integer sum: exact, so the same everywhere
** whatever the order the compiler sums in.  The offsets' memory is the
** caller's (rg_sq8_floats floats).  Training and encoding return 0, or -1
** out of memory.
*/
typedef struct rg_sq8 {
  size_t n;
  int dist;
  float *lo;                 /* n offsets */
  float step;
} rg_sq8;
size_t rg_sq8_floats (size_t n);
void   rg_sq8_init (rg_sq8 *q, size_t n, int dist, float *mem);
int    rg_sq8_train (rg_sq8 *q, const float *samples, size_t m);
int    rg_sq8_encode (const rg_sq8 *q, const float *x, uint8_t *code);
/* A query made ready: n weights at `w` (the caller's memory). */
typedef struct rg_sq8q {
  const rg_sq8 *q;
  int16_t *w;
} rg_sq8q;
void   rg_sq8_query (const rg_sq8 *q, const float *x, int16_t *w,
                     rg_sq8q *out);
/* The approximate score of a code as a key where lower is closer, for
** every similarity (cosine and dot product give a negated, scaled dot
** product; euclidean a scaled squared distance).  Keys of one query
** compare; keys of two queries do not. */
float  rg_sq8_approx (const rg_sq8q *qq, const uint8_t *code);

/*
** A bounded list of the best `cap` candidates by a key where lower is
** better (a max-heap on the key).  Ties are broken by the id, lower
** first, so the result does not depend on the order of offers.
*/
typedef struct rg_vcand {
  float key;
  uint32_t id;
} rg_vcand;
typedef struct rg_vbest {
  rg_vcand *c;
  size_t n, cap;
} rg_vbest;
void rg_vbest_init (rg_vbest *b, rg_vcand *mem, size_t cap);
/* Offers a candidate: 1 kept, 0 not. */
int  rg_vbest_offer (rg_vbest *b, float key, uint32_t id);
/* The worst key kept (HUGE_VALF while the list is not full). */
float rg_vbest_bound (const rg_vbest *b);
/* Sorts the list best first (it is no heap after). */
void rg_vbest_sort (rg_vbest *b);

#endif
