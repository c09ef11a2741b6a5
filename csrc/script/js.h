/*
** js.h: the JavaScript runtime (js.c), as runner.c and udf.c call it
** (private to script/).
**
** Procedures, triggers and user-defined functions may be written in
** JavaScript, as Cosmos DB's are: the language of a script is told by its
** source (rg_js_is), when it is stored and when it runs, so that one record
** format, one cache and one write path serve both languages.  A JavaScript
** script runs in a Duktape heap of the environment's runtime (one per
** database per process, like the Lua sandbox), in a fresh global
** environment for each run, with the same budgets (instructions, memory,
** a deadline), bound to the same partition, through the same scope and
** the same ctx storage functions (runtime.h: the run is given them) as a
** Lua one.
**
** Invariants: a run's failure (a script error, a budget, an abort) leaves
** no C memory behind and never unwinds past js.c; a stop cannot be caught
** by the script; nothing of one run is seen by the next.
*/

#ifndef rg_js_h
#define rg_js_h

#include <cjson/cJSON.h>

#include "script/budget.h"
#include "script/runtime.h"
#include "script/script.h"
#include "store/scripts.h"

enum { RG_JS_PROC, RG_JS_PRE, RG_JS_POST, RG_JS_UDF };

/* One run of a procedure or a trigger, as runner.c prepared it (binding,
** scope, record); the pointers are the runner's. */
typedef struct rg_jscall {
  int kind;                        /* RG_JS_PROC, PRE or POST */
  const char *name;
  size_t namelen;
  rg_scope *s;
  const rg_wmark *mark;            /* where its writes start (budget.h) */
  const rg_cont *c;
  const uint8_t *ckey;             /* the record's key and version: */
  size_t cklen;                    /*   what names its compiled code */
  uint64_t version;
  const char *src;
  size_t len;
  const rg_ikey *lp;               /* the partition */
  const cJSON *pk;                 /* its key, as given */
  const cJSON *const *pkv;         /* its values, per level */
  cJSON *const *args;              /* procedures: NULL is undefined */
  int nargs;
  cJSON **result;                  /* procedures: the response body */
  rg_buf *log;                     /* console.log lines, or NULL */
  int op;                          /* triggers: RG_OP_CREATE, REPLACE, DELETE */
  cJSON **doc;                     /* pre: the document (NULL: a delete) */
  const char *id;                  /* triggers: the item's id */
  size_t idlen;
  const cJSON *stored;             /* post: the stored document */
  cJSON **reply;                   /* post: what the caller receives, */
  int *replied;                    /*   when the trigger set it */
  const rg_ctxops *ctx;            /* its storage operations (runtime.h) */
} rg_jscall;

/* Is this source JavaScript (docs/scripts.md says how it is told)? */
int  rg_js_is (const char *src, size_t len);
/* Frees a runtime's heap (NULL: nothing). */
void rg_js_free (struct rg_js *js);
/* Is a JavaScript procedure or trigger running now? */
int  rg_js_running (const rg_runtime *rt);
/* Compiles a source as a procedure (tag RG_MK_PROC), trigger or
** user-defined function would be: 0, or 400 with the compiler's message
** (naming the ECMAScript 2015+ syntax the engine lacks, when that is why),
** 408 or 413. */
int  rg_js_check (rg_runtime *rt, int tag, const char *name, size_t n,
                  const char *src, size_t len, rg_err *e);
/* Runs a procedure or a trigger: 0, or the status of its failure. */
int  rg_js_exec (rg_runtime *rt, const rg_jscall *call, rg_err *e);
/* Calls user-defined function `name` (its record `rec`, `key`) for a
** query, as udf.c's Lua calls are made: one execution per query (armed at
** its first call unless a JavaScript script runs), arguments and result
** as JSON text. */
int  rg_js_udf (rg_runtime *rt, rg_udfs *u, const char *name, size_t n,
                const rg_srec *rec, const uint8_t *key, size_t klen,
                const char *const *args, const size_t *lens, int nargs,
                rg_buf *out, rg_err *e);
/* Ends a query's execution of JavaScript functions (udf.c's
** rg_udfs_done). */
void rg_js_udfs_done (rg_runtime *rt, rg_udfs *u);

#endif
