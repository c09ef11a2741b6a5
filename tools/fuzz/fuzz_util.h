/*
** fuzz_util.h: checks shared by the libFuzzer targets of the JSON bridge,
** the patch engine and continuation tokens (included by each, so that a
** target stays one translation unit plus the core files it names).
**
**   fz_valid_json   a strict RFC 8259 validator written apart from json.c,
**                   so that "the printer writes valid JSON" is checked by
**                   something that does not share the parser's mistakes
**   fz_tree_equal   exact equality of two cJSON trees as this core uses
**                   them (MUTF-8 strings, exact integers in valuestring,
**                   object members in order)
**   fz_tree_same    the same, with object members compared as sets (the
**                   last of duplicate names wins), for trees that went
**                   through Lua tables, which do not keep member order
**   fz_check_tree   the structural rules every tree must keep: finite
**                   numbers, depth, names on object members only
*/

#ifndef fuzz_util_h
#define fuzz_util_h

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#define FZ_CHECK(cond, what) \
  do { if (!(cond)) { fprintf(stderr, "check failed: %s (%s:%d)\n", what, \
                              __FILE__, __LINE__); abort(); } } while (0)


/* {=====================================================================
** A strict JSON validator
** ====================================================================== */
typedef struct fz_json {
  const unsigned char *p, *end;
  int depth;
} fz_json;

static void fz_ws (fz_json *j) {
  while (j->p < j->end &&
         (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}

static int fz_value (fz_json *j);

/* One UTF-8 sequence (RFC 3629: no overlongs, no surrogates, <= U+10FFFF). */
static int fz_utf8 (fz_json *j) {
  const unsigned char *s = j->p;
  size_t left = (size_t)(j->end - s), n, i;
  unsigned cp;
  if (s[0] < 0x80) { j->p++; return 1; }
  if (s[0] >= 0xC2 && s[0] <= 0xDF) { n = 2; cp = s[0] & 0x1F; }
  else if (s[0] >= 0xE0 && s[0] <= 0xEF) { n = 3; cp = s[0] & 0x0F; }
  else if (s[0] >= 0xF0 && s[0] <= 0xF4) { n = 4; cp = s[0] & 0x07; }
  else return 0;
  if (left < n) return 0;
  for (i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  j->p += n;
  return 1;
}

static int fz_string (fz_json *j) {
  j->p++;                                 /* '"' */
  while (j->p < j->end) {
    unsigned char c = *j->p;
    if (c == '"') { j->p++; return 1; }
    if (c < 0x20) return 0;
    if (c == '\\') {
      int i;
      if (j->end - j->p < 2) return 0;
      switch (j->p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n':
        case 'r': case 't': j->p += 2; break;
        case 'u':
          if (j->end - j->p < 6) return 0;
          for (i = 2; i < 6; i++)
            if (!strchr("0123456789abcdefABCDEF", j->p[i]) || !j->p[i])
              return 0;
          j->p += 6;
          break;
        default: return 0;
      }
      continue;
    }
    if (!fz_utf8(j)) return 0;
  }
  return 0;
}

static int fz_digits (fz_json *j) {
  const unsigned char *s = j->p;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  return j->p > s;
}

static int fz_number (fz_json *j) {
  if (j->p < j->end && *j->p == '-') j->p++;
  if (j->p >= j->end) return 0;
  if (*j->p == '0') j->p++;
  else if (!fz_digits(j)) return 0;
  if (j->p < j->end && *j->p == '.') { j->p++; if (!fz_digits(j)) return 0; }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
    if (!fz_digits(j)) return 0;
  }
  return 1;
}

static int fz_word (fz_json *j, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0) return 0;
  j->p += n;
  return 1;
}

static int fz_value (fz_json *j) {
  fz_ws(j);
  if (j->p >= j->end) return 0;
  switch (*j->p) {
    case '{':
      if (++j->depth > RG_MAX_DEPTH) return 0;
      j->p++;
      fz_ws(j);
      if (j->p < j->end && *j->p == '}') { j->p++; j->depth--; return 1; }
      for (;;) {
        fz_ws(j);
        if (j->p >= j->end || *j->p != '"' || !fz_string(j)) return 0;
        fz_ws(j);
        if (j->p >= j->end || *j->p != ':') return 0;
        j->p++;
        if (!fz_value(j)) return 0;
        fz_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == '}') { j->p++; j->depth--; return 1; }
        return 0;
      }
    case '[':
      if (++j->depth > RG_MAX_DEPTH) return 0;
      j->p++;
      fz_ws(j);
      if (j->p < j->end && *j->p == ']') { j->p++; j->depth--; return 1; }
      for (;;) {
        if (!fz_value(j)) return 0;
        fz_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == ']') { j->p++; j->depth--; return 1; }
        return 0;
      }
    case '"': return fz_string(j);
    case 't': return fz_word(j, "true");
    case 'f': return fz_word(j, "false");
    case 'n': return fz_word(j, "null");
    default: return fz_number(j);
  }
}

/* Is s[0..n) one valid JSON text (nesting at most RG_MAX_DEPTH)? */
static int fz_valid_json (const char *s, size_t n) {
  fz_json j;
  j.p = (const unsigned char *)s;
  j.end = j.p + n;
  j.depth = 0;
  if (!fz_value(&j)) return 0;
  fz_ws(&j);
  return j.p == j.end;
}
/* }===================================================================== */


/* {=====================================================================
** Trees
** ====================================================================== */
static int fz_num_equal (const cJSON *a, const cJSON *b) {
  int64_t x, y;
  int ia = rg_num_int(a, &x), ib = rg_num_int(b, &y);
  if (ia != ib) return 0;
  if (ia) return x == y;
  return memcmp(&a->valuedouble, &b->valuedouble, sizeof(double)) == 0;
}

static int fz_tree_equal (const cJSON *a, const cJSON *b) {
  const cJSON *x, *y;
  if ((a->type & 0xFF) != (b->type & 0xFF)) return 0;
  switch (a->type & 0xFF) {
    case cJSON_Number: return fz_num_equal(a, b);
    case cJSON_String: return strcmp(a->valuestring, b->valuestring) == 0;
    case cJSON_Array:
    case cJSON_Object:
      for (x = a->child, y = b->child; x && y; x = x->next, y = y->next) {
        if ((a->type & 0xFF) == cJSON_Object &&
            strcmp(x->string ? x->string : "", y->string ? y->string : ""))
          return 0;
        if (!fz_tree_equal(x, y)) return 0;
      }
      return x == NULL && y == NULL;
    default: return 1;
  }
}

/* The member of `obj` named `k` that a Lua table would keep (the last). */
static const cJSON *fz_last_member (const cJSON *obj, const char *k) {
  const cJSON *c, *found = NULL;
  for (c = obj->child; c; c = c->next)
    if (strcmp(c->string ? c->string : "", k) == 0) found = c;
  return found;
}

static int fz_distinct_names (const cJSON *obj) {
  const cJSON *c;
  int n = 0;
  for (c = obj->child; c; c = c->next)
    if (fz_last_member(obj, c->string ? c->string : "") == c) n++;
  return n;
}

/* `lua` went through a Lua table; `ref` did not. */
static int fz_tree_same (const cJSON *ref, const cJSON *lua) {
  const cJSON *x, *y;
  if ((ref->type & 0xFF) != (lua->type & 0xFF)) return 0;
  switch (ref->type & 0xFF) {
    case cJSON_Number: return fz_num_equal(ref, lua);
    case cJSON_String: return strcmp(ref->valuestring, lua->valuestring) == 0;
    case cJSON_Array:
      for (x = ref->child, y = lua->child; x && y; x = x->next, y = y->next)
        if (!fz_tree_same(x, y)) return 0;
      return x == NULL && y == NULL;
    case cJSON_Object: {
      int n = 0;
      for (y = lua->child; y; y = y->next, n++) {
        x = fz_last_member(ref, y->string ? y->string : "");
        if (x == NULL || !fz_tree_same(x, y)) return 0;
      }
      return n == fz_distinct_names(ref);
    }
    default: return 1;
  }
}

/* Depth of a tree (a scalar is 0). */
static int fz_depth (const cJSON *v) {
  const cJSON *c;
  int d = 0;
  if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) return 0;
  for (c = v->child; c; c = c->next) {
    int k = fz_depth(c);
    if (k > d) d = k;
  }
  return d + 1;
}

/* The rules of a well-formed tree: finite numbers, integers beyond 2^53
** with their exact text, names exactly on object members, a consistent
** sibling list (a first child's prev is the last). */
static void fz_check_tree (const cJSON *v, int in_object) {
  const cJSON *c, *last = NULL;
  FZ_CHECK((v->string != NULL) == in_object, "member names");
  switch (v->type & 0xFF) {
    case cJSON_Number:
      FZ_CHECK(isfinite(v->valuedouble), "a number is not finite");
      break;
    case cJSON_String:
      FZ_CHECK(v->valuestring != NULL, "a string node without text");
      break;
    case cJSON_Array:
    case cJSON_Object:
      for (c = v->child; c; c = c->next) {
        FZ_CHECK(c->prev != NULL, "a child without prev");
        if (c != v->child) FZ_CHECK(c->prev->next == c, "broken links");
        fz_check_tree(c, (v->type & 0xFF) == cJSON_Object);
        last = c;
      }
      if (v->child) FZ_CHECK(v->child->prev == last, "first->prev != last");
      break;
    case cJSON_NULL: case cJSON_True: case cJSON_False: break;
    default: FZ_CHECK(0, "a node of an unknown type");
  }
}

/* Prints a tree and checks that the text is valid JSON and parses back to
** the same tree, printing the same text.  Returns the text (caller frees). */
static void fz_print_checked (const cJSON *v, rg_buf *out) {
  rg_buf again;
  cJSON *back = NULL;
  rg_err e;
  rg_json_print(v, out);
  FZ_CHECK(!out->oom, "out of memory printing");
  FZ_CHECK(fz_valid_json(out->p, out->n), "the printer wrote invalid JSON");
  FZ_CHECK(rg_json_parse(out->p, out->n, &back, &e) == 0,
           "printed text does not parse back");
  FZ_CHECK(fz_tree_equal(v, back), "printed text parses to another tree");
  rg_buf_init(&again);
  rg_json_print(back, &again);
  FZ_CHECK(again.n == out->n && memcmp(again.p, out->p, out->n) == 0,
           "parse -> print is not stable");
  rg_buf_free(&again);
  cJSON_Delete(back);
}
/* }===================================================================== */

#endif
