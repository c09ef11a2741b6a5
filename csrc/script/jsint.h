/*
** jsint.h: the JavaScript runtime's heap, as js.c and jsbudget.c share it
** (private to script/).
**
** js.c runs scripts in a heap; jsbudget.c keeps its budgets: the
** allocator that counts every byte, the interrupt and native checks
** Duktape calls (jsconf.h), the deadline's watchdog.  Duktape (jsengine.c)
** calls jsbudget.c, and js.c calls both, so the three files call each
** other in no cycle.  js.c's opening essay says what the budgets are.
*/

#ifndef rg_jsint_h
#define rg_jsint_h

#include <setjmp.h>
#include <stdint.h>

#include "script/jsconf.h"
#include <duktape.h>

#include "base/deadline.h"
#include "script/js.h"
#include "store/write.h"

#define INTERRUPT     (256u * 1024u)   /* Duktape's interrupt period */
#define NATIVE_COST   10               /* a native call or check */
#define ALLOC_COST    12               /* an allocation costs 12 ... */
#define ALLOC_SHIFT   4                /* ... plus 1/16 per byte */
#define CSTACK_MAX    (2u << 20)       /* C stack a run may use, bytes */

/* A compiled function, cached per record key and version. */
typedef struct jsfn {
  uint8_t key[5 + RG_MAX_NAME];
  size_t klen;
  uint64_t version;
  void *code;                      /* Duktape bytecode */
  size_t n;
} jsfn;

/* A block of the heap: its size before it (the allocator frees them all
** when the heap is abandoned). */
typedef struct blk {
  struct blk *prev, *next;
  size_t n;
  size_t pad;                      /* keeps the data 16-byte aligned */
} blk;

typedef struct rg_js {
  duk_context *ctx;                /* the heap's first thread */
  blk all;                         /* every block, a ring */
  size_t held;                     /* bytes the heap holds */
  jsfn *fns;
  int nfns;
  void *prelude;                   /* the prelude's bytecode */
  size_t nprelude;
  /* the armed run */
  int armed;
  size_t limit;
  uint64_t budget, spent;
  size_t memory;
  int64_t start, deadline;         /* ms */
  int stop, refused;
  unsigned checks;
  char *cbase;                     /* the C stack at arming */
  duk_context *thr;                /* the run's thread */
  volatile duk_int_t *counter;     /* its instruction countdown */
  /* what the run is */
  const rg_jscall *call;
  rg_runtime *rt;
  rg_udfs *udfs;                   /* a query's functions, or NULL */
  int running;                     /* a procedure or a trigger */
  int status;                      /* an abort's status */
  rg_err err;
  /* C memory of the native call in progress */
  cJSON *tmp[2];
  rg_wres wres;
  rg_query_res qres;
  int qlive;
  rg_buf text;
  /* a fatal error abandons the heap */
  jmp_buf *fatal;
} rg_js;

/* The heap running now in this thread (the native check has no argument;
** js.c sets it while a run is armed). */
extern __thread rg_js *rg_js_current;

/* Stops the run for good (RG_STOP_*): its thread interrupts at the next
** instruction, and the interrupt answers "stop" from then on. */
void rg_js_stop (rg_js *js, int why);
/* Adds instructions to the run's work; stops it past the budget or the
** deadline. */
void rg_js_spend (rg_js *js, uint64_t n);
/* The heap's allocator (its ud is the rg_js): every block counted, and
** refused past the armed run's memory budget. */
void *rg_js_alloc (void *ud, duk_size_t n);
void *rg_js_realloc (void *ud, void *p, duk_size_t n);
void rg_js_dealloc (void *ud, void *p);
/* A heap made (+1) or freed (-1): the watchdog ends with the last. */
void rg_js_heaps (int d);
/* The watchdog starts (stops) watching the deadline of the run armed. */
void rg_js_watch (rg_js *js);
void rg_js_unwatch (void);

#endif
