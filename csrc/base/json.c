/*
** json.c: JSON text and cJSON trees, the forms the core works on.
**
** Two conventions make cJSON carry everything a document can hold:
**   - strings are modified UTF-8: NUL is stored as the bytes C0 80, which
**     never occur in valid UTF-8, so the mapping is exact;
**   - an integer beyond 2^53 keeps its exact decimal text in the number
**     node's `valuestring` (cJSON frees and copies that field for any node
**     type); `valuedouble` holds the nearest double.
** JSON text, as stored in LMDB, is compact, standard JSON (NUL as \u0000),
** integers printed exactly, other numbers in the shortest form that reads
** back to the same double.
**
** The reader (json_read.h's scanner with the tree builder below) is strict
** and builds nothing half: a fault frees what it made.  Lua values meet
** these forms in luax/luajson.c, which reads text with the same scanner
** straight onto a Lua stack.
*/

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/json_read.h"

#define TWO53 9007199254740992.0          /* 2^53 */
#define TWO63 9223372036854775808.0       /* 2^63 */


/*
** {=====================================================================
** Numbers and strings in trees
** ======================================================================
*/
int rg_dbl_int (double d, int64_t *out) {
  if (!(d >= -TWO63 && d < TWO63) || floor(d) != d) return 0;
  *out = (int64_t)d;
  return 1;
}

int rg_num_int (const cJSON *v, int64_t *out) {
  if (v->valuestring != NULL) {            /* exact big integer */
    *out = strtoll(v->valuestring, NULL, 10);
    return 1;
  }
  return rg_dbl_int(v->valuedouble, out);
}

cJSON *rg_num_new_int (int64_t i) {
  cJSON *n = cJSON_CreateNumber((double)i);
  if (n != NULL && (i > (int64_t)TWO53 || i < -(int64_t)TWO53)) {
    char tmp[32];
    size_t len = (size_t)snprintf(tmp, sizeof(tmp), "%lld", (long long)i);
    n->valuestring = (char *)cJSON_malloc(len + 1);
    if (n->valuestring == NULL) { cJSON_Delete(n); return NULL; }
    memcpy(n->valuestring, tmp, len + 1);
  }
  return n;
}

char *rg_str_mutf8 (const char *s, size_t n) {
  size_t nul = 0, i;
  char *d, *w;
  for (i = 0; i < n; i++) nul += (s[i] == '\0');
  d = (char *)cJSON_malloc(n + nul + 1);
  if (d == NULL) return NULL;
  if (nul == 0) memcpy(d, s, n);
  else {
    for (i = 0, w = d; i < n; i++) {
      if (s[i] == '\0') { *w++ = (char)0xC0; *w++ = (char)0x80; }
      else *w++ = s[i];
    }
  }
  d[n + nul] = '\0';
  return d;
}

/* A string node taking ownership of a cJSON_malloc'd MUTF-8 string. */
static cJSON *str_node (char *owned) {
  cJSON *n;
  if (owned == NULL) return NULL;
  n = cJSON_CreateNull();
  if (n == NULL) { cJSON_free(owned); return NULL; }
  n->type = cJSON_String;
  n->valuestring = owned;
  return n;
}

cJSON *rg_str_new (const char *s, size_t n) {
  return str_node(rg_str_mutf8(s, n));
}

void rg_str_bytes (const cJSON *v, rg_buf *b) {
  const char *s = v->valuestring, *p;
  while ((p = strchr(s, (char)0xC0)) != NULL) {
    if ((unsigned char)p[1] == 0x80) {
      rg_buf_add(b, s, (size_t)(p - s));
      rg_buf_addc(b, '\0');
    }
    else rg_buf_add(b, s, (size_t)(p - s) + 1);
    s = (unsigned char)p[1] == 0x80 ? p + 2 : p + 1;
  }
  rg_buf_adds(b, s);
}

/* }===================================================================== */


/*
** {=====================================================================
** cJSON tree -> JSON text
** ======================================================================
*/
/* Shortest of %.15g, %.16g, %.17g that reads back as the same double. */
static void print_double (rg_buf *b, double d) {
  char tmp[40], dp = rg_js_point();
  int prec, n = 0, i;
  if (d != d || d == HUGE_VAL || d == -HUGE_VAL) {
    rg_buf_adds(b, "null");           /* unreachable from validated trees */
    return;
  }
  for (prec = 15; prec <= 17; prec++) {
    n = snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
    if (strtod(tmp, NULL) == d) break;
  }
  for (i = 0; i < n; i++)
    if (tmp[i] == dp) tmp[i] = '.';
  rg_buf_add(b, tmp, (size_t)n);
}

static void print_number (rg_buf *b, const cJSON *v) {
  int64_t i;
  if (v->valuestring != NULL) rg_buf_adds(b, v->valuestring);
  else if (rg_dbl_int(v->valuedouble, &i)) rg_buf_addf(b, "%lld", (long long)i);
  else print_double(b, v->valuedouble);
}

void rg_json_print (const cJSON *v, rg_buf *b) {
  const cJSON *c;
  switch (v->type & 0xFF) {
    case cJSON_NULL: rg_buf_add(b, "null", 4); break;
    case cJSON_False: rg_buf_add(b, "false", 5); break;
    case cJSON_True: rg_buf_add(b, "true", 4); break;
    case cJSON_Number: print_number(b, v); break;
    case cJSON_String:
      rg_json_quote(b, v->valuestring, strlen(v->valuestring));
      break;
    case cJSON_Raw: rg_buf_adds(b, v->valuestring); break;
    case cJSON_Array:
      rg_buf_addc(b, '[');
      for (c = v->child; c != NULL; c = c->next) {
        rg_json_print(c, b);
        if (c->next) rg_buf_addc(b, ',');
      }
      rg_buf_addc(b, ']');
      break;
    case cJSON_Object:
      rg_buf_addc(b, '{');
      for (c = v->child; c != NULL; c = c->next) {
        if (c->string == NULL) rg_buf_add(b, "\"\"", 2);
        else rg_json_quote(b, c->string, strlen(c->string));
        rg_buf_addc(b, ':');
        rg_json_print(c, b);
        if (c->next) rg_buf_addc(b, ',');
      }
      rg_buf_addc(b, '}');
      break;
    default: rg_buf_add(b, "null", 4); break;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** JSON text -> cJSON tree
** ======================================================================
*/
static int parse_value (rg_jscan *P, cJSON **out);

static int parse_array (rg_jscan *P, cJSON **out) {
  cJSON *node;
  int rc;
  if (++P->depth > RG_MAX_DEPTH) return rg_js_fail(P, "nesting deeper than 128");
  P->p++;                                   /* '[' */
  if ((node = cJSON_CreateArray()) == NULL)
    return rg_fail(P->e, 500, "out of memory");
  rg_js_ws(P);
  if (P->p < P->end && *P->p == ']') {
    P->p++;
    goto done;
  }
  for (;;) {
    cJSON *item = NULL;
    rg_js_ws(P);
    if ((rc = parse_value(P, &item)) != 0) goto fail;
    cJSON_AddItemToArray(node, item);
    rg_js_ws(P);
    if (P->p < P->end && *P->p == ',') { P->p++; continue; }
    if (P->p < P->end && *P->p == ']') { P->p++; break; }
    rc = rg_js_fail(P, "expected ',' or ']'");
    goto fail;
  }
done:
  P->depth--;
  *out = node;
  return 0;
fail:
  cJSON_Delete(node);
  return rc;
}

static int parse_object (rg_jscan *P, cJSON **out) {
  cJSON *node;
  int rc;
  if (++P->depth > RG_MAX_DEPTH) return rg_js_fail(P, "nesting deeper than 128");
  P->p++;                                   /* '{' */
  if ((node = cJSON_CreateObject()) == NULL)
    return rg_fail(P->e, 500, "out of memory");
  rg_js_ws(P);
  if (P->p < P->end && *P->p == '}') {
    P->p++;
    goto done;
  }
  for (;;) {
    cJSON *item = NULL;
    const char *key;
    size_t klen;
    char *kcopy;
    rg_js_ws(P);
    if (P->p >= P->end || *P->p != '"') { rc = rg_js_fail(P, "expected a key"); goto fail; }
    if ((rc = rg_js_string(P, &key, &klen)) != 0) goto fail;
    if ((kcopy = rg_str_mutf8(key, klen)) == NULL) {
      rc = rg_fail(P->e, 500, "out of memory");
      goto fail;
    }
    rg_js_ws(P);
    if (P->p >= P->end || *P->p != ':') {
      cJSON_free(kcopy);
      rc = rg_js_fail(P, "expected ':'");
      goto fail;
    }
    P->p++;
    rg_js_ws(P);
    if ((rc = parse_value(P, &item)) != 0) { cJSON_free(kcopy); goto fail; }
    item->string = kcopy;
    cJSON_AddItemToArray(node, item);       /* an object is a named list */
    rg_js_ws(P);
    if (P->p < P->end && *P->p == ',') { P->p++; continue; }
    if (P->p < P->end && *P->p == '}') { P->p++; break; }
    rc = rg_js_fail(P, "expected ',' or '}'");
    goto fail;
  }
done:
  P->depth--;
  *out = node;
  return 0;
fail:
  cJSON_Delete(node);
  return rc;
}

static int parse_value (rg_jscan *P, cJSON **out) {
  int rc;
  *out = NULL;
  if (P->p >= P->end) return rg_js_fail(P, "unexpected end of text");
  switch (*P->p) {
    case '{': return parse_object(P, out);
    case '[': return parse_array(P, out);
    case '"': {
      const char *s;
      size_t n;
      if ((rc = rg_js_string(P, &s, &n)) != 0) return rc;
      /* the decoded form is already MUTF-8; a slice never holds NUL */
      *out = str_node(rg_str_mutf8(s, n));
      break;
    }
    case 't':
      if ((rc = rg_js_literal(P, "true", 4)) != 0) return rc;
      *out = cJSON_CreateTrue();
      break;
    case 'f':
      if ((rc = rg_js_literal(P, "false", 5)) != 0) return rc;
      *out = cJSON_CreateFalse();
      break;
    case 'n':
      if ((rc = rg_js_literal(P, "null", 4)) != 0) return rc;
      *out = cJSON_CreateNull();
      break;
    default: {
      int isint = 0;
      int64_t iv = 0;
      double dv = 0;
      if (*P->p != '-' && (*P->p < '0' || *P->p > '9'))
        return rg_js_fail(P, "unexpected character");
      if ((rc = rg_js_number(P, &isint, &iv, &dv)) != 0) return rc;
      *out = isint ? rg_num_new_int(iv) : cJSON_CreateNumber(dv);
      break;
    }
  }
  return *out ? 0 : rg_fail(P->e, 500, "out of memory");
}

int rg_json_parse (const char *s, size_t n, cJSON **out, rg_err *e) {
  rg_jscan P;
  rg_buf tmp;
  int rc;
  rg_buf_init(&tmp);
  P.s = P.p = s;
  P.end = s + n;
  P.depth = 0;
  P.trusted = 0;
  P.mutf8 = 1;
  P.tmp = &tmp;
  P.e = e;
  rg_js_ws(&P);
  rc = parse_value(&P, out);
  if (rc == 0) {
    rg_js_ws(&P);
    if (P.p != P.end) {
      rc = rg_js_fail(&P, "unexpected text after the value");
      cJSON_Delete(*out);
      *out = NULL;
    }
  }
  rg_buf_free(&tmp);
  return rc;
}
/* }===================================================================== */
