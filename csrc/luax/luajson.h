/*
** luajson.h: Lua values <-> JSON (cJSON trees and JSON text), and the
** regolith.null, array, object and json values of the module.
**
** Invariants: a conversion from Lua validates everything (400 for what
** JSON cannot carry) and builds nothing half; text this core wrote
** (`stored`) is read without re-checking its UTF-8; empty arrays and
** objects come back marked so that they keep their shape.
*/

#ifndef rg_luajson_h
#define rg_luajson_h

#include <cjson/cJSON.h>

#include "luax/compat.h"

#include "base/support.h"

/* Converts the Lua value at `idx` into a new cJSON tree (validating: NaN,
** infinities, cycles, depth, non-string keys, mixed tables, invalid UTF-8,
** functions and userdata give 400).  May raise only on memory errors. */
int  rgl_json_from_lua (lua_State *L, int idx, cJSON **out, rg_err *e);
/* The same, refusing with 413 a tree that would take over `max` bytes (0:
** no bound), checked while it is built. */
int  rgl_json_from_lua_max (lua_State *L, int idx, size_t max, cJSON **out,
                            rg_err *e);
/* Pushes the value of JSON text straight onto the Lua stack (0 or 400). */
int  rgl_json_push_text (lua_State *L, const char *s, size_t n, rg_err *e);
/* The same for text this core wrote (structure checked, UTF-8 trusted). */
int  rgl_json_push_stored (lua_State *L, const char *s, size_t n, rg_err *e);
/* The values of `count` texts this core wrote, the i-th at text +
** off[2i], off[2i + 1] bytes long, as items 1..count of the table on top
** of the stack (0, or 400 with the items before the bad one set). */
int  rgl_json_push_stored_list (lua_State *L, const char *text,
                                const size_t *off, size_t count, rg_err *e);
/* Pushes a tree as a Lua value. */
void rgl_json_push (lua_State *L, const cJSON *v);
/* Registers null, array, object and json.encode/decode in the table on
** top of the stack, and the marker metatables in the registry. */
void rgl_json_open (lua_State *L);
/* Is the value at idx regolith.null? */
int  rgl_json_isnull (lua_State *L, int idx);

#endif
