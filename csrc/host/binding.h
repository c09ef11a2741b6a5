/*
** binding.h: the Lua binding's handles, shared by the files of host/.
**
** Handles follow liolib's pattern: a namespaced metatable, created closed
** before the resource is opened, an idempotent close shared by __gc and
** __close, methods that refuse a closed handle.  A container handle keeps
** its database handle alive through its uservalue and refuses to work once
** that is closed; so does a processor's state with its container.  Each
** file registers its own methods on the handle types (rgl_add_methods).
*/

#ifndef rg_binding_h
#define rg_binding_h

#include "luax/compat.h"

#include "luax/luax.h"
#include "store/container.h"
#include "store/env.h"
#include "store/feed.h"
#include "store/layout.h"
#include "store/plan.h"

#define RG_DB_MT   "regolith.db"
#define RG_CONT_MT "regolith.container"

typedef struct rg_db {
  rg_env *env;               /* NULL once closed */
  int sync;
  int readonly;
  lua_Integer script_budget;
  lua_Integer script_memory;
  int max_containers;
} rg_db;

typedef struct rg_lcont {
  rg_db *db;                 /* kept alive through the uservalue */
  rg_cont c;                 /* c.spec NULL once closed */
} rg_lcont;

rg_db    *rgl_checkdb (lua_State *L, int idx);     /* open handles only */
rg_lcont *rgl_checkcont (lua_State *L, int idx);   /* open handles only */
/* Pushes a container handle for `spec` (which it takes) of the database
** handle at dbidx. */
void rgl_push_container (lua_State *L, int dbidx, rg_cspec *spec);

/* The stored form (JSON text, in a box pushed on the stack) of a new
** container's spec from its name and options (db.c): misuse raises, a bad
** name gives 400. */
int  rgl_spec_text (lua_State *L, int nameix, int optsix, rg_buf **out,
                    rg_err *e);
/* A partition key argument (a value, or an array of one value per level)
** as cJSON nodes on the C stack (container.c); strings holding NUL leave a
** copy on the Lua stack while they are used. */
int  rgl_pk_from_lua (lua_State *L, int idx, const rg_cspec *spec,
                      cJSON nodes[RG_MAX_PK_PATHS],
                      const cJSON *pkv[RG_MAX_PK_PATHS], rg_err *e);

/* Query parameters (nil or a table {name = value}, a leading '@'
** allowed) as a JSON object, and opts.partition_key into a request, its
** tree kept in *own (query.c); 400 for what is wrong with them. */
int  rgl_params_from_lua (lua_State *L, int idx, cJSON **out, rg_err *e);
int  rgl_query_pk (lua_State *L, int idx, const rg_cspec *spec, cJSON **own,
                   rg_query_req *rq, rg_err *e);

/* Pushes a batch of changes as a Lua array in the mode's shape. */
int  rgl_batch_push (lua_State *L, const rg_cspec *spec, int mode,
                     const rg_batch *b, rg_err *e);
/* Options shared by c:changes and db:processor (raise on misuse). */
int  rgl_feed_opt_mode (lua_State *L, int idx, const char *what);
void rgl_feed_opt_start (lua_State *L, int idx, int *kind, double *t,
                         const char *what);

/* Each file's registration (module.c calls them). */
void rgl_db_open (lua_State *L);
void rgl_container_open (lua_State *L);
void rgl_query_open (lua_State *L);
void rgl_scripts_open (lua_State *L);
void rgl_feed_open (lua_State *L);
void rgl_processor_open (lua_State *L);
void rgl_cluster_open (lua_State *L);

#endif
