/*
** cluster.c: the storage-free entry points of regolith.core, which
** regolith.cluster (lua/regolith/cluster/) builds the same API on, over
** Redis Cluster (docs/cluster.md).  Everything a local write, query or
** script computes before it touches LMDB is computed here by the same
** code; the Lua side does the I/O.
**
**   core.spec_check(name, opts)        -> the spec's JSON text (raises as
**                                         create_container does)
**   core.check_name(name, what)        -> true | nil, msg, 400
**   core.cluster_spec(json, cid)       -> S, a built spec:
**     S:key(id, pk)                    -> pk, bucket | nil, msg, 400
**     S:pk(pk)                         -> pk, bucket | nil, msg, 400
**     S:prepare(doc | text)            -> text, id, pk, bucket, terms,
**                                         uniques, ttl, missing
**                                         | nil, msg, status
**     S:patch(text, ops, filter)       -> text | nil, msg, status
**     S:query(sql, params, opts, secret, internal) -> Q | nil, msg, status
**     S:ref(ref)                       -> pk, id, ikey
**   Q:plan()  Q:add(ref, text, member)  Q:flush(phase, frontier)
**   Q:udf_names()  Q:use_udfs(P, records)  Q:finish(as_text)
**   core.stepper(budget, memory)       -> P: P:check(kind, name, source),
**                                         P:start(S, args) -> R,
**                                         R:resume(reply) -> request | outcome
**   core.token_seal(secret, kind, context, payload) -> token
**   core.token_open(secret, kind, context, token)   -> payload | nil, msg, 400
**   core.charge(work) -> request units;  core.read_units(bytes)
**
** Keys in Redis.  A partition key `pk` (as the Functions library sees it)
** is the local logical-partition prefix without the container id: the
** partition hash (8 bytes, big-endian) then the tuple of terms
** (store/layout.c), so the partitions of a bucket, read in lex order, come
** in the order of a local scan.  An item's local key is cid | pk | id (long
** ids cut and digested as locally), and its digest is the local one, so
** the row pipeline orders ties, and pages, the same way in both modes.
** Index members are term .. ref, where ref = pk .. id .. u16(#pk) ..
** u16(#id) (regolith.cluster.layout); an index is named by the 16 hex
** digits of its path's (or composite's) id.
**
** Query sources (rg_query_hplan) are fed in a fixed order, each phase (one
** seek) at a time: the host adds the candidates of a phase, in any order,
** and flush sorts them by their source position and feeds them:
**   SCAN   position = the local item key (hash, tuple, id): bucket by
**          bucket, the local scan's order;
**   TERMS  position = hash | digest within the term's phase;
**   RANGE  position = the local entry key, prefix | term | hash | digest,
**          in the ORDER BY's direction when the plan is ordered; a run of
**          entries sharing a cut string term is sorted on full values (its
**          order keys), as the local source sorts it.
** An index phase is read from every bucket at once, a page of members of
** each per round trip: flush(phase, frontier) feeds only what no later
** read can precede (before the partition hash of the bucket furthest
** behind), so a page can be complete after a few members of each bucket.
** A continuation resumes a STREAM page at its position (the pipeline skips
** what it has returned); other modes read their sources again.
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/patch.h"
#include "base/token.h"
#include "host/binding.h"
#include "luax/luajson.h"
#include "script/script.h"
#include "sql/sql.h"
#include "store/index.h"
#include "store/plan.h"
#include "store/search.h"

#define SPEC_MT    "regolith.cluster.spec"
#define QUERY_MT   "regolith.cluster.query"
#define STEPPER_MT "regolith.cluster.stepper"
#define RUN_MT     "regolith.cluster.run"

/* System properties: their stored text is at most this long, so that the
** item size limit is checked on the client's text (docs/cluster.md). */
#define SYSTEM_BYTES 76

typedef struct lspec {
  rg_cspec *spec;
} lspec;

typedef struct lstepper {
  rg_stepper *p;
} lstepper;

static lspec *checkspec (lua_State *L, int idx) {
  return (lspec *)luaL_checkudata(L, idx, SPEC_MT);
}

/* Pushes a string of `n` hex digits of v. */
static void push_hex (lua_State *L, uint64_t v) {
  char hex[17];
  int i;
  for (i = 15; i >= 0; i--) {
    hex[i] = "0123456789abcdef"[v & 15];
    v >>= 4;
  }
  lua_pushlstring(L, hex, 16);
}

/* The Redis pk of a logical partition key: the key without its cid. */
static void push_pk (lua_State *L, const rg_ikey *k) {
  lua_pushlstring(L, (const char *)k->key + 4, k->lplen - 4);
}


/*
** {=====================================================================
** Specs and keys
** ======================================================================
*/
/* core.spec_check(name, opts) -> JSON text | nil, msg, 400 | nil, msg,
** 501 (what a cluster does not have: throughput budgets) */
static int l_spec_check (lua_State *L) {
  static const char *const allowed[] = {
    "partition_key", "physical_partitions", "indexing", "unique_keys",
    "default_ttl", "max_partition_bytes", "change_feed",
    "computed_properties", "throughput", "full_text", "fullTextPolicy", NULL
  };
  const char *name;
  size_t n;
  rg_buf *text;
  rg_err e;
  if (lua_type(L, 1) != LUA_TSTRING)
    return luaL_error(L, "bad argument #1: a container name must be a "
                      "string");
  name = lua_tolstring(L, 1, &n);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  rgl_opts_check(L, 2, allowed, "create_container");
  if (rg_check_id(name, n, RG_MAX_NAME, "a container name", &e))
    return rgl_push_fail(L, &e);
  lua_getfield(L, 2, "throughput");
  if (!lua_isnil(L, -1)) {
    rg_fail(&e, 501, "throughput budgets are not available on a Redis "
            "Cluster (docs/cluster.md)");
    return rgl_push_fail(L, &e);
  }
  lua_pop(L, 1);
  text = rgl_spec_text(L, 2, "create_container", name, n);
  lua_pushlstring(L, text->p, text->n);
  rg_box_done(text);
  return 1;
}

/* core.check_name(s, what) -> true | nil, msg, 400: the rules of
** container, procedure, trigger and processor names (rg_check_id). */
static int l_check_name (lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  const char *what = luaL_checkstring(L, 2);
  rg_err e;
  if (rg_check_id(s, n, RG_MAX_NAME, what, &e)) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  return 1;
}

/* core.cluster_spec(json, cid) -> S */
static int l_cluster_spec (lua_State *L) {
  size_t n;
  const char *text = luaL_checklstring(L, 1, &n);
  lua_Integer cid = luaL_checkinteger(L, 2);
  lspec *ls;
  cJSON *j = NULL;
  rg_err e;
  int rc;
  luaL_argcheck(L, cid > 0 && cid <= 0xFFFFFFFF, 2, "not a container id");
  ls = (lspec *)rg_newuserdata(L, sizeof(lspec));
  ls->spec = NULL;
  luaL_getmetatable(L, SPEC_MT);
  lua_setmetatable(L, -2);
  if ((rc = rg_json_parse(text, n, &j, &e)) == 0) {
    rc = rg_cspec_build(j, (uint32_t)cid, &ls->spec, &e);
    cJSON_Delete(j);
  }
  if (rc) return luaL_error(L, "a stored container spec is invalid: %s",
                            e.msg);
  return 1;
}

static int spec_gc (lua_State *L) {
  lspec *ls = checkspec(L, 1);
  rg_cspec_free(ls->spec);
  ls->spec = NULL;
  return 0;
}

/* S:info() -> {cid, partitions, ttl, retention, max_partition_bytes,
** npk, uniques, ts_index, lsn_index (the ids of the indexes of _ts and
** _lsn when the policy indexes them)} */
static int spec_info (lua_State *L) {
  const rg_cspec *sp = checkspec(L, 1)->spec;
  lua_createtable(L, 0, 7);
  lua_pushinteger(L, (lua_Integer)sp->cid);
  lua_setfield(L, -2, "cid");
  lua_pushinteger(L, sp->nparts);
  lua_setfield(L, -2, "partitions");
  lua_pushboolean(L, sp->ttl_on);
  lua_setfield(L, -2, "ttl");
  lua_pushinteger(L, (lua_Integer)sp->retention);
  lua_setfield(L, -2, "retention");
  lua_pushboolean(L, sp->all_versions);
  lua_setfield(L, -2, "all_versions");
  lua_pushinteger(L, (lua_Integer)sp->max_partition_bytes);
  lua_setfield(L, -2, "max_partition_bytes");
  lua_pushinteger(L, sp->npk);
  lua_setfield(L, -2, "npk");
  lua_pushinteger(L, sp->nuniq);
  lua_setfield(L, -2, "uniques");
  {                                  /* the indexes of _ts and _lsn */
    static const char *const ts[1] = { "_ts" }, *const lsn[1] = { "_lsn" };
    if (sp->automatic && rg_cspec_indexed(sp, ts, 1)) {
      push_hex(L, rg_index_path_id(ts, 1));
      lua_setfield(L, -2, "ts_index");
    }
    if (sp->automatic && rg_cspec_indexed(sp, lsn, 1)) {
      push_hex(L, rg_index_path_id(lsn, 1));
      lua_setfield(L, -2, "lsn_index");
    }
  }
  return 1;
}

/* S:pk(pk) -> pk, bucket | nil, msg, 400 */
static int spec_pk (lua_State *L) {
  const rg_cspec *sp = checkspec(L, 1)->spec;
  cJSON nodes[RG_MAX_PK_PATHS];
  const cJSON *pkv[RG_MAX_PK_PATHS];
  rg_ikey k;
  rg_err e;
  if (rgl_pk_from_lua(L, 2, sp, nodes, pkv, &e) ||
      rg_ikey_partition(sp, pkv, &k, &e))
    return rgl_push_fail(L, &e);
  push_pk(L, &k);
  lua_pushinteger(L, k.range);
  return 2;
}

/* An id argument: 0, or 400 for what the id rules refuse. */
static int id_arg (lua_State *L, int idx, rg_err *e) {
  size_t n;
  const char *id;
  if (lua_type(L, idx) != LUA_TSTRING)
    return rg_fail(e, 400, "id must be a string, not %s",
                   luaL_typename(L, idx));
  id = lua_tolstring(L, idx, &n);
  return rg_check_id(id, n, RG_MAX_ID, "id", e);
}

/* S:key(id, pk) -> pk, bucket | nil, msg, 400 */
static int spec_key (lua_State *L) {
  rg_err e;
  checkspec(L, 1);
  if (id_arg(L, 2, &e)) return rgl_push_fail(L, &e);
  lua_settop(L, 3);
  lua_remove(L, 2);
  return spec_pk(L);
}

/* The item key (cid | pk | id) of a ref: pk .. id .. u16 #pk .. u16 #id. */
static int ref_key (const rg_cspec *sp, const char *ref, size_t n,
                    rg_ikey *k, const char **pk, size_t *pklen,
                    const char **id, size_t *idlen) {
  if (n < 4) return -1;
  *pklen = rg_get_u16((const uint8_t *)ref + n - 4);
  *idlen = rg_get_u16((const uint8_t *)ref + n - 2);
  if (*pklen + *idlen + 4 != n || *pklen < 8 || *pklen + 4 > RG_MAX_KEY / 2)
    return -1;
  *pk = ref;
  *id = ref + *pklen;
  memset(k, 0, sizeof(*k));
  rg_put_u32(k->key, sp->cid);
  memcpy(k->key + 4, ref, *pklen);
  k->hash = rg_get_u64((const uint8_t *)ref);
  k->range = rg_range_of(k->hash, sp->nparts);
  k->lplen = k->len = 4 + *pklen;
  rg_ikey_id(k, *id, *idlen);
  return 0;
}

/* S:id(id) -> true | nil, msg, 400: the id rules */
static int spec_id (lua_State *L) {
  rg_err e;
  checkspec(L, 1);
  if (id_arg(L, 2, &e)) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  return 1;
}

/* S:ref(ref) -> pk, id, bucket | nil when it is no ref */
static int spec_ref (lua_State *L) {
  const rg_cspec *sp = checkspec(L, 1)->spec;
  size_t n, pklen, idlen;
  const char *ref = luaL_checklstring(L, 2, &n), *pk, *id;
  rg_ikey k;
  if (ref_key(sp, ref, n, &k, &pk, &pklen, &id, &idlen)) return 0;
  lua_pushlstring(L, pk, pklen);
  lua_pushlstring(L, id, idlen);
  lua_pushinteger(L, k.range);
  return 3;
}

/* A document argument: a table, or JSON text (400 for anything else). */
static int doc_in (lua_State *L, int idx, cJSON **doc, rg_err *e) {
  *doc = NULL;
  if (lua_type(L, idx) == LUA_TSTRING) {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    return rg_json_parse(s, n, doc, e);
  }
  if (lua_type(L, idx) != LUA_TTABLE)
    return rg_fail(e, 400, "a document must be a table, not %s",
                   luaL_typename(L, idx));
  return rgl_json_from_lua(L, idx, doc, e);
}

typedef struct prep {
  cJSON *doc;
  rg_buf text;
} prep;

static void prep_clear (void *p) {
  prep *q = (prep *)p;
  cJSON_Delete(q->doc);
  q->doc = NULL;
  rg_buf_free(&q->text);
}

typedef struct term_sink {
  lua_State *L;
  int n;
} term_sink;

static void add_term (void *ud, uint64_t id, const uint8_t *term, size_t n) {
  term_sink *t = (term_sink *)ud;
  push_hex(t->L, id);
  lua_rawseti(t->L, -2, ++t->n);
  lua_pushlstring(t->L, (const char *)term, n);
  lua_rawseti(t->L, -2, ++t->n);
}

/* S:prepare(doc, as_stored) -> text, id, pk, bucket, terms, uniques, ttl,
** missing: what a write of `doc` stores, checked as rg_write checks it
** (the system properties dropped, the id, the partition key, the ttl, the
** size); terms = {index, term, ...} (of the system properties too when
** as_stored: what a stored document's index entries are), uniques = {k#,
** digest, ...}; missing: when the document lacks its key (the none
** partition key), the 400 message for a write that does not name that
** partition.  The terms of _ts and _lsn, which the Function sets, are its
** to add (S:info's ts_index and lsn_index). */
static int spec_prepare (lua_State *L) {
  const rg_cspec *sp = checkspec(L, 1)->spec;
  const cJSON *pkv[RG_MAX_PK_PATHS], *jid;
  cJSON *c, *next;
  term_sink ts;
  int64_t ttl;
  rg_ikey k;
  rg_err e;
  prep *q;
  int rc, u, missing = -1;
  int keep = lua_toboolean(L, 3);
  lua_settop(L, 2);
  q = (prep *)rgl_newbox(L, sizeof(prep), prep_clear);   /* 3 */
  lua_newtable(L);                                       /* 4: the terms */
  rg_buf_init(&q->text);
  if ((rc = doc_in(L, 2, &q->doc, &e))) goto fail;
  if (!cJSON_IsObject(q->doc)) {
    rc = rg_fail(&e, 400, "a document must be an object");
    goto fail;
  }
  ts.L = L;
  ts.n = 0;
  if (keep && rg_index_terms(sp, q->doc, add_term, &ts))  /* as stored */
    return luaL_error(L, "out of memory");
  for (c = q->doc->child; c; c = next) {          /* system properties */
    next = c->next;
    if (c->string && (!strcmp(c->string, "_etag") ||
                      !strcmp(c->string, "_ts") || !strcmp(c->string, "_lsn")))
      cJSON_Delete(cJSON_DetachItemViaPointer(q->doc, c));
  }
  jid = cJSON_GetObjectItemCaseSensitive(q->doc, "id");
  if (jid == NULL) {
    rc = rg_fail(&e, 400, "the document has no id");
    goto fail;
  }
  if (!cJSON_IsString(jid)) {
    rc = rg_fail(&e, 400, "id must be a string");
    goto fail;
  }
  if (strstr(jid->valuestring, "\xC0\x80")) {
    rc = rg_fail(&e, 400, "id must not contain '/', '\\', '?', '#' or NUL");
    goto fail;
  }
  if ((rc = rg_check_id(jid->valuestring, strlen(jid->valuestring), RG_MAX_ID,
                        "id", &e)))
    goto fail;
  rg_doc_pk(sp, q->doc, pkv);
  for (u = 0; u < sp->npk; u++) {     /* as write.c checks a document */
    const cJSON *v = pkv[u];
    if (v == NULL) { if (missing < 0) missing = u; }
    else if (!(cJSON_IsString(v) || cJSON_IsNumber(v) || cJSON_IsBool(v) ||
               cJSON_IsNull(v))) {
      rc = rg_fail(&e, 400, "a partition key value must be a string, number, "
                   "boolean or null");
      goto fail;
    }
  }
  if ((rc = rg_ikey_partition(sp, pkv, &k, &e)) ||
      (rc = rg_doc_ttl(sp, q->doc, &ttl, &e)))
    goto fail;
  rg_json_print(q->doc, &q->text);
  if (q->text.oom) return luaL_error(L, "out of memory");
  if (q->text.n + SYSTEM_BYTES > RG_MAX_ITEM) {
    rc = rg_fail(&e, 413, "the item is %lu bytes; the limit is %u",
                 (unsigned long)(q->text.n + SYSTEM_BYTES), RG_MAX_ITEM);
    goto fail;
  }
  lua_pushlstring(L, q->text.p, q->text.n);
  lua_pushstring(L, jid->valuestring);    /* ids hold no NUL */
  push_pk(L, &k);
  lua_pushinteger(L, k.range);
  lua_pushvalue(L, 4);
  if (!keep && rg_index_terms(sp, q->doc, add_term, &ts))
    return luaL_error(L, "out of memory");
  lua_createtable(L, 2 * sp->nuniq, 0);
  for (u = 0; u < sp->nuniq; u++) {
    uint8_t d[16];
    rg_unique_digest(sp, u, q->doc, d);
    lua_pushinteger(L, u + 1);
    lua_rawseti(L, -2, 2 * u + 1);
    lua_pushlstring(L, (const char *)d, 16);
    lua_rawseti(L, -2, 2 * u + 2);
  }
  lua_pushinteger(L, (lua_Integer)ttl);
  if (missing < 0) lua_pushnil(L);
  else lua_pushfstring(L, "the partition key value%s is missing (%s%s)",
                       sp->npk > 1 ? " at a level" : "",
                       sp->npk > 1 ? "every level is required: " : "path ",
                       sp->pk[missing].seg[0]);
  rg_box_done(q);
  return 8;
fail:
  rg_box_done(q);
  return rgl_push_fail(L, &e);
}

typedef struct pcall_ {
  cJSON *doc, *ops;
  rg_patch_op *list;
  rg_buf text;
} pcall_;

static void pcall_clear (void *p) {
  pcall_ *q = (pcall_ *)p;
  cJSON_Delete(q->doc);
  cJSON_Delete(q->ops);
  free(q->list);
  q->doc = q->ops = NULL;
  q->list = NULL;
  rg_buf_free(&q->text);
}

/* Is `neu` still item (id, partition) of `old`? */
static int same_identity (const rg_cspec *sp, const cJSON *old,
                          const cJSON *neu) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(old, "id");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(neu, "id");
  const cJSON *pa[RG_MAX_PK_PATHS], *pb[RG_MAX_PK_PATHS];
  rg_ikey ka, kb;
  if (!cJSON_IsString(a) || !cJSON_IsString(b) ||
      strcmp(a->valuestring, b->valuestring) != 0)
    return 0;
  rg_doc_pk(sp, old, pa);
  rg_doc_pk(sp, neu, pb);
  return rg_ikey_partition(sp, pa, &ka, NULL) == 0 &&
         rg_ikey_partition(sp, pb, &kb, NULL) == 0 &&
         ka.lplen == kb.lplen && memcmp(ka.key, kb.key, ka.lplen) == 0;
}

/* S:patch(text, ops, filter) -> text | nil, msg, status: the stored
** document `text` patched (ops a list of tables or JSON text), as rg_write
** patches: the filter (412), the ops in order (400), the identity kept.
** Without a text, only the ops are checked (true). */
static int spec_patch (lua_State *L) {
  const rg_cspec *sp = checkspec(L, 1)->spec;
  size_t n = 0, flen = 0;
  const char *text = luaL_optlstring(L, 2, NULL, &n);
  const char *filter = luaL_optlstring(L, 4, NULL, &flen);
  pcall_ *q;
  cJSON *neu;
  rg_err e;
  int rc, nops = 0, pass = 1;
  lua_settop(L, 4);
  q = (pcall_ *)rgl_newbox(L, sizeof(pcall_), pcall_clear);
  rg_buf_init(&q->text);
  if (text && (rc = rg_json_parse(text, n, &q->doc, &e))) {
    rc = rg_fail(&e, 500, "corrupt item: %s", e.msg);
    goto fail;
  }
  if (lua_type(L, 3) == LUA_TSTRING) {
    const char *s = lua_tolstring(L, 3, &n);
    rc = rg_json_parse(s, n, &q->ops, &e);
  }
  else if (lua_type(L, 3) == LUA_TTABLE) {
    if ((rc = rgl_json_from_lua(L, 3, &q->ops, &e)) == 0 &&
        cJSON_IsObject(q->ops) && q->ops->child == NULL)
      q->ops->type = cJSON_Array;     /* {} is an empty list here */
  }
  else rc = rg_fail(&e, 400, "patch operations must be a list of tables");
  if (rc || (rc = rg_patch_ops_parse(q->ops, &q->list, &nops, &e))) goto fail;
  if (text == NULL) {                /* the ops alone are checked */
    rg_box_done(q);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (filter && (rc = rg_filter_eval(filter, q->doc, &pass, &e))) goto fail;
  if (!pass) {
    rc = rg_fail(&e, 412, "precondition failed: the patch filter is false "
                 "for the item");
    goto fail;
  }
  if ((neu = cJSON_Duplicate(q->doc, 1)) == NULL)
    return luaL_error(L, "out of memory");
  rc = rg_patch_apply(neu, q->list, nops, &e);
  if (rc == 0 && !same_identity(sp, q->doc, neu))
    rc = rg_fail(&e, 400, "a patch cannot change the id or the partition "
                 "key");
  if (rc == 0) rg_json_print(neu, &q->text);
  cJSON_Delete(neu);
  if (rc) goto fail;
  if (q->text.oom) return luaL_error(L, "out of memory");
  lua_pushlstring(L, q->text.p, q->text.n);
  rg_box_done(q);
  return 1;
fail:
  rg_box_done(q);
  return rgl_push_fail(L, &e);
}
/* }===================================================================== */


/*
** {=====================================================================
** Queries
** ======================================================================
*/
typedef struct cand {
  size_t pos, poslen, text, textlen;    /* offsets in the query's cbuf */
  size_t klen;                          /* the sort key: pos's first klen */
  size_t okey, oklen;                   /* a cut run's: its order key */
  int grouped;                          /* in a run of a cut term */
  uint64_t hash, digest;
} cand;

typedef struct lquery {
  const rg_cspec *spec;               /* kept alive by the uservalue */
  rg_query *q;
  rg_tape ptape;
  rg_arena mem;
  rg_buf ptext, tok;
  rg_qexec *x;
  rg_hplan pl;
  cJSON *params, *pk;
  uint64_t ctx;
  uint8_t secret[16];
  int resumed, rphase;
  const uint8_t *rpos, *rokey;
  size_t rposlen, roklen, rklen;     /* rklen: the resume's sort key */
  int lookphase;                     /* the last phase counted a lookup */
  rg_work work;
  int complete, failed;
  cand *c;
  size_t nc, capc;
  rg_buf cbuf, okey;
  rg_buf rows, offsets;
  rg_udfs udfs;                      /* Q:use_udfs: the records in urec, */
  rg_buf urec;                       /* run in the stepper at pref */
  int pref;
  rg_qtext text;                     /* full text: the policy's languages */
} lquery;

static void lquery_free (lua_State *L, lquery *lq) {
  if (lq->pref) {
    rg_udfs_done(&lq->udfs);
    luaL_unref(L, LUA_REGISTRYINDEX, lq->pref);
    lq->pref = 0;
  }
  rg_buf_free(&lq->urec);
  rg_qexec_free(lq->x);
  lq->x = NULL;
  rg_query_free(lq->q);
  lq->q = NULL;
  rg_tape_free(&lq->ptape);
  rg_arena_free(&lq->mem);
  rg_buf_free(&lq->ptext);
  rg_buf_free(&lq->tok);
  cJSON_Delete(lq->params);
  cJSON_Delete(lq->pk);
  lq->params = lq->pk = NULL;
  free(lq->c);
  lq->c = NULL;
  lq->nc = lq->capc = 0;
  rg_buf_free(&lq->cbuf);
  rg_buf_free(&lq->okey);
  rg_buf_free(&lq->rows);
  rg_buf_free(&lq->offsets);
}

/* Full text on a cluster: the policy's languages; FullTextScore's
** statistics, which need a pass over the container, are not read from
** Redis yet (docs/search.md). */
static int cl_text_lang (void *ud, const char *path, size_t n) {
  return rg_ftpolicy_lang((const rg_cspec *)ud, path, n);
}

static int cl_text_stats (void *ud, const char *path, size_t n, int lang,
                          const char *const *terms, const size_t *lens,
                          int nterms, uint64_t *docs, uint64_t *tokens,
                          uint64_t *df, rg_err *e) {
  (void)ud; (void)path; (void)n; (void)lang; (void)terms; (void)lens;
  (void)nterms; (void)docs; (void)tokens; (void)df;
  return rg_fail(e, 501, "FullTextScore is not available on a Redis "
                 "Cluster yet (its statistics are not read there)");
}

static lquery *checkquery (lua_State *L, int idx) {
  lquery *lq = (lquery *)luaL_checkudata(L, idx, QUERY_MT);
  if (lq->q == NULL) luaL_error(L, "attempt to use a finished query");
  return lq;
}

static int query_gc (lua_State *L) {
  lquery_free(L, (lquery *)luaL_checkudata(L, 1, QUERY_MT));
  return 0;
}

static const char *const query_opts[] = {
  "partition_key", "max_items", "continuation", "full_text_score_scope", NULL
};

/* S:query(sql, params, opts, secret, internal) -> Q | nil, msg, status.
** opts as c:query's; internal: {bound = true (a procedure's: a WHERE
** naming another partition is 400), max_rows, max_bytes, scan = true (the
** source is every item of the partition, as a script's host feeds it)}. */
static int spec_query (lua_State *L) {
  const rg_cspec *sp = checkspec(L, 1)->spec;
  rg_query_req rq;
  lquery *lq;
  size_t slen;
  const char *secret;
  rg_qv *params = NULL;
  rg_err e;
  int rc, scan = 0;
  lua_settop(L, 6);
  rgl_opts_check(L, 4, query_opts, "query");
  secret = luaL_checklstring(L, 5, &slen);
  luaL_argcheck(L, slen == 16, 5, "a secret is 16 bytes");
  memset(&rq, 0, sizeof(rq));
  rq.max_items = (long)rgl_opt_int(L, 4, "max_items", 0, 1, 1 << 30, "query");
  rq.continuation = rgl_opt_lstring(L, 4, "continuation", &rq.contlen,
                                   "query");
  if (lua_istable(L, 6)) {
    lua_getfield(L, 6, "bound");
    if (lua_toboolean(L, -1)) rq.pk_conflict_msg = RG_BOUND_MSG;
    lua_getfield(L, 6, "max_rows");
    rq.max_rows = (uint64_t)luaL_optinteger(L, -1, 0);
    lua_getfield(L, 6, "max_bytes");
    rq.max_bytes = (size_t)luaL_optinteger(L, -1, 0);
    lua_getfield(L, 6, "scan");
    scan = lua_toboolean(L, -1);
    lua_pop(L, 4);
  }
  lq = (lquery *)rg_newuserdata(L, sizeof(lquery));            /* 7 */
  memset(lq, 0, sizeof(*lq));
  luaL_getmetatable(L, QUERY_MT);
  lua_setmetatable(L, -2);
  lua_pushvalue(L, 1);                  /* the spec lives as long */
  rg_setuservalue(L, -2);
  lq->spec = sp;
  memcpy(lq->secret, secret, 16);
  rg_arena_init(&lq->mem);
  rg_buf_init(&lq->ptext);
  rg_buf_init(&lq->tok);
  rg_buf_init(&lq->cbuf);
  rg_buf_init(&lq->urec);
  rg_buf_init(&lq->okey);
  rg_buf_init(&lq->rows);
  rg_buf_init(&lq->offsets);
  if (lua_type(L, 2) != LUA_TSTRING) {
    rc = rg_fail(&e, 400, "the query must be a string, not %s",
                 luaL_typename(L, 2));
    goto fail;
  }
  rq.sql = lua_tolstring(L, 2, &rq.sqllen);
  if (lua_isnil(L, 4)) lua_pushnil(L);
  else lua_getfield(L, 4, "partition_key");                    /* 8 */
  if ((rc = rgl_params_from_lua(L, 3, &lq->params, &e)) ||
      (rc = rgl_query_pk(L, 8, sp, &lq->pk, &rq, &e)))
    goto fail;
  lua_settop(L, 7);
  if ((rc = rg_query_parse(rq.sql, rq.sqllen, 0, &lq->q, &e))) goto fail;
  if (sp->ncp) rg_query_computed(lq->q, sp->cp, sp->ncp);
  if (lq->params) rg_json_print(lq->params, &lq->ptext);
  if (lq->ptext.oom) return luaL_error(L, "out of memory");
  if ((rc = rg_query_bind(lq->q, lq->params ? lq->ptext.p : NULL,
                          lq->ptext.n, &lq->ptape, &lq->mem, &params, &e)) ||
      (rc = rg_query_vpolicy(lq->q, params, sp, &e)) ||
      (rc = rg_query_hplan(lq->q, params, sp, &rq, scan, &lq->mem, &lq->pl,
                           &e)))
    goto fail;
  lq->ctx = rg_query_token_context(sp, &rq, lq->ptext.p, lq->ptext.n,
                                   &lq->pl.lp);
  if (rq.continuation &&
      (rc = rg_token_open(lq->secret, RG_TOKEN_QUERY, lq->ctx,
                          rq.continuation, rq.contlen, &lq->tok, &e)))
    goto fail;
  if ((rc = rg_qexec_new(&lq->x, lq->q, params, lq->pl.mode, lq->pl.tie_desc,
                         rq.max_items,
                         rq.continuation ? (const uint8_t *)lq->tok.p : NULL,
                         lq->tok.n, &e)))
    goto fail;
  rg_qexec_limits(lq->x, rq.max_rows, rq.max_bytes);
  lq->text.ud = (void *)sp;
  lq->text.lang = cl_text_lang;
  lq->text.stats = cl_text_stats;
  rg_qexec_text(lq->x, &lq->text);
  if (sp->ncp) rg_qexec_computed(lq->x, sp->cp, sp->ncp);
  if (lq->pl.has_conds) rg_qexec_conds(lq->x, lq->pl.conds, lq->pl.nconds);
  lq->resumed = rg_qexec_resume(lq->x, &lq->rphase, &lq->rpos,
                                &lq->rposlen, &lq->rokey, &lq->roklen);
  if (lq->resumed) {                 /* a cut run's: the run */
    size_t g = lq->pl.src == RG_HSRC_RANGE && lq->rphase == 0
             ? rg_hplan_group(&lq->pl, lq->rpos, lq->rposlen) : 0;
    lq->rklen = g ? g : lq->rposlen;
  }
  lq->lookphase = -1;
  if (lq->resumed && lq->pl.src == RG_HSRC_TERMS &&
      lq->rphase >= lq->pl.nterms) {
    rc = rg_fail(&e, 400, "invalid continuation token (altered, truncated, "
                 "or made for another query or database)");
    goto fail;
  }
  lq->work.partitions = lq->pl.src == RG_HSRC_NONE ? 0
                     : lq->pl.routed ? 1 : (uint64_t)sp->nparts;
  return 1;
fail:
  lquery_free(L, lq);
  return rgl_push_fail(L, &e);
}

/* The ZRANGEBYLEX bound just above every member starting with p: "(" and
** the smallest string greater than all of them ("+" when none is). */
static void push_after (lua_State *L, const uint8_t *p, size_t n) {
  luaL_Buffer b;
  while (n > 0 && p[n - 1] == 0xFF) n--;
  if (n == 0) { lua_pushliteral(L, "+"); return; }
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '(');
  luaL_addlstring(&b, (const char *)p, n - 1);
  luaL_addchar(&b, (char)(p[n - 1] + 1));
  luaL_pushresult(&b);
}

static void push_from (lua_State *L, const uint8_t *p, size_t n) {
  lua_pushliteral(L, "[");
  lua_pushlstring(L, (const char *)p, n);
  lua_concat(L, 2);
}

/* Sets t.min, t.max (t at idx) for the members starting with p. */
static void prefix_bounds (lua_State *L, int idx, const uint8_t *p,
                           size_t n) {
  push_from(L, p, n);
  lua_setfield(L, idx, "min");
  push_after(L, p, n);
  lua_setfield(L, idx, "max");
}

/* Pushes the ZRANGEBYLEX bounds (into the table on top) of a RANGE's
** members; a resumed phase starts at the resume's run of a cut term, or
** else at its term and partition hash (a member is term .. pk, and a pk
** starts with its hash). */
static void range_bounds (lua_State *L, const lquery *lq, int resume) {
  const rg_hplan *pl = &lq->pl;
  int t = lua_gettop(L);
  const uint8_t *rt = lq->rpos + 12;          /* the resume's term part */
  size_t rn = 0;
  if (resume && lq->rposlen >= 12 + 16)
    rn = lq->rklen < lq->rposlen ? lq->rklen - 12 : lq->rposlen - 12 - 8;
  if (rn == 0) resume = 0;
  if (resume && !pl->desc) push_from(L, rt, rn);
  else if (!pl->has_lo) push_from(L, pl->tpre, pl->tpre_n);
  else if (pl->lo_ex) {              /* "[" and what follows every lo.. */
    size_t n;
    const char *after;
    push_after(L, pl->lo, pl->lo_n);
    after = lua_tolstring(L, -1, &n);
    push_from(L, (const uint8_t *)after + 1, n - 1);
    lua_remove(L, -2);
  }
  else push_from(L, pl->lo, pl->lo_n);
  lua_setfield(L, t, "min");
  if (resume && pl->desc) push_after(L, rt, rn);
  else if (!pl->has_hi) push_after(L, pl->tpre, pl->tpre_n);
  else if (pl->hi_ex) {
    lua_pushliteral(L, "(");
    lua_pushlstring(L, (const char *)pl->hi, pl->hi_n);
    lua_concat(L, 2);
  }
  else push_after(L, pl->hi, pl->hi_n);
  lua_setfield(L, t, "max");
}

/* Pushes a scan phase: the route's partitions (from the resume's bucket
** and hash when resumed in it). */
static void scan_phase (lua_State *L, const lquery *lq, int phase) {
  const rg_hplan *pl = &lq->pl;
  int t;
  lua_createtable(L, 0, 6);
  t = lua_gettop(L);
  lua_pushliteral(L, "scan");
  lua_setfield(L, t, "kind");
  lua_pushinteger(L, phase);
  lua_setfield(L, t, "phase");
  if (pl->routed == RG_HROUTE_PARTITION) {
    push_from(L, pl->lp.key + 4, pl->lp.lplen - 4);
    lua_pushvalue(L, -1);
    lua_setfield(L, t, "min");
    lua_setfield(L, t, "max");
  }
  else if (pl->routed)               /* every partition with the prefix */
    prefix_bounds(L, t, pl->rkey + 4, pl->rklen - 4);
  else {
    lua_pushliteral(L, "-");
    lua_setfield(L, t, "min");
    lua_pushliteral(L, "+");
    lua_setfield(L, t, "max");
    if (lq->resumed && lq->rphase == phase && lq->rposlen >= 12) {
      lua_pushinteger(L, rg_range_of(rg_get_u64(lq->rpos + 4),
                                     lq->spec->nparts));
      lua_setfield(L, t, "resume_bucket");
      push_from(L, lq->rpos + 4, 8);
      lua_setfield(L, t, "resume_min");
    }
  }
}

/* Q:plan() -> {source = "none" | "scan" | "terms" | "range", routed = the
** route's Redis key prefix (a pk, or a hierarchical key's prefix), bucket,
** partitions, index = hex, ordered, stream (the page can be complete
** before the source ends), phases = {...}}: the phases to read,
** in order, from the resumed one, each {kind = "scan" | "index", phase,
** min, max, reverse, resume_bucket, resume_min}.  A phase of an ordered
** plan's index is merged across buckets (Q:flush's frontier). */
static int query_plan (lua_State *L) {
  lquery *lq = checkquery(L, 1);
  const rg_hplan *pl = &lq->pl;
  int i, n = 0, first = lq->resumed ? lq->rphase : 0;
  lua_createtable(L, 0, 8);
  lua_pushstring(L, pl->src == RG_HSRC_NONE ? "none" :
                    pl->src == RG_HSRC_SCAN ? "scan" :
                    pl->src == RG_HSRC_TERMS ? "terms" : "range");
  lua_setfield(L, -2, "source");
  if (pl->routed) {                  /* the route's key prefix */
    lua_pushlstring(L, (const char *)pl->rkey + 4, pl->rklen - 4);
    lua_setfield(L, -2, "routed");
    lua_pushinteger(L, pl->bucket);
    lua_setfield(L, -2, "bucket");
  }
  lua_pushinteger(L, lq->spec->nparts);
  lua_setfield(L, -2, "partitions");
  lua_pushboolean(L, pl->ordered);
  lua_setfield(L, -2, "ordered");
  lua_pushboolean(L, pl->mode == RG_QX_STREAM);     /* may stop early */
  lua_setfield(L, -2, "stream");
  if (pl->src == RG_HSRC_TERMS || pl->src == RG_HSRC_RANGE) {
    push_hex(L, pl->index_id);
    lua_setfield(L, -2, "index");
  }
  lua_newtable(L);
  if (pl->src == RG_HSRC_SCAN) {
    scan_phase(L, lq, 0);
    lua_rawseti(L, -2, ++n);
  }
  else if (pl->src == RG_HSRC_TERMS) {
    for (i = first; i < pl->nterms; i++) {
      luaL_Buffer b;
      lua_createtable(L, 0, 4);
      lua_pushliteral(L, "index");
      lua_setfield(L, -2, "kind");
      lua_pushinteger(L, i);
      lua_setfield(L, -2, "phase");
      luaL_buffinit(L, &b);
      luaL_addlstring(&b, (const char *)pl->term[i], pl->tlen[i]);
      if (pl->routed)
        luaL_addlstring(&b, (const char *)pl->rkey + 4, pl->rklen - 4);
      luaL_pushresult(&b);
      {
        size_t len;
        const uint8_t *p = (const uint8_t *)lua_tolstring(L, -1, &len);
        prefix_bounds(L, lua_gettop(L) - 1, p, len);
      }
      lua_pop(L, 1);
      lua_rawseti(L, -2, ++n);
    }
  }
  else if (pl->src == RG_HSRC_RANGE) {
    if (first == 0) {
      lua_createtable(L, 0, 5);
      lua_pushliteral(L, "index");
      lua_setfield(L, -2, "kind");
      lua_pushinteger(L, 0);
      lua_setfield(L, -2, "phase");
      lua_pushboolean(L, pl->desc);
      lua_setfield(L, -2, "reverse");
      range_bounds(L, lq, lq->resumed && lq->rphase == 0);
      lua_rawseti(L, -2, ++n);
    }
    if (pl->uphase == 2) {           /* the items lacking the path */
      scan_phase(L, lq, 1);
      lua_rawseti(L, -2, ++n);
    }
  }
  lua_setfield(L, -2, "phases");
  return 1;
}

/* Splits an index member (term .. ref): the term's length, or -1 when
** the member ends in no ref. */
static long member_term (const char *m, size_t n) {
  size_t pklen, idlen;
  if (n < 4) return -1;
  pklen = rg_get_u16((const uint8_t *)m + n - 4);
  idlen = rg_get_u16((const uint8_t *)m + n - 2);
  if (pklen < 8 || pklen + idlen + 4 > n) return -1;
  return (long)(n - pklen - idlen - 4);
}

/* Appends to b the local entry key of an index member, up to the
** partition hash (the digest, when given, after it): prefix | term | hash
** for a RANGE, hash alone for TERMS (whose phase is its term). */
static void entry_key (const lquery *lq, rg_buf *b, const char *m,
                       size_t tn, const uint8_t *digest) {
  if (lq->pl.src == RG_HSRC_RANGE) {
    rg_buf_add(b, lq->pl.prefix, 12);
    rg_buf_add(b, m, tn);
  }
  rg_buf_add(b, m + tn, 8);
  if (digest) rg_buf_add(b, digest, 8);
}

/* Is the phase read from an index (not a scan of the route)? */
static int index_phase (const lquery *lq, int phase) {
  return lq->pl.src == RG_HSRC_TERMS ||
         (lq->pl.src == RG_HSRC_RANGE && phase == 0);
}

/* Q:add(ref, text, member): a candidate of the current phase (member: the
** index member it was found under).  Items outside a routed query's route
** are left out.  A candidate of an ordered plan's run of a cut term gets
** its order key now (rg_qexec_okey: the run is sorted on full values). */
static int query_add (lua_State *L) {
  lquery *lq = checkquery(L, 1);
  size_t rn, tn, mn = 0, pklen, idlen;
  const char *ref = luaL_checklstring(L, 2, &rn);
  const char *text = luaL_checklstring(L, 3, &tn);
  const char *member = luaL_optlstring(L, 4, NULL, &mn);
  const char *pk, *id;
  uint8_t dg[8];
  rg_ikey k;
  cand *c;
  if (lq->complete) return 0;
  if (ref_key(lq->spec, ref, rn, &k, &pk, &pklen, &id, &idlen))
    return luaL_error(L, "Q:add: not an item reference");
  if (member && (mn < rn || memcmp(member + mn - rn, ref, rn) != 0))
    return luaL_error(L, "Q:add: the member does not end in the reference");
  if (lq->pl.routed && (k.len < lq->pl.rklen ||
                        memcmp(k.key, lq->pl.rkey, lq->pl.rklen) != 0))
    return 0;
  if (lq->nc == lq->capc) {
    size_t cap = lq->capc ? 2 * lq->capc : 64;
    cand *g = (cand *)realloc(lq->c, cap * sizeof(cand));
    if (g == NULL) return luaL_error(L, "out of memory");
    lq->c = g;
    lq->capc = cap;
  }
  c = &lq->c[lq->nc];
  c->hash = k.hash;
  c->digest = rg_ikey_digest(k.key, k.len);
  rg_put_u64(dg, c->digest);
  c->pos = lq->cbuf.n;
  if (member == NULL)                /* a partition's: a scan */
    rg_buf_add(&lq->cbuf, k.key, k.len);
  else entry_key(lq, &lq->cbuf, member, mn - rn, dg);
  c->poslen = lq->cbuf.n - c->pos;
  c->klen = c->poslen;
  c->grouped = 0;
  c->okey = c->oklen = 0;
  c->text = lq->cbuf.n;
  rg_buf_add(&lq->cbuf, text, tn);
  c->textlen = tn;
  if (lq->cbuf.oom) return luaL_error(L, "out of memory");
  if (member && lq->pl.ordered && lq->pl.src == RG_HSRC_RANGE) {
    size_t g = rg_hplan_group(&lq->pl, (const uint8_t *)lq->cbuf.p + c->pos,
                              c->poslen);
    if (g) {                         /* its order key, after the text */
      rg_qdoc d;
      rg_err e;
      int r;
      memset(&d, 0, sizeof(d));
      d.text = lq->cbuf.p + c->text;
      d.len = tn;
      d.hash = c->hash;
      d.digest = c->digest;
      if ((r = rg_qexec_okey(lq->x, &d, &lq->okey, &e)))
        return rgl_push_fail(L, &e);
      c->klen = g;
      c->grouped = 1;
      c->okey = lq->cbuf.n;
      c->oklen = lq->okey.n;
      rg_buf_add(&lq->cbuf, lq->okey.p, lq->okey.n);
      if (lq->cbuf.oom) return luaL_error(L, "out of memory");
    }
  }
  lq->nc++;
  return 0;
}

/* Compares a and b (lengths an, bn) as the source orders them (backwards
** when desc); a proper prefix comes first. */
static int ordered_cmp (const void *a, size_t an, const void *b, size_t bn,
                        int desc) {
  int c = memcmp(a, b, an < bn ? an : bn);
  if (c == 0) c = an < bn ? -1 : an > bn;
  return desc ? -c : c;
}

static const char *sort_base;
static int sort_desc;

static int cand_cmp (const void *a, const void *b) {
  const cand *x = (const cand *)a, *y = (const cand *)b;
  int c = ordered_cmp(sort_base + x->pos, x->klen, sort_base + y->pos,
                      y->klen, sort_desc);
  if (c) return c;
  if (x->grouped && y->grouped) {    /* one run: its full values' order */
    c = ordered_cmp(sort_base + x->okey, x->oklen, sort_base + y->okey,
                    y->oklen, 0);
    if (c) return c;
  }
  return ordered_cmp(sort_base + x->pos, x->poslen, sort_base + y->pos,
                     y->poslen, sort_desc);
}

/* Does candidate c come before where the previous page ended? */
static int before_resume (const lquery *lq, const cand *c, int desc) {
  const char *p = lq->cbuf.p + c->pos;
  int cmp = ordered_cmp(p, c->klen, lq->rpos, lq->rklen, desc);
  if (cmp) return cmp < 0;
  if (c->grouped)                    /* in the resume's run */
    return ordered_cmp(lq->cbuf.p + c->okey, c->oklen, lq->rokey,
                       lq->roklen, 0) < 0;
  return ordered_cmp(p, c->poslen, lq->rpos, lq->rposlen, desc) < 0;
}

/* Q:flush(phase[, frontier]) -> complete | nil, msg, status, made: feeds
** the candidates added so far, in source order; `complete` once the page
** needs no more documents.  `frontier`: an index phase read from several
** stores at once, the last member read from each store that has more;
** candidates that a later read could still precede (their partition hash,
** or their cut run, not strictly before the furthest-behind store's) are
** kept for the next flush. */
static int query_flush (lua_State *L) {
  lquery *lq = checkquery(L, 1);
  int phase = (int)luaL_checkinteger(L, 2);
  size_t i, kept;
  int has_front = !lua_isnoneornil(L, 3);
  int desc = lq->pl.desc && lq->pl.src == RG_HSRC_RANGE && phase == 0;
  int uo = lq->pl.src == RG_HSRC_RANGE && phase == 1 && lq->pl.uphase == 2;
  rg_buf front;
  rg_err e;
  int r = 0;
  if (lq->failed) return luaL_error(L, "Q:flush after a failure");
  if (index_phase(lq, phase) && lq->lookphase != phase) {
    lq->work.lookups++;              /* one seek per index phase */
    lq->lookphase = phase;
  }
  rg_buf_init(&front);
  if (has_front) {                   /* the furthest behind of the stores' */
    rg_buf one;
    lua_Integer j, n = (lua_Integer)rg_rawlen(L, 3);
    luaL_checktype(L, 3, LUA_TTABLE);
    if (!index_phase(lq, phase))
      return luaL_error(L, "Q:flush: a frontier in a scan phase");
    rg_buf_init(&one);
    for (j = 1; j <= n; j++) {
      const char *m;
      size_t mn;
      long tn;
      lua_rawgeti(L, 3, j);
      m = lua_tolstring(L, -1, &mn);
      if (m == NULL || (tn = member_term(m, mn)) < 0) {
        rg_buf_free(&one);
        rg_buf_free(&front);
        return luaL_error(L, "Q:flush: a frontier is not an index member");
      }
      one.n = 0;
      entry_key(lq, &one, m, (size_t)tn, NULL);
      lua_pop(L, 1);
      if (j == 1 || ordered_cmp(one.p, one.n, front.p, front.n, desc) < 0) {
        front.n = 0;
        rg_buf_add(&front, one.p, one.n);
      }
    }
    rg_buf_free(&one);
    if (front.oom) { rg_buf_free(&front); return luaL_error(L, "out of memory"); }
    has_front = n > 0;
  }
  if (lq->nc > 1) {
    sort_base = lq->cbuf.p;
    sort_desc = desc;
    qsort(lq->c, lq->nc, sizeof(cand), cand_cmp);
  }
  for (i = 0; i < lq->nc && !lq->complete; i++) {
    const cand *c = &lq->c[i];
    const char *p = lq->cbuf.p + c->pos;
    rg_qdoc d;
    if (has_front) {                 /* strictly before the frontier? */
      size_t hk = c->grouped ? c->klen : c->poslen - 8;
      int cmp = memcmp(p, front.p, hk < front.n ? hk : front.n);
      if (desc ? cmp <= 0 : cmp >= 0) break;
    }
    if (lq->resumed && phase == lq->rphase && before_resume(lq, c, desc))
      continue;
    memset(&d, 0, sizeof(d));
    d.text = lq->cbuf.p + c->text;
    d.len = c->textlen;
    d.hash = c->hash;
    d.digest = c->digest;
    d.pos = (const uint8_t *)p;
    d.poslen = c->poslen;
    d.phase = phase;
    d.unordered_only = uo;
    lq->work.loaded++;
    lq->work.loaded_bytes += c->textlen + RG_IHDR_MIN;   /* as stored locally */
    r = rg_qexec_doc(lq->x, &d, &e);
    if (r == 1) lq->complete = 1;
    else if (r) break;
  }
  rg_buf_free(&front);
  if ((r == 0 || r == 1) && i > 0) r = rg_qexec_release(lq->x, &e);
  kept = lq->complete || r ? 0 : lq->nc - i;
  if (kept) {                        /* the kept ones, packed */
    rg_buf nb;
    size_t j;
    rg_buf_init(&nb);
    for (j = 0; j < kept; j++) {
      cand *c = &lq->c[j];
      *c = lq->c[i + j];
      rg_buf_add(&nb, lq->cbuf.p + c->pos, c->poslen);
      rg_buf_add(&nb, lq->cbuf.p + c->text, c->textlen);
      rg_buf_add(&nb, lq->cbuf.p + c->okey, c->oklen);
      c->pos = nb.n - c->oklen - c->textlen - c->poslen;
      c->text = c->pos + c->poslen;
      c->okey = c->text + c->textlen;
    }
    if (nb.oom) { rg_buf_free(&nb); return luaL_error(L, "out of memory"); }
    rg_buf_free(&lq->cbuf);
    lq->cbuf = nb;
  }
  else lq->cbuf.n = 0;
  lq->nc = kept;
  if (r > 1 || r < 0) {
    lq->failed = 1;
    lua_pushnil(L);
    lua_pushstring(L, e.msg);
    lua_pushinteger(L, r);
    lua_pushinteger(L, (lua_Integer)rg_qexec_made(lq->x));
    return 4;
  }
  lua_pushboolean(L, lq->complete);
  return 1;
}

/* Q:udf_names() -> {name, ...}: the user-defined functions the query
** calls, each once. */
static int query_udf_names (lua_State *L) {
  lquery *lq = checkquery(L, 1);
  const rg_query *q = lq->q;
  int i, n = 0;
  lua_newtable(L);
  for (i = 0; q->uses_udf && i < q->nex; i++) {
    if (q->ex[i].k != RG_QE_UDF) continue;
    lua_pushlstring(L, q->ex[i].s, q->ex[i].n);
    lua_pushvalue(L, -1);
    lua_rawget(L, -3);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      lua_pushvalue(L, -1);
      lua_rawseti(L, -3, ++n);
      lua_pushboolean(L, 1);
      lua_rawset(L, -3);
    }
    else lua_pop(L, 2);
  }
  for (i = 1; i <= n; i++) {           /* the array part alone */
    lua_rawgeti(L, -1, i);
    lua_pushnil(L);
    lua_rawset(L, -3);
  }
  return 1;
}

/* The record of function `name` among those Q:use_udfs gave (urec: u32
** name length, name, u64 version, u32 source length, source, ...). */
static int find_udf (void *ud, const char *name, size_t n, const char **src,
                     size_t *len, uint64_t *version) {
  const lquery *lq = (const lquery *)ud;
  const uint8_t *p = (const uint8_t *)lq->urec.p, *end = p + lq->urec.n;
  while (p && p < end) {
    size_t nl = rg_get_u32(p), sl = rg_get_u32(p + 4 + nl + 8);
    if (nl == n && memcmp(p + 4, name, n) == 0) {
      *version = rg_get_u64(p + 4 + nl);
      *src = (const char *)p + 4 + nl + 12;
      *len = sl;
      return 0;
    }
    p += 4 + nl + 12 + sl;
  }
  return 404;
}

/* Q:use_udfs(P, {[name] = {source = s, version = v}, ...}): the records
** of the functions the query calls (an absent one is 404 when called),
** run in stepper P's sandboxes with its budgets. */
static int query_use_udfs (lua_State *L) {
  lquery *lq = checkquery(L, 1);
  luaL_checkudata(L, 2, STEPPER_MT);
  luaL_checktype(L, 3, LUA_TTABLE);
  if (lq->pref) return luaL_error(L, "Q:use_udfs called twice");
  lq->urec.n = 0;
  lua_pushnil(L);
  while (lua_next(L, 3)) {
    uint8_t w[8];
    size_t nl, sl;
    const char *name = lua_tolstring(L, -2, &nl), *src;
    lua_Integer v;
    if (name == NULL || !lua_istable(L, -1))
      return luaL_error(L, "Q:use_udfs: name = {source, version} expected");
    lua_getfield(L, -1, "source");
    lua_getfield(L, -2, "version");
    src = luaL_checklstring(L, -2, &sl);
    v = luaL_checkinteger(L, -1);
    rg_put_u32(w, (uint32_t)nl);
    rg_buf_add(&lq->urec, w, 4);
    rg_buf_add(&lq->urec, name, nl);
    rg_put_u64(w, (uint64_t)v);
    rg_buf_add(&lq->urec, w, 8);
    rg_put_u32(w, (uint32_t)sl);
    rg_buf_add(&lq->urec, w, 4);
    rg_buf_add(&lq->urec, src, sl);
    lua_pop(L, 3);
  }
  if (lq->urec.oom) return luaL_error(L, "out of memory");
  lua_pushvalue(L, 2);
  lq->pref = luaL_ref(L, LUA_REGISTRYINDEX);
  rg_udfs_host(&lq->udfs, ((lstepper *)lua_touserdata(L, 2))->p,
               lq->spec->cid, find_udf, lq);
  rg_qexec_udf(lq->x, &lq->udfs.iface);
  return 0;
}

/* Q:finish(as_text) -> rows, info | nil, msg, status: the page (a Lua
** array, or its JSON text when as_text), info with charge, partitions,
** loaded, index_lookups, cross_partition, count, continuation, made. */
static int query_finish (lua_State *L) {
  lquery *lq = checkquery(L, 1);
  int as_text = lua_toboolean(L, 2);
  size_t count = 0, i, *off;
  rg_buf cont;
  rg_err e;
  lq->tok.n = 0;
  if (lq->pl.src == RG_HSRC_NONE && !lq->complete) {  /* no FROM: its row */
    int r = rg_qexec_once(lq->x, &e);
    lq->complete = 1;
    if (r < 0 || r > 1) return rgl_push_fail(L, &e);
  }
  if (rg_qexec_finish(lq->x, &lq->rows, &lq->offsets, &count, &lq->tok, &e))
    return rgl_push_fail(L, &e);
  lq->work.steps = rg_qexec_steps(lq->x);
  if (as_text) lua_pushlstring(L, lq->rows.p ? lq->rows.p : "[]",
                               lq->rows.p ? lq->rows.n : 2);
  else {
    lua_createtable(L, (int)count, 0);
    if (count == 0) {
      luaL_getmetatable(L, "regolith.array");
      lua_setmetatable(L, -2);
    }
    off = (size_t *)lq->offsets.p;
    for (i = 0; i < count; i++) {
      if (rgl_json_push_stored(L, lq->rows.p + off[2 * i], off[2 * i + 1],
                               &e)) {
        char msg[sizeof(e.msg)];
        memcpy(msg, e.msg, sizeof(msg));
        rg_fail(&e, 400, "a result cannot be returned: %s", msg);
        return rgl_push_fail(L, &e);
      }
      lua_rawseti(L, -2, (int)i + 1);
    }
  }
  rgl_push_query_info(L, &lq->work, lq->pl.src != RG_HSRC_NONE &&
                      lq->pl.routed != RG_HROUTE_PARTITION);
  lua_pushinteger(L, (lua_Integer)count);
  lua_setfield(L, -2, "count");
  lua_pushinteger(L, (lua_Integer)rg_qexec_made(lq->x));
  lua_setfield(L, -2, "made");
  if (lq->tok.n) {
    rg_buf_init(&cont);
    rg_token_make(lq->secret, RG_TOKEN_QUERY, lq->ctx, lq->tok.p, lq->tok.n,
                  &cont);
    if (cont.oom) { rg_buf_free(&cont); return luaL_error(L, "out of memory"); }
    lua_pushlstring(L, cont.p, cont.n);
    lua_setfield(L, -2, "continuation");
    rg_buf_free(&cont);
  }
  {                                    /* the work, for a script's charge */
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, (lua_Integer)lq->work.partitions);
    lua_setfield(L, -2, "partitions");
    lua_pushinteger(L, (lua_Integer)lq->work.lookups);
    lua_setfield(L, -2, "lookups");
    lua_pushinteger(L, (lua_Integer)lq->work.loaded);
    lua_setfield(L, -2, "loaded");
    lua_pushinteger(L, (lua_Integer)lq->work.loaded_bytes);
    lua_setfield(L, -2, "loaded_bytes");
    lua_pushinteger(L, (lua_Integer)lq->work.steps);
    lua_setfield(L, -2, "steps");
    lua_setfield(L, -2, "work");
  }
  lquery_free(L, lq);
  return 2;
}
/* }===================================================================== */


/*
** {=====================================================================
** Resumable script runs
** ======================================================================
*/
typedef struct lrun {
  rg_run *r;
} lrun;

/* core.stepper(budget, memory) -> P */
static int l_stepper (lua_State *L) {
  lua_Integer budget = luaL_optinteger(L, 1, 0);
  lua_Integer memory = luaL_optinteger(L, 2, 0);
  lstepper *ls = (lstepper *)rg_newuserdata(L, sizeof(lstepper));
  ls->p = NULL;
  luaL_getmetatable(L, STEPPER_MT);
  lua_setmetatable(L, -2);
  if ((ls->p = rg_stepper_new((uint64_t)budget, (size_t)memory)) == NULL)
    return luaL_error(L, "out of memory");
  return 1;
}

static lstepper *checkstepper (lua_State *L, int idx) {
  lstepper *ls = (lstepper *)luaL_checkudata(L, idx, STEPPER_MT);
  if (ls->p == NULL) luaL_error(L, "attempt to use a closed script runner");
  return ls;
}

static int stepper_gc (lua_State *L) {
  lstepper *ls = (lstepper *)luaL_checkudata(L, 1, STEPPER_MT);
  rg_stepper_free(ls->p);
  ls->p = NULL;
  return 0;
}

/* P:check("procedure" | "trigger" | "user-defined function", name, source)
** -> true | nil, msg, status */
static int stepper_check (lua_State *L) {
  lstepper *ls = checkstepper(L, 1);
  const char *kind = luaL_checkstring(L, 2);
  size_t n, len;
  const char *name = luaL_checklstring(L, 3, &n);
  const char *src = luaL_checklstring(L, 4, &len);
  rg_err e;
  int tag = strcmp(kind, "procedure") == 0 ? RG_MK_PROC
          : strcmp(kind, "user-defined function") == 0 ? RG_MK_UDF
          : RG_MK_TRIG;
  if (rg_stepper_check(ls->p, tag, name, n, src, len, &e))
    return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  return 1;
}

typedef struct sargs {
  cJSON *pk, *body;
  cJSON **args;
  int nargs;
} sargs;

static void sargs_clear (void *p) {
  sargs *q = (sargs *)p;
  int i;
  cJSON_Delete(q->pk);
  cJSON_Delete(q->body);
  for (i = 0; q->args && i < q->nargs; i++) cJSON_Delete(q->args[i]);
  free(q->args);
  q->pk = q->body = NULL;
  q->args = NULL;
}

/* P:start(S, {kind, name, source, version, pk, args = {n = ...}, op,
** body, id}) -> R | nil, msg, status */
static int stepper_start (lua_State *L) {
  static const char *const kinds[] = { "procedure", "pre", "post", NULL };
  static const char *const ops[] = { "create", "replace", "delete", NULL };
  lstepper *ls = checkstepper(L, 1);
  lspec *sp = checkspec(L, 2);
  rg_run_args a;
  sargs *q;
  lrun *lr;
  rg_err e;
  int i, rc = 0;
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  memset(&a, 0, sizeof(a));
  lua_getfield(L, 3, "kind");                                   /* 4 */
  a.kind = luaL_checkoption(L, -1, NULL, kinds) + 1;
  lua_getfield(L, 3, "name");                                   /* 5 */
  a.name = luaL_checklstring(L, -1, &a.namelen);
  lua_getfield(L, 3, "source");                                 /* 6 */
  a.src = luaL_checklstring(L, -1, &a.srclen);
  lua_getfield(L, 3, "version");                                /* 7 */
  a.version = (uint64_t)luaL_optinteger(L, -1, 0);
  lua_getfield(L, 3, "op");                                     /* 8 */
  if (!lua_isnil(L, -1))
    a.op = luaL_checkoption(L, -1, NULL, ops) == 0 ? RG_OP_CREATE :
           strcmp(lua_tostring(L, -1), "replace") == 0 ? RG_OP_REPLACE
                                                      : RG_OP_DELETE;
  lua_getfield(L, 3, "id");                                     /* 9 */
  a.id = lua_tolstring(L, -1, &a.idlen);
  q = (sargs *)rgl_newbox(L, sizeof(sargs), sargs_clear);      /* 10 */
  lua_getfield(L, 3, "pk");                                     /* 11 */
  if (!lua_isnil(L, 11) && (rc = rgl_json_from_lua(L, 11, &q->pk, &e))) {
    char msg[sizeof(e.msg)];
    memcpy(msg, e.msg, sizeof(msg));
    rg_fail(&e, rc, "the partition key: %s", msg);
    goto fail;
  }
  lua_getfield(L, 3, "body");                                   /* 12 */
  if (!lua_isnil(L, 12) && (rc = doc_in(L, 12, &q->body, &e))) goto fail;
  lua_getfield(L, 3, "args");                                   /* 13 */
  if (lua_istable(L, 13)) {
    lua_getfield(L, 13, "n");
    q->nargs = (int)luaL_optinteger(L, -1, (lua_Integer)rg_rawlen(L, 13));
    lua_pop(L, 1);
    if (q->nargs < 0 || q->nargs > 250)
      return luaL_error(L, "too many arguments");
    if (q->nargs &&
        (q->args = (cJSON **)calloc((size_t)q->nargs, sizeof(cJSON *))) == NULL)
      return luaL_error(L, "out of memory");
    for (i = 0; i < q->nargs; i++) {
      lua_rawgeti(L, 13, i + 1);
      if (!lua_isnil(L, -1) &&
          (rc = rgl_json_from_lua(L, lua_gettop(L), &q->args[i], &e))) {
        char msg[sizeof(e.msg)];
        memcpy(msg, e.msg, sizeof(msg));
        rg_fail(&e, rc, "argument %d: %s", i + 1, msg);
        goto fail;
      }
      lua_pop(L, 1);
    }
  }
  if (q->pk == NULL && q->body && cJSON_IsObject(q->body)) {
    const cJSON *pkv[RG_MAX_PK_PATHS];    /* the body's partition key */
    int npk = sp->spec->npk;
    rg_doc_pk(sp->spec, q->body, pkv);
    for (i = 0; i < npk; i++) if (pkv[i] == NULL) break;
    if (i == npk) {
      if (npk == 1) q->pk = cJSON_Duplicate(pkv[0], 1);
      else if ((q->pk = cJSON_CreateArray()) != NULL)
        for (i = 0; i < npk; i++)
          cJSON_AddItemToArray(q->pk, cJSON_Duplicate(pkv[i], 1));
      if (q->pk == NULL) return luaL_error(L, "out of memory");
    }
  }
  a.spec = sp->spec;
  a.pk = q->pk;
  a.args = q->args;
  a.nargs = q->nargs;
  a.body = q->body;
  lr = (lrun *)rg_newuserdata(L, sizeof(lrun));
  lr->r = NULL;
  luaL_getmetatable(L, RUN_MT);
  lua_setmetatable(L, -2);
  lua_createtable(L, 4, 0);      /* keeps the pool, spec, name, source */
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  lua_pushvalue(L, 2);
  lua_rawseti(L, -2, 2);
  lua_pushvalue(L, 5);
  lua_rawseti(L, -2, 3);
  lua_pushvalue(L, 6);
  lua_rawseti(L, -2, 4);
  rg_setuservalue(L, -2);
  if ((rc = rg_run_start(ls->p, &a, &lr->r, &e))) goto fail;
  rg_box_done(q);
  return 1;
fail:
  rg_box_done(q);
  return rgl_push_fail(L, &e);
}

static int run_gc (lua_State *L) {
  lrun *lr = (lrun *)luaL_checkudata(L, 1, RUN_MT);
  rg_run_free(lr->r);
  lr->r = NULL;
  return 0;
}

/* R:resume(reply) -> request | outcome (script.h) */
static int run_resume (lua_State *L) {
  lrun *lr = (lrun *)luaL_checkudata(L, 1, RUN_MT);
  if (lr->r == NULL) return luaL_error(L, "attempt to use a finished run");
  lua_settop(L, 2);
  rgl_run_resume(L, lr->r, 2);
  lua_getfield(L, -1, "done");
  if (lua_toboolean(L, -1)) {        /* the sandbox went back to its pool */
    rg_run_free(lr->r);
    lr->r = NULL;
  }
  lua_pop(L, 1);
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Tokens, charges
** ======================================================================
*/
static int token_kind (lua_State *L, int idx) {
  static const char *const kinds[] = { "query", "feed", NULL };
  return luaL_checkoption(L, idx, NULL, kinds) == 0 ? RG_TOKEN_QUERY
                                                    : RG_TOKEN_FEED;
}

static const uint8_t *secret_arg (lua_State *L, int idx) {
  size_t n;
  const char *s = luaL_checklstring(L, idx, &n);
  luaL_argcheck(L, n == 16, idx, "a secret is 16 bytes");
  return (const uint8_t *)s;
}

/* core.token_seal(secret, "query" | "feed", context, payload) -> token */
static int l_token_seal (lua_State *L) {
  const uint8_t *secret = secret_arg(L, 1);
  int kind = token_kind(L, 2);
  size_t cn, pn;
  const char *ctx = luaL_checklstring(L, 3, &cn);
  const char *payload = luaL_checklstring(L, 4, &pn);
  rg_buf *out = rgl_newbuf(L);
  rg_token_make(secret, kind, rg_hash(ctx, cn), payload, pn, out);
  if (out->oom) return luaL_error(L, "out of memory");
  lua_pushlstring(L, out->p, out->n);
  rg_box_done(out);
  return 1;
}

/* core.token_open(secret, kind, context, token) -> payload | nil, msg, 400 */
static int l_token_open (lua_State *L) {
  const uint8_t *secret = secret_arg(L, 1);
  int kind = token_kind(L, 2);
  size_t cn, tn;
  const char *ctx = luaL_checklstring(L, 3, &cn);
  const char *tok = luaL_checklstring(L, 4, &tn);
  rg_buf *out = rgl_newbuf(L);
  rg_err e;
  if (rg_token_open(secret, kind, rg_hash(ctx, cn), tok, tn, out, &e))
    return rgl_push_fail(L, &e);
  lua_pushlstring(L, out->p ? out->p : "", out->n);
  rg_box_done(out);
  return 1;
}

/* core.charge({read_units, written, write_extra_kb, terms, lookups,
** partitions, loaded, loaded_bytes, scripts, steps}) -> request units */
static int l_charge (lua_State *L) {
  static const char *const names[] = {
    "read_units", "written", "write_extra_kb", "terms", "lookups",
    "partitions", "loaded", "loaded_bytes", "scripts", "steps", NULL
  };
  rg_work w;
  uint64_t *f[10];
  int i;
  luaL_checktype(L, 1, LUA_TTABLE);
  memset(&w, 0, sizeof(w));
  f[0] = &w.read_units; f[1] = &w.written; f[2] = &w.write_extra_kb;
  f[3] = &w.terms; f[4] = &w.lookups; f[5] = &w.partitions;
  f[6] = &w.loaded; f[7] = &w.loaded_bytes; f[8] = &w.scripts;
  f[9] = &w.steps;
  for (i = 0; names[i]; i++) {
    lua_getfield(L, 1, names[i]);
    *f[i] = (uint64_t)luaL_optinteger(L, -1, 0);
    lua_pop(L, 1);
  }
  lua_pushnumber(L, rg_charge(&w));
  return 1;
}

/* core.read_units(bytes) -> units */
static int l_read_units (lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  lua_pushinteger(L, (lua_Integer)rg_read_units(n < 0 ? 0 : (size_t)n));
  return 1;
}
/* }===================================================================== */


static void new_type (lua_State *L, const char *mt, const luaL_Reg *methods,
                      lua_CFunction gc) {
  luaL_newmetatable(L, mt);
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
}

void rgl_cluster_open (lua_State *L) {
  static const luaL_Reg spec_methods[] = {
    {"info", spec_info}, {"pk", spec_pk}, {"key", spec_key},
    {"ref", spec_ref}, {"id", spec_id}, {"prepare", spec_prepare}, {"patch", spec_patch},
    {"query", spec_query}, {NULL, NULL}
  };
  static const luaL_Reg query_methods[] = {
    {"plan", query_plan}, {"add", query_add}, {"flush", query_flush},
    {"finish", query_finish}, {"udf_names", query_udf_names},
    {"use_udfs", query_use_udfs}, {NULL, NULL}
  };
  static const luaL_Reg stepper_methods[] = {
    {"check", stepper_check}, {"start", stepper_start}, {NULL, NULL}
  };
  static const luaL_Reg run_methods[] = {
    {"resume", run_resume}, {"close", run_gc}, {NULL, NULL}
  };
  static const luaL_Reg funcs[] = {
    {"spec_check", l_spec_check}, {"cluster_spec", l_cluster_spec},
    {"check_name", l_check_name},
    {"stepper", l_stepper}, {"token_seal", l_token_seal},
    {"token_open", l_token_open}, {"charge", l_charge},
    {"read_units", l_read_units}, {NULL, NULL}
  };
  new_type(L, SPEC_MT, spec_methods, spec_gc);
  new_type(L, QUERY_MT, query_methods, query_gc);
  new_type(L, STEPPER_MT, stepper_methods, stepper_gc);
  new_type(L, RUN_MT, run_methods, run_gc);
  luaL_setfuncs(L, funcs, 0);
}
