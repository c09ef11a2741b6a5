/*
** json.h: JSON text <-> cJSON trees, and the conventions of the trees.
**
** Inside cJSON trees strings are kept in modified UTF-8: a NUL character
** is the two bytes C0 80 (never valid in real UTF-8), so that strings
** holding NUL survive cJSON's C strings.  Integers beyond 2^53 keep their
** exact decimal text in the number node's `valuestring` (cJSON frees and
** duplicates it for any node type), so they print and come back exactly.
** Every tree the core makes follows these rules, and every text it prints
** reads back to the same tree.
*/

#ifndef rg_json_h
#define rg_json_h

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/support.h"

/* Appends the compact JSON text of `v` to `b`. */
void rg_json_print (const cJSON *v, rg_buf *b);
/* Parses JSON text strictly into a new tree (400 on any fault). */
int  rg_json_parse (const char *s, size_t n, cJSON **out, rg_err *e);

/* Is `d` integral and representable as an int64 (then in *out)? */
int    rg_dbl_int (double d, int64_t *out);
/* Number nodes: integral value as int64 (1) or not integral (0). */
int    rg_num_int (const cJSON *v, int64_t *out);
cJSON *rg_num_new_int (int64_t i);
/* A string node from raw bytes (which may hold NUL). */
cJSON *rg_str_new (const char *s, size_t n);
/* Raw bytes as a new MUTF-8 C string (cJSON_malloc'd; NULL: no memory). */
char  *rg_str_mutf8 (const char *s, size_t n);
/* The raw bytes of a string node into `b` (C0 80 back to NUL). */
void   rg_str_bytes (const cJSON *v, rg_buf *b);

#endif
