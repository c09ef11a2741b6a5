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
/* Is the value at idx the none partition key value (an empty table not
** marked as an array: regolith.object(), the SDKs' {})? */
int  rgl_pk_isnone (lua_State *L, int idx);

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

#endif
