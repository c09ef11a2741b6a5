/*
** luax.h: the helpers every Lua-facing file shares: failures and info
** tables, options tables, boxes for C memory, and running store scopes
** under a protected call.
**
** Rules of the layer (and of every rgl_ function above it): an rgl_
** function takes a lua_State and may raise; misuse (a wrong argument type,
** an unknown option, an option value of the wrong type or range) raises a
** Lua error; expected failures return nil, message, status; success returns
** a result and an info table with `charge` and `status`.  C memory held
** across a call that may raise lives in a box, so that an error frees it.
*/

#ifndef rg_luax_h
#define rg_luax_h

#include "luax/compat.h"

#include "base/charge.h"
#include "base/support.h"
#include "store/env.h"

/* Returns nil, message, status (3 values). */
int rgl_push_fail (lua_State *L, const rg_err *e);
/* Pushes an info table with charge and status; leaves it on the stack.
** Returns the charge. */
double rgl_push_info (lua_State *L, const rg_work *w, int status);
/* The same for a query page: also partitions, loaded, index_lookups and
** cross_partition. */
double rgl_push_query_info (lua_State *L, const rg_work *w, int cross);
/* Sets info.executor on the info table on top: what the executor did to
** carry the plan out (`done`: items_read, index_seeks, index_entries;
** partition_in_memory), apart from the work the plan is charged for. */
void   rgl_push_executor (lua_State *L, const rg_work *done, int inmem);

/* Pushes an array of the lines of `b`, each a u32 length and its bytes
** (a script's ctx:log lines). */
void rgl_push_lines (lua_State *L, const rg_buf *b);

/* Adds functions to the method table (__index) of the handle type `mt`;
** each area (queries, scripts, the feed) registers its own methods. */
void rgl_add_methods (lua_State *L, const char *mt, const luaL_Reg *funcs);

/* Options tables: raise on unknown keys and on wrong types or ranges. */
void rgl_opts_check (lua_State *L, int idx, const char *const *allowed,
                     const char *what);
lua_Integer rgl_opt_int (lua_State *L, int idx, const char *name,
                         lua_Integer def, lua_Integer lo, lua_Integer hi,
                         const char *what);
const char *rgl_opt_string (lua_State *L, int idx, const char *name,
                            const char *what);   /* raises on NUL too */
/* A string option that is data (an etag, a filter, a trigger name, a
** token): its length too, NUL bytes included; rg_opt_text then gives 400
** for one holding NUL (which C strings would cut short). */
const char *rgl_opt_lstring (lua_State *L, int idx, const char *name,
                             size_t *len, const char *what);
int rg_opt_text (const char *s, size_t n, const char *name, rg_err *e);
int rgl_opt_bool (lua_State *L, int idx, const char *name, int def,
                  const char *what);

/* A box: a userdata owning C memory, freed by `cleanup` on __gc (after a
** Lua error) or by the caller with rg_box_done.  The payload is zeroed. */
void *rgl_newbox (lua_State *L, size_t size, void (*cleanup) (void *));
void  rg_box_done (void *payload);
/* A box holding an empty rg_buf. */
rg_buf *rgl_newbuf (lua_State *L);

/* The protect callback of store/env.h for a Lua host (`host` is the
** lua_State): the call runs under lua_pcall, and on an error RG_RAISED is
** returned with the error object on top of the stack. */
int rgl_protect (void *host, void (*call) (void *), void *arg);
/* rg_scope_run with a protected call around the body: what the body raises
** aborts the scope (or rolls its savepoint back) and is raised again here.
** The body sees the caller's stack at the same indices. */
int rgl_scope_run (lua_State *L, rg_env *env, int sync, int savepoint,
                   rg_body body, void *ud, rg_err *e);

#endif
