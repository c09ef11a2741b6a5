/*
** js.c: the JavaScript runtime.  Procedures, triggers and user-defined
** functions written in JavaScript, as Cosmos DB's are, run in Duktape
** (jsengine.c, configured by jsconf.h) with the guarantees of the Lua
** sandbox (docs/scripts.md, JavaScript).
**
** Which scripts.  A source is JavaScript when, past white space and
** comments, it opens with `function` and its parameter list is followed by
** `{`, or opens with a JavaScript comment (`//`, `/ *`): neither is valid
** Lua, so no Lua script is taken for JavaScript (rg_js_is).  Such a source
** is one function, `function name(params) { ... }` (the name is optional);
** it is compiled as a function expression.  A source Duktape cannot
** compile is refused when stored, and when it uses ECMAScript 2015 or
** later syntax (arrow functions, let, classes, template literals, ...)
** the message names it (es_syntax below): the engine speaks ECMAScript 5.1
** with parts of later library (docs/scripts.md lists them).
**
** One heap per runtime.  Each database environment's runtime (runner.c)
** has, beside its Lua sandbox, one Duktape heap, made on first use, whose
** allocator counts every byte it holds.  Compiled functions are cached
** per record key and version as Duktape bytecode (C memory), and so is
** the prelude (jsapi.c), the Cosmos server-side API written in JavaScript
** over a few native functions (`host`, never reachable by a script).
**
** One global environment per run.  Each run (a procedure or a trigger
** call, or a query's user-defined function calls) gets a Duktape thread
** with a fresh set of built-ins and globals (duk_push_thread_new_globalenv),
** so nothing a script assigns, to a global or to a built-in prototype, is
** seen by another run; the prelude runs in it first, removes what a script
** may not have (eval, the Function constructor, the Duktape object) and
** installs getContext, __, ErrorCodes and console.
**
** Budgets (kept by jsbudget.c).  A run is armed with the runtime's
** instruction budget and memory budget:
**   - instructions: Duktape calls rg_js_interrupt every 256K bytecode
**     instructions, which adds them to the work spent; work done in native
**     code is charged explicitly: every native call, regular-expression
**     and JSON recursion step (rg_js_native_check, NATIVE_COST), every
**     allocation (ALLOC_COST plus a byte in 16, as the Lua sandbox does),
**     the Array methods that walk a length without calling back (the
**     prelude charges their length before calling them), and ctx's
**     storage operations (OP_COST, RU_COST, ROW_COST: runtime.h);
**   - a deadline, as the Lua sandbox has (the budget at 50 million
**     instructions a second, at least 5 s): checked at every interrupt and
**     every 64 native checks, and, for a loop of single instructions that
**     take long without calling anything (comparing two huge strings), by a
**     watchdog thread that zeroes the running thread's instruction
**     countdown once the deadline has passed, so that the interrupt runs at
**     the next instruction;
**   - memory: the allocator refuses to grow past the level at arming plus
**     the budget; Duktape answers a refusal with a full collection and
**     tries again, so a second refusal in a row means the memory is held,
**     and the run stops (413).
** A stop cannot be caught: from then on the interrupt answers "stop" at
** every instruction (a catch block cannot run one), every native check
** fails and every allocation is refused, so the error unwinds to the run's
** protected call.  The C stack a run may take is bounded too (CSTACK_MAX,
** checked at every native check).
**
** C memory and errors.  Duktape raises errors by longjmp, from any API
** call that allocates; what a native function holds in C memory (trees, a
** write's result, a query's page) is kept in the heap's `tmp` and freed at
** the next native call and at the end of the run, as runner.c does.  A
** fatal error (Duktape's own failure) abandons the heap: its memory is
** freed with it (the allocator knows every block) and the next run makes
** a new one.
*/

#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "script/jsint.h"
#include "store/catalog.h"
#include "store/write.h"

#define MIN_DEADLINE  5000             /* ms */

duk_int_t *rg_js_counter (duk_context *ctx);      /* jsengine.c */
extern const char rg_js_prelude[];                /* jsapi.c */


/*
** {=====================================================================
** Telling JavaScript from Lua
** ======================================================================
*/
static int is_space (int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

static int is_ident (int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '$' || c >= 0x80;
}

/* Skips white space and JavaScript comments from i; sets *comment when it
** met one. */
static size_t skip_js (const char *s, size_t n, size_t i, int *comment) {
  for (;;) {
    while (i < n && is_space((unsigned char)s[i])) i++;
    if (i + 1 < n && s[i] == '/' && s[i + 1] == '/') {
      *comment = 1;
      while (i < n && s[i] != '\n') i++;
    }
    else if (i + 1 < n && s[i] == '/' && s[i + 1] == '*') {
      const char *end;
      *comment = 1;
      end = n - i - 2 > 0 ? memmem(s + i + 2, n - i - 2, "*/", 2) : NULL;
      i = end ? (size_t)(end - s) + 2 : n;
    }
    else return i;
  }
}

int rg_js_is (const char *src, size_t n) {
  int comment = 0, depth = 0;
  size_t i = skip_js(src, n, 0, &comment);
  if (comment) return 1;
  if (n - i < 8 || memcmp(src + i, "function", 8) != 0 ||
      (i + 8 < n && is_ident((unsigned char)src[i + 8])))
    return 0;
  i = skip_js(src, n, i + 8, &comment);
  while (i < n && is_ident((unsigned char)src[i])) i++;     /* its name */
  i = skip_js(src, n, i, &comment);
  if (i >= n || src[i] != '(') return 0;
  for (; i < n; i++) {               /* the parameter list */
    if (src[i] == '(') depth++;
    else if (src[i] == ')' && --depth == 0) break;
  }
  if (i >= n) return 0;
  i = skip_js(src, n, i + 1, &comment);
  return i < n && src[i] == '{';
}
/* }===================================================================== */


/*
** {=====================================================================
** Arming
** ======================================================================
*/
/* Arms the heap for a run in thread thr. */
static void arm (rg_js *js, rg_runtime *rt, duk_context *thr) {
  char here;
  int64_t ms = (int64_t)(rt->budget / 50000);
  js->armed = 1;
  js->budget = rt->budget;
  js->memory = rt->memory;
  js->spent = 0;
  js->limit = js->held + rt->memory < js->held ? (size_t)-1
              : js->held + rt->memory;
  js->start = rg_coarse_ms();
  js->deadline = js->start + (ms > MIN_DEADLINE ? ms : MIN_DEADLINE);
  js->stop = RG_STOP_NONE;
  js->refused = 0;
  js->checks = 0;
  js->cbase = &here;
  js->thr = thr;
  js->counter = rg_js_counter(thr);
  js->status = 0;
  rg_js_current = js;
  rg_js_watch(js);
}

/* Ends the run's accounting; why it was stopped (RG_STOP_*). */
static int disarm (rg_js *js) {
  rg_js_unwatch();
  js->armed = 0;
  js->thr = NULL;
  js->counter = NULL;
  rg_js_current = NULL;
  return js->stop;
}
/* }===================================================================== */


/*
** {=====================================================================
** The heap
** ======================================================================
*/
static void free_tmp (rg_js *js) {
  cJSON_Delete(js->tmp[0]);
  cJSON_Delete(js->tmp[1]);
  js->tmp[0] = js->tmp[1] = NULL;
  rg_wres_free(&js->wres);
  if (js->qlive) {
    rg_query_res_free(&js->qres);
    js->qlive = 0;
  }
  js->text.n = 0;
}

static void fatal (void *ud, const char *msg) {
  rg_js *js = (rg_js *)ud;
  (void)msg;
  if (js->fatal) longjmp(*js->fatal, 1);
  abort();                           /* outside any run: cannot happen */
}

/* Frees every block of an abandoned heap. */
static void drop_blocks (rg_js *js) {
  while (js->all.next != &js->all) {
    blk *b = js->all.next;
    js->all.next = b->next;
    free(b);
  }
  js->all.prev = &js->all;
  js->held = 0;
}

static void free_fns (rg_js *js) {
  int i;
  for (i = 0; i < js->nfns; i++) free(js->fns[i].code);
  free(js->fns);
  js->fns = NULL;
  js->nfns = 0;
}

void rg_js_free (rg_js *js) {
  if (js == NULL) return;
  rg_js_heaps(-1);
  if (js->ctx) duk_destroy_heap(js->ctx);
  drop_blocks(js);
  free_fns(js);
  free(js->prelude);
  free_tmp(js);
  rg_buf_free(&js->text);
  free(js);
}

/* Abandons a heap after a fatal error: no Duktape call is safe in it. */
static void abandon (rg_js *js) {
  js->ctx = NULL;
  drop_blocks(js);
  free(js->prelude);
  js->prelude = NULL;
  js->armed = 0;
  rg_js_current = NULL;
  rg_js_unwatch();
}

static rg_js *heap_of (rg_runtime *rt, rg_err *e) {
  rg_js *js = rt->js;
  if (js == NULL) {
    if ((js = (rg_js *)calloc(1, sizeof(rg_js))) == NULL) {
      rg_fail(e, 500, "out of memory");
      return NULL;
    }
    js->all.next = js->all.prev = &js->all;
    rg_buf_init(&js->text);
    rt->js = js;
    rg_js_heaps(1);
  }
  if (js->ctx == NULL &&
      (js->ctx = duk_create_heap(rg_js_alloc, rg_js_realloc, rg_js_dealloc, js,
                                 fatal)) == NULL) {
    rg_fail(e, 500, "cannot create the JavaScript heap: out of memory");
    return NULL;
  }
  return js;
}

int rg_js_running (const rg_runtime *rt) {
  return rt->js != NULL && rt->js->running;
}
/* }===================================================================== */


/*
** {=====================================================================
** ECMAScript 2015+ syntax, named
** ======================================================================
*/
typedef struct tok { size_t at, n; } tok;

/* The next token of s from *i (strings, comments and regular expressions
** skipped whole, as a token each); n == 0 at the end. */
static tok next_tok (const char *s, size_t n, size_t *i, int regex_ok) {
  int comment = 0;
  tok t;
  size_t j = skip_js(s, n, *i, &comment);
  t.at = j;
  if (j >= n) { t.n = 0; *i = n; return t; }
  if (is_ident((unsigned char)s[j])) {
    while (j < n && is_ident((unsigned char)s[j])) j++;
  }
  else if (s[j] == '"' || s[j] == '\'') {
    char q = s[j++];
    while (j < n && s[j] != q && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
    if (j < n) j++;
  }
  else if (s[j] == '/' && regex_ok) {
    int cls = 0;
    for (j++; j < n && s[j] != '\n'; j++) {
      if (s[j] == '\\') j++;
      else if (s[j] == '[') cls = 1;
      else if (s[j] == ']') cls = 0;
      else if (s[j] == '/' && !cls) break;
    }
    j++;
    while (j < n && is_ident((unsigned char)s[j])) j++;
  }
  else if (j + 2 < n && memcmp(s + j, "...", 3) == 0) j += 3;
  else if (j + 1 < n && (memcmp(s + j, "=>", 2) == 0 ||
                         memcmp(s + j, "?.", 2) == 0 ||
                         memcmp(s + j, "??", 2) == 0)) j += 2;
  else j++;
  t.n = (j > n ? n : j) - t.at;
  *i = t.at + t.n;
  return t;
}

static int tok_is (const char *s, tok t, const char *w) {
  return t.n == strlen(w) && memcmp(s + t.at, w, t.n) == 0;
}

/* Names the first ECMAScript 2015+ construct of a source, or NULL; *line
** receives its line. */
static const char *es_syntax (const char *s, size_t n, int *line) {
  static const char *const regex_after = "(,=:[!&|?{};+-*%<>~^";
  size_t i = 0;
  tok p = {0, 0}, q = {0, 0}, t;
  int params = 0, pdepth = 0, for_head = 0;
  const char *what = NULL;
  for (;;) {
    int regex_ok = p.n == 0 || (p.n == 1 && strchr(regex_after, s[p.at])) ||
                   tok_is(s, p, "return") || tok_is(s, p, "typeof");
    t = next_tok(s, n, &i, regex_ok);
    if (t.n == 0) break;
    if (s[t.at] == '`') what = "a template literal (`...`)";
    else if (tok_is(s, t, "=>")) what = "an arrow function (=>)";
    else if (tok_is(s, t, "...")) what = "spread or rest syntax (...)";
    else if (tok_is(s, t, "?.")) what = "optional chaining (?.)";
    else if (tok_is(s, t, "??")) what = "the ?? operator";
    else if (tok_is(s, t, "class") && !(p.n == 1 && s[p.at] == '.'))
      what = "a class declaration (class)";
    else if ((tok_is(s, t, "import") || tok_is(s, t, "export")) &&
             !(p.n == 1 && s[p.at] == '.'))
      what = "a module import or export";
    else if (tok_is(s, p, "let") && (is_ident((unsigned char)s[t.at]) ||
                                     s[t.at] == '[' || s[t.at] == '{'))
      what = "a let declaration";
    else if ((tok_is(s, p, "var") || tok_is(s, p, "const")) &&
             (s[t.at] == '[' || s[t.at] == '{'))
      what = "a destructuring declaration";
    else if (tok_is(s, p, "async") && (tok_is(s, t, "function") ||
                                       s[t.at] == '('))
      what = "an async function";
    else if (tok_is(s, t, "await") && !(p.n == 1 && s[p.at] == '.'))
      what = "await";
    else if ((tok_is(s, p, "function") && s[t.at] == '*') ||
             tok_is(s, t, "yield"))
      what = "a generator function (function*, yield)";
    else if (for_head && tok_is(s, t, "of") &&
             is_ident((unsigned char)s[p.at]))
      what = "a for...of loop";
    else if (params && pdepth == 1 && t.n == 1 && s[t.at] == '=')
      what = "a default parameter value";
    if (what) {
      size_t k;
      *line = 1;
      for (k = 0; k < t.at; k++) *line += s[k] == '\n';
      return what;
    }
    /* the state for the next token */
    if (tok_is(s, t, "for")) for_head = -1;
    else if (for_head == -1) for_head = s[t.at] == '(' ? 1 : 0;
    else if (for_head && (s[t.at] == ';' || s[t.at] == ')')) for_head = 0;
    if (s[t.at] == '(' && (tok_is(s, p, "function") ||
                           (is_ident((unsigned char)s[p.at]) &&
                            tok_is(s, q, "function"))))
      params = 1, pdepth = 0;
    if (params && s[t.at] == '(') pdepth++;
    if (params && s[t.at] == ')' && --pdepth == 0) params = 0;
    q = p;
    p = t;
  }
  return NULL;
}
/* Is the source one function and nothing after it but semicolons?
** (Duktape's function compiler stops at the first function's end.) */
static int one_function (const char *s, size_t n) {
  size_t i = 0;
  int depth = 0, opened = 0;
  tok p = {0, 0}, t;
  for (;;) {
    int regex_ok = p.n == 0 || (p.n == 1 && strchr("(,=:[!&|?{};+-*%<>~^", s[p.at])) ||
                   tok_is(s, p, "return") || tok_is(s, p, "typeof");
    t = next_tok(s, n, &i, regex_ok);
    if (t.n == 0) return 1;
    if (opened && depth == 0 && !(t.n == 1 && s[t.at] == ';')) return 0;
    if (t.n == 1 && s[t.at] == '{') depth++, opened = 1;
    else if (t.n == 1 && s[t.at] == '}') depth--;
    p = t;
  }
}

/* }===================================================================== */


/*
** {=====================================================================
** Compiling
** ======================================================================
*/
static const char *what_of (int tag) {
  return tag == RG_MK_PROC ? "procedure" :
         tag == RG_MK_UDF ? "user-defined function" : "trigger";
}

/* What a thrown value says: its string form and, for an error a storage
** operation gave, its `number`.  Both may run the script's code (a
** toString, a getter), so this runs protected, while the run is armed. */
typedef struct thrown { char *out; size_t n; int status; } thrown;

static duk_ret_t thrown_main (duk_context *thr, void *ud) {
  thrown *t = (thrown *)ud;
  if (duk_is_object(thr, -1)) {
    duk_get_prop_string(thr, -1, "number");
    if (duk_is_number(thr, -1)) {
      double d = duk_get_number(thr, -1);
      if (d >= 400 && d <= 599) t->status = (int)d;
    }
    duk_pop(thr);
  }
  snprintf(t->out, t->n, "%s", duk_to_string(thr, -1));
  return 0;
}

/* The message of the value on top of thr, into out; its status (400 unless
** it carries one). */
static int error_text (duk_context *thr, char *out, size_t n) {
  thrown t;
  t.out = out;
  t.n = n;
  t.status = 400;
  snprintf(out, n, "(a thrown value that cannot be made a string)");
  duk_dup_top(thr);
  if (duk_safe_call(thr, thrown_main, &t, 1, 1) != DUK_EXEC_SUCCESS)
    t.status = 400;
  duk_pop(thr);
  return t.status;
}

typedef struct compiling {
  const char *src, *name;
  size_t len, namelen;
} compiling;

/* Compiles the source (on no stack) as a function expression; leaves it.
** Raises the compiler's error. */
static duk_ret_t compile_main (duk_context *thr, void *ud) {
  compiling *c = (compiling *)ud;
  duk_push_lstring(thr, c->src, c->len);
  duk_push_lstring(thr, c->name, c->namelen);
  duk_compile(thr, DUK_COMPILE_FUNCTION);
  if (!one_function(c->src, c->len))
    (void)duk_error(thr, DUK_ERR_SYNTAX_ERROR, "code after the function's end");
  return 1;
}

/* The compiler's failure as a message: the ES2015+ syntax when the source
** has some, else Duktape's own.  (Not inlined into the callers, whose
** setjmp would make its locals volatile.) */
static __attribute__ ((noinline)) int compile_fail (duk_context *thr, int tag, const char *name,
                         size_t n, const char *src, size_t len, rg_err *e) {
  char msg[300];
  int line;
  const char *es = es_syntax(src, len, &line);
  error_text(thr, msg, sizeof(msg));
  if (es)
    return rg_fail(e, 400, "%s '%.*s' does not compile: line %d uses %s, "
                   "ECMAScript 2015 syntax that regolith's JavaScript engine "
                   "(Duktape %ld.%ld, ECMAScript 5.1) does not run; write it in "
                   "ECMAScript 5 (%s)", what_of(tag), (int)n, name, line, es,
                   (long)(DUK_VERSION / 10000), (long)(DUK_VERSION / 100 % 100),
                   msg);
  return rg_fail(e, 400, "%s '%.*s' does not compile: %s (a JavaScript "
                 "script is one function: function name(...) { ... })",
                 what_of(tag), (int)n, name, msg);
}

/* Pushes onto thr the function of a record (from the cache, or compiled
** and cached now); raises the compiler's error. */
static void push_fn (rg_js *js, duk_context *thr, const uint8_t *key,
                      size_t klen, uint64_t version, const char *src,
                      size_t len, const char *name, size_t namelen) {
  jsfn *f = NULL;
  void *buf;
  int i;
  for (i = 0; i < js->nfns; i++)
    if (js->fns[i].klen == klen && memcmp(js->fns[i].key, key, klen) == 0) {
      f = &js->fns[i];
      break;
    }
  if (f && f->version != version) {
    free(f->code);
    f->code = NULL;
  }
  if (f == NULL || f->code == NULL) {
    duk_size_t n;
    const void *code;
    duk_push_lstring(thr, src, len);
    duk_push_lstring(thr, name, namelen);
    duk_compile(thr, DUK_COMPILE_FUNCTION);
    duk_dup_top(thr);
    duk_dump_function(thr);
    code = duk_get_buffer(thr, -1, &n);
    if (f == NULL) {
      jsfn *a = (jsfn *)realloc(js->fns, (size_t)(js->nfns + 1) * sizeof(jsfn));
      if (a == NULL) (void)duk_error(thr, DUK_ERR_ERROR, "out of memory");
      js->fns = a;
      f = &js->fns[js->nfns++];
      memset(f, 0, sizeof(*f));
      memcpy(f->key, key, klen);
      f->klen = klen;
    }
    if ((f->code = malloc(n ? n : 1)) == NULL)
      (void)duk_error(thr, DUK_ERR_ERROR, "out of memory");
    memcpy(f->code, code, n);
    f->n = n;
    f->version = version;
    duk_pop(thr);                    /* the function stays */
    return;
  }
  buf = duk_push_fixed_buffer(thr, f->n);
  memcpy(buf, f->code, f->n);
  duk_load_function(thr);
}

int rg_js_check (rg_runtime *rt, int tag, const char *name, size_t n,
                 const char *src, size_t len, rg_err *e) {
  rg_js *js = heap_of(rt, e);
  duk_context *thr;
  compiling c;
  jmp_buf jb;
  int rc, why;
  if (js == NULL) return e->status;
  if (js->running || js->armed)
    return rg_fail(e, 500, "a script cannot be stored while a script runs");
  duk_push_thread_new_globalenv(js->ctx);
  thr = duk_get_context(js->ctx, -1);
  c.src = src;
  c.len = len;
  c.name = name;
  c.namelen = n;
  js->fatal = &jb;
  if (setjmp(jb)) {
    js->fatal = NULL;
    abandon(js);
    return rg_fail(e, 500, "the JavaScript engine failed while compiling "
                   "%s '%.*s'", what_of(tag), (int)n, name);
  }
  arm(js, rt, thr);
  rc = duk_safe_call(thr, compile_main, &c, 0, 1);
  if (rc != DUK_EXEC_SUCCESS && js->stop == RG_STOP_NONE)
    rc = compile_fail(thr, tag, name, n, src, len, e);
  else if (rc != DUK_EXEC_SUCCESS) rc = -1;
  why = disarm(js);
  if (why == RG_STOP_BUDGET)
    rc = rg_fail(e, 408, "%s '%.*s' exceeded its instruction budget while "
                 "compiling (%llu instructions)", what_of(tag), (int)n, name,
                 (unsigned long long)rt->budget);
  else if (why == RG_STOP_MEMORY)
    rc = rg_fail(e, 413, "%s '%.*s' exceeded its memory budget while "
                 "compiling (%llu bytes)", what_of(tag), (int)n, name,
                 (unsigned long long)rt->memory);
  js->fatal = NULL;
  duk_pop(js->ctx);                  /* the thread */
  duk_gc(js->ctx, 0);
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** The host: what the prelude calls
** ======================================================================
** Each native function is called by the prelude only (a script never
** reaches `host`), with the arguments it checked; each frees the C memory
** of the call before it, as runner.c's ctx methods do.
*/
static rg_js *native (duk_context *thr) {
  rg_js *js = rg_js_current;
  if (js == NULL || !js->armed) (void)duk_error(thr, DUK_ERR_ERROR, "no run");
  if (js->stop) (void)duk_error(thr, DUK_ERR_RANGE_ERROR, "stopped");
  free_tmp(js);
  return js;
}

/* Pushes [status, value]: the value is a message for a failure. */
static duk_ret_t push_status (duk_context *thr, int status, const rg_err *e) {
  duk_push_array(thr);
  duk_push_int(thr, status);
  duk_put_prop_index(thr, -2, 0);
  if (e) {
    duk_push_string(thr, e->msg);
    duk_put_prop_index(thr, -2, 1);
  }
  return 1;
}

/* Pushes JSON text as a value. */
static void push_json (duk_context *thr, const char *text, size_t n) {
  duk_push_lstring(thr, text, n);
  duk_json_decode(thr, -1);
}

/* Pushes a cJSON tree as a value (through its text, in js->text). */
static void push_tree (rg_js *js, duk_context *thr, const cJSON *v) {
  js->text.n = 0;
  rg_json_print(v, &js->text);
  if (js->text.oom) (void)duk_error(thr, DUK_ERR_ERROR, "out of memory");
  push_json(thr, js->text.p, js->text.n);
}

/* The value at idx as a cJSON tree in js->tmp[slot] (JSON.stringify's
** rules); 400 for what is not JSON. */
static int tree_of (rg_js *js, duk_context *thr, duk_idx_t idx, int slot,
                    rg_err *e) {
  const char *text;
  duk_size_t n;
  duk_dup(thr, idx);
  text = duk_json_encode(thr, -1);
  if (text == NULL) {
    duk_pop(thr);
    return rg_fail(e, 400, "the value is not JSON");
  }
  text = duk_get_lstring(thr, -1, &n);
  if (rg_json_parse(text, n, &js->tmp[slot], e)) {
    duk_pop(thr);
    return rg_fail(e, 400, "the value is not JSON: %s", e->msg);
  }
  duk_pop(thr);
  return 0;
}

/* Charges a storage operation by its work since `before`. */
static void charge_op (rg_js *js, const rg_work *before) {
  rg_work w;
  rg_work_diff(&w, &js->call->s->work, before);
  rg_js_spend(js, OP_COST + (uint64_t)(rg_charge(&w) * RU_COST));
}

/* host.read(id, ifNoneMatch) -> [status, doc | message] */
static duk_ret_t h_read (duk_context *thr) {
  rg_js *js = native(thr);
  const rg_jscall *call = js->call;
  rg_work before = call->s->work;
  const char *id, *inm = NULL;
  duk_size_t idlen;
  rg_err e;
  int rc;
  id = duk_require_lstring(thr, 0, &idlen);
  if (!duk_is_null_or_undefined(thr, 1)) inm = duk_require_string(thr, 1);
  if ((rc = rg_check_id(id, idlen, RG_MAX_ID, "id", &e)) == 0)
    rc = call->ctx->read(call->s, call->lp, id, idlen, inm, &js->tmp[0], &e);
  charge_op(js, &before);
  if (rc) return push_status(thr, rc, &e);
  push_status(thr, 200, NULL);
  push_tree(js, thr, js->tmp[0]);
  duk_put_prop_index(thr, -2, 1);
  return 1;
}

/* host.write(op, doc | id, ifMatch) -> [status, doc | message]; op is
** RG_OP_CREATE, REPLACE, UPSERT or DELETE. */
static duk_ret_t h_write (duk_context *thr) {
  rg_js *js = native(thr);
  const rg_jscall *call = js->call;
  rg_work before = call->s->work;
  rg_wreq w;
  rg_err e;
  int rc, i;
  memset(&w, 0, sizeof(w));
  w.op = duk_require_int(thr, 0);
  if (!duk_is_null_or_undefined(thr, 2)) w.if_match = duk_require_string(thr, 2);
  if (w.op == RG_OP_DELETE) {
    duk_size_t n;
    w.id = duk_require_lstring(thr, 1, &n);
    w.idlen = n;
    for (i = 0; i < RG_MAX_PK_PATHS; i++) w.pkv[i] = call->pkv[i];
  }
  else {
    cJSON *self;
    if ((rc = tree_of(js, thr, 1, 0, &e))) return push_status(thr, rc, &e);
    if (!cJSON_IsObject(js->tmp[0])) {
      rg_fail(&e, 400, "a document must be an object");
      return push_status(thr, 400, &e);
    }
    /* the link the runtime gave a document it handed out */
    if ((self = cJSON_DetachItemFromObjectCaseSensitive(js->tmp[0], "_self")))
      cJSON_Delete(self);
    w.doc = js->tmp[0];
  }
  rc = rg_write(call->s, call->c, &w, &js->wres, &e);
  charge_op(js, &before);
  /* the write set is bounded as a Lua script's (rg_script_writes) */
  if (rg_script_writes(call->s, call->mark) == RG_WRITES_OVER)
    rg_js_stop(js, RG_STOP_WRITES);
  if (js->stop) (void)duk_error(thr, DUK_ERR_RANGE_ERROR, "stopped");
  if (rc) return push_status(thr, rc, &e);
  push_status(thr, js->wres.status, NULL);
  if (js->wres.doc) {
    push_tree(js, thr, js->wres.doc);
    duk_put_prop_index(thr, -2, 1);
  }
  return 1;
}

/* host.query(sql, params, pageSize, continuation) -> [status, rows |
** message, continuation]; params is an object {name: value}. */
static duk_ret_t h_query (duk_context *thr) {
  rg_js *js = native(thr);
  const rg_jscall *call = js->call;
  rg_work before = call->s->work;
  rg_query_req q;
  rg_err e;
  duk_size_t n;
  uint64_t left;
  int rc, i;
  memset(&q, 0, sizeof(q));
  q.sql = duk_require_lstring(thr, 0, &n);
  q.sqllen = n;
  if (q.sqllen > RG_MAX_SQL) {
    rg_fail(&e, 400, "the query text is over %u bytes", RG_MAX_SQL);
    return push_status(thr, 400, &e);
  }
  if (!duk_is_null_or_undefined(thr, 1)) {
    if ((rc = tree_of(js, thr, 1, 1, &e))) return push_status(thr, rc, &e);
    q.params = js->tmp[1];
  }
  q.max_items = (long)duk_get_int(thr, 2);
  if (!duk_is_null_or_undefined(thr, 3)) {
    q.continuation = duk_require_lstring(thr, 3, &n);
    q.contlen = n;
  }
  q.has_pk = 1;
  for (i = 0; i < RG_MAX_PK_PATHS; i++) q.pkv[i] = call->pkv[i];
  q.pk_conflict_msg = RG_BOUND_MSG;
  left = js->budget > js->spent ? js->budget - js->spent : 0;
  q.max_rows = left / ROW_COST + 1;
  q.max_bytes = js->limit > js->held ? js->limit - js->held : 1;
  memset(&js->qres, 0, sizeof(js->qres));
  js->qlive = 1;
  rc = call->ctx->query(call->s, call->c, &q, &js->qres, &e);
  if (rc == 408 && js->qres.made > q.max_rows) rg_js_stop(js, RG_STOP_BUDGET);
  if (rc == 413) rg_js_stop(js, RG_STOP_MEMORY);
  rg_js_spend(js, js->qres.made * ROW_COST);
  charge_op(js, &before);
  if (js->stop) (void)duk_error(thr, DUK_ERR_RANGE_ERROR, "stopped");
  if (rc) return push_status(thr, rc, &e);
  push_status(thr, 200, NULL);
  push_json(thr, js->qres.rows.p ? js->qres.rows.p : "[]",
            js->qres.rows.p ? js->qres.rows.n : 2);
  duk_put_prop_index(thr, -2, 1);
  if (js->qres.continuation.n) {
    duk_push_lstring(thr, js->qres.continuation.p, js->qres.continuation.n);
    duk_put_prop_index(thr, -2, 2);
  }
  return 1;
}

/* host.charge(n): work a built-in will do (the prelude's wrappers). */
static duk_ret_t h_charge (duk_context *thr) {
  rg_js *js = rg_js_current;
  double n = duk_require_number(thr, 0);
  if (js == NULL || !js->armed) return 0;
  if (!(n >= 0)) n = 0;
  rg_js_spend(js, n > 1e18 ? (uint64_t)1e18 : (uint64_t)n);
  if (js->stop) (void)duk_error(thr, DUK_ERR_RANGE_ERROR, "stopped");
  return 0;
}

/* host.accepted(): may the script start another storage operation?
** (rg_script_accepted, the rule a Lua script's ctx:is_accepted follows) */
static duk_ret_t h_accepted (duk_context *thr) {
  rg_js *js = rg_js_current;
  rg_runleft r;
  int64_t now = rg_coarse_ms();
  int ok = 0;
  if (js != NULL) {
    r.stopped = !js->armed || js->stop != RG_STOP_NONE;
    r.insns = js->budget;
    r.insns_left = js->spent < js->budget ? js->budget - js->spent : 0;
    r.memory = js->memory;
    r.memory_left = js->limit > js->held ? js->limit - js->held : 0;
    r.time = js->deadline - js->start;
    r.time_left = js->deadline > now ? js->deadline - now : 0;
    ok = rg_script_accepted(&r, js->call ? js->call->s : NULL,
                            js->call ? js->call->mark : NULL);
  }
  duk_push_boolean(thr, ok);
  return 1;
}

/* host.log(line) */
static duk_ret_t h_log (duk_context *thr) {
  rg_js *js = rg_js_current;
  duk_size_t n;
  const char *line = duk_require_lstring(thr, 0, &n);
  rg_buf *log = js && js->call ? js->call->log : NULL;
  if (log && log->n + n + 4 <= LOG_MAX) {
    uint8_t len[4];
    rg_put_u32(len, (uint32_t)n);
    rg_buf_add(log, len, 4);
    rg_buf_add(log, line, n);
  }
  return 0;
}

/* host.abort(message, status): ends the run for good. */
static duk_ret_t h_abort (duk_context *thr) {
  rg_js *js = rg_js_current;
  const char *msg = duk_safe_to_string(thr, 0);
  int status = duk_get_int_default(thr, 1, 400);
  if (status < 400 || status > 599) status = 400;
  if (js) {
    js->status = status;
    rg_fail(&js->err, status, "%.*s", 400, msg);
    rg_js_stop(js, RG_STOP_ABORT);
  }
  return duk_error(thr, DUK_ERR_ERROR, "aborted");
}

/* Builds the host object on top of thr. */
static void push_host (rg_js *js, duk_context *thr) {
  static const duk_function_list_entry fns[] = {
    {"read", h_read, 2}, {"write", h_write, 3}, {"query", h_query, 4},
    {"charge", h_charge, 1}, {"accepted", h_accepted, 0}, {"log", h_log, 1},
    {"abort", h_abort, 2}, {NULL, NULL, 0}
  };
  (void)js;
  duk_push_object(thr);
  duk_put_function_list(thr, -1, fns);
}
/* }===================================================================== */


/*
** {=====================================================================
** Running
** ======================================================================
*/
/* The database's id as the gateway names it: the last part of its
** directory's path, %XX written back (catalog.lua's dirname). */
static void push_dbid (duk_context *thr, const char *path) {
  const char *base = strrchr(path, '/');
  size_t i, n;
  char buf[512];
  base = base && base[1] ? base + 1 : path;
  for (i = n = 0; base[i] && n < sizeof(buf); i++) {
    int hi, lo;
    if (base[i] == '%' && base[i + 1] && base[i + 2] &&
        sscanf(base + i + 1, "%1x%1x", (unsigned *)&hi, (unsigned *)&lo) == 2) {
      buf[n++] = (char)(hi * 16 + lo);
      i += 2;
    }
    else buf[n++] = base[i];
  }
  duk_push_lstring(thr, buf, n);
}

/* Pushes the prelude's setup function (compiled once per heap). */
static void push_prelude (rg_js *js, duk_context *thr) {
  void *buf;
  if (js->prelude == NULL) {
    duk_size_t n;
    const void *code;
    duk_push_string(thr, rg_js_prelude);
    duk_push_string(thr, "regolith");
    duk_compile(thr, DUK_COMPILE_FUNCTION | DUK_COMPILE_STRICT);
    duk_dump_function(thr);
    code = duk_get_buffer(thr, -1, &n);
    if ((js->prelude = malloc(n)) == NULL)
      (void)duk_error(thr, DUK_ERR_ERROR, "out of memory");
    memcpy(js->prelude, code, n);
    js->nprelude = n;
    duk_pop(thr);
  }
  buf = duk_push_fixed_buffer(thr, js->nprelude);
  memcpy(buf, js->prelude, js->nprelude);
  duk_load_function(thr);
}

static const char *const op_names[] = {
  "", "Create", "Replace", "Upsert", "Delete", "Patch", "Read"
};

/* Sets up the run's global environment: calls the prelude with the host
** and the global object and the run's description; leaves the prelude's
** `run` function. */
static void setup (rg_js *js, duk_context *thr, int kind) {
  const rg_jscall *call = js->call;
  push_prelude(js, thr);
  push_host(js, thr);
  duk_push_global_object(thr);
  duk_push_object(thr);              /* what the run is */
  duk_push_string(thr, kind == RG_JS_PROC ? "procedure" :
                  kind == RG_JS_PRE ? "pre" : kind == RG_JS_POST ? "post" :
                  "udf");
  duk_put_prop_string(thr, -2, "kind");
  if (call) {
    const rg_cont *c = call->c;
    push_dbid(thr, rg_env_path(c->env));
    duk_put_prop_string(thr, -2, "db");
    duk_push_string(thr, c->spec->name);
    duk_put_prop_string(thr, -2, "coll");
    if (kind != RG_JS_PROC) {
      duk_push_string(thr, op_names[call->op]);
      duk_put_prop_string(thr, -2, "operation");
    }
  }
  duk_call(thr, 3);
}

/* The protected part of a procedure's or a trigger's run. */
static duk_ret_t exec_main (duk_context *thr, void *ud) {
  rg_js *js = (rg_js *)ud;
  const rg_jscall *call = js->call;
  const cJSON *body = NULL;
  int i;
  setup(js, thr, call->kind);                     /* run */
  push_fn(js, thr, call->ckey, call->cklen, call->version, call->src,
          call->len, call->name, call->namelen);  /* run, fn */
  duk_push_array(thr);                            /* run, fn, args */
  for (i = 0; call->kind == RG_JS_PROC && i < call->nargs; i++) {
    if (call->args[i]) push_tree(js, thr, call->args[i]);
    else duk_push_undefined(thr);
    duk_put_prop_index(thr, -2, (duk_uarridx_t)i);
  }
  if (call->kind == RG_JS_PRE) body = *call->doc;
  else if (call->kind == RG_JS_POST) body = call->stored;
  if (body) push_tree(js, thr, body);
  else if (call->kind == RG_JS_PRE) {             /* a delete: {id} */
    duk_push_object(thr);
    duk_push_lstring(thr, call->id, call->idlen);
    duk_put_prop_string(thr, -2, "id");
  }
  else duk_push_undefined(thr);
  duk_call(thr, 3);                  /* the body as JSON text, if set */
  return 1;
}

/* What a failed run amounts to. */
static int outcome (rg_js *js, const rg_jscall *call, int rc, int why,
                    duk_context *thr, rg_err *e) {
  const char *what = call->kind == RG_JS_PROC ? "procedure" :
                     call->kind == RG_JS_PRE ? "pre-trigger" : "post-trigger";
  int n = (int)call->namelen, status = 400;
  char msg[400];
  if (why == RG_STOP_BUDGET)
    return rg_fail(e, 408, "%s '%.*s' exceeded its instruction budget "
                   "(%llu instructions)", what, n, call->name,
                   (unsigned long long)js->budget);
  if (why == RG_STOP_MEMORY)
    return rg_fail(e, 413, "%s '%.*s' exceeded its memory budget "
                   "(%llu bytes)", what, n, call->name,
                   (unsigned long long)js->memory);
  if (why == RG_STOP_WRITES)
    return rg_script_writes_fail(call->s, what, call->name, call->namelen, e);
  if (why == RG_STOP_ABORT)
    return rg_fail(e, js->status, "%s '%.*s' aborted: %s", what, n,
                   call->name, js->err.msg);
  if (rc == DUK_EXEC_SUCCESS) return 0;
  /* a thrown value: an error a storage operation gave (its number, as
  ** Cosmos DB answers it), or the script's own (400) */
  status = error_text(thr, msg, sizeof(msg));
  if (js->stop != RG_STOP_NONE) return outcome(js, call, rc, js->stop, thr, e);
  return rg_fail(e, status, "%s '%.*s' failed: %s", what, n, call->name, msg);
}

/* Keeps the run's answer (JSON text on top, or undefined). */
static int keep (rg_js *js, const rg_jscall *call, duk_context *thr,
                 rg_err *e) {
  const char *what = call->kind == RG_JS_PRE ? "pre-trigger" : "post-trigger";
  cJSON *v = NULL;
  duk_size_t n;
  const char *text;
  if (!duk_is_string(thr, -1)) {
    if (call->kind == RG_JS_PROC &&
        (*call->result = cJSON_CreateNull()) == NULL)
      return rg_fail(e, 500, "out of memory");
    return 0;
  }
  text = duk_get_lstring(thr, -1, &n);
  if (rg_json_parse(text, n, &v, e))
    return rg_fail(e, 400, "'%.*s' gave a body that is not JSON: %s",
                   (int)call->namelen, call->name, e->msg);
  if (call->kind == RG_JS_PROC) *call->result = v;
  else if (call->kind == RG_JS_PRE) {
    if (*call->doc == NULL) {
      cJSON_Delete(v);
      return rg_fail(e, 400, "%s '%.*s': a delete has no document to "
                     "replace", what, (int)call->namelen, call->name);
    }
    if (!cJSON_IsObject(v) ||
        !call->ctx->same_item(call->c, call->lp, call->id, v)) {
      cJSON_Delete(v);
      return rg_fail(e, 400, "%s '%.*s' failed: a pre-trigger cannot change "
                     "the id or the partition key", what,
                     (int)call->namelen, call->name);
    }
    cJSON_Delete(*call->doc);
    *call->doc = v;
  }
  else {
    cJSON_Delete(*call->reply);
    *call->reply = v;
    *call->replied = 1;
  }
  (void)js;
  return 0;
}

int rg_js_exec (rg_runtime *rt, const rg_jscall *call, rg_err *e) {
  rg_js *js = heap_of(rt, e);
  duk_context *thr;
  jmp_buf jb;
  int rc, why;
  if (js == NULL) return e->status;
  if (js->running || js->armed)
    return rg_fail(e, 500, "a script cannot start while another runs");
  duk_push_thread_new_globalenv(js->ctx);
  thr = duk_get_context(js->ctx, -1);
  js->call = call;
  js->rt = rt;
  js->running = 1;
  js->fatal = &jb;
  if (setjmp(jb)) {
    js->fatal = NULL;
    js->running = 0;
    js->call = NULL;
    free_tmp(js);
    abandon(js);
    return rg_fail(e, 500, "the JavaScript engine failed running '%.*s'",
                   (int)call->namelen, call->name);
  }
  arm(js, rt, thr);
  rc = duk_safe_call(thr, exec_main, js, 0, 1);
  /* still armed: the error's message may run the script's code (a
  ** toString, a getter), which the budget bounds too */
  rc = outcome(js, call, rc, js->stop, thr, e);
  why = disarm(js);
  if (why != RG_STOP_NONE && rc != 408 && rc != 413 && why != RG_STOP_ABORT)
    rc = outcome(js, call, DUK_EXEC_ERROR, why, thr, e);
  if (rc == 0) rc = keep(js, call, thr, e);
  js->fatal = NULL;
  js->running = 0;
  js->call = NULL;
  free_tmp(js);
  duk_pop(js->ctx);                  /* the thread and all it holds */
  if (why != RG_STOP_NONE) duk_gc(js->ctx, 0);
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** User-defined functions
** ======================================================================
** A query's JavaScript functions share one thread (one global environment)
** and one budget, armed at the first call, unless a JavaScript procedure
** or trigger runs the query (ctx's query from a script), whose thread and
** budget they then use.  The query's thread holds its functions in a
** global stash object, by name.
*/
typedef struct jsudf {
  rg_js *js;
  const char *name;
  size_t n;
  const rg_srec *rec;
  const uint8_t *key;
  size_t klen;
  const char *const *args;
  const size_t *lens;
  int nargs;
  rg_buf *out;
} jsudf;

/* Sets up a query's global environment (the prelude, without ctx). */
static duk_ret_t udf_setup (duk_context *thr, void *ud) {
  setup((rg_js *)ud, thr, RG_JS_UDF);
  return 0;
}

static duk_ret_t udf_main (duk_context *thr, void *ud) {
  jsudf *u = (jsudf *)ud;
  const char *text;
  duk_size_t tn;
  int i;
  duk_push_global_stash(thr);
  duk_get_prop_string(thr, -1, "udfs");
  if (!duk_is_object(thr, -1)) {
    duk_pop(thr);
    duk_push_object(thr);
    duk_dup_top(thr);
    duk_put_prop_string(thr, -3, "udfs");
  }                                  /* stash, udfs */
  duk_push_lstring(thr, u->name, u->n);
  duk_get_prop(thr, -2);
  if (!duk_is_function(thr, -1)) {
    duk_pop(thr);
    push_fn(u->js, thr, u->key, u->klen, u->rec->version, u->rec->src,
            u->rec->len, u->name, u->n);
    duk_push_lstring(thr, u->name, u->n);
    duk_dup(thr, -2);
    duk_put_prop(thr, -4);
  }                                  /* stash, udfs, fn */
  duk_push_undefined(thr);
  for (i = 0; i < u->nargs; i++) {
    if (u->args[i] == NULL) duk_push_undefined(thr);
    else push_json(thr, u->args[i], u->lens[i]);
  }
  duk_call_method(thr, u->nargs);
  if (duk_is_undefined(thr, -1)) return 0;
  text = duk_json_encode(thr, -1);
  if (text == NULL) return 0;
  text = duk_get_lstring(thr, -1, &tn);
  rg_buf_add(u->out, text, tn);
  return 0;
}

int rg_js_udf (rg_runtime *rt, rg_udfs *u, const char *name, size_t n,
               const rg_srec *rec, const uint8_t *key, size_t klen,
               const char *const *args, const size_t *lens, int nargs,
               rg_buf *out, rg_err *e) {
  rg_js *js = heap_of(rt, e);
  duk_context *thr;
  jsudf c;
  jmp_buf jb, *outer;
  int rc, why, mine = 0;
  if (js == NULL) return e->status;
  if (u->js_stopped) return u->js_stopped_rc;
  if (js->running) thr = js->thr;    /* a script's query: its budget */
  else {
    if (!u->js_armed) {
      if (js->armed)
        return rg_fail(e, 500, "a query's functions cannot start while "
                       "another query's run");
      duk_push_thread_new_globalenv(js->ctx);
      thr = duk_get_context(js->ctx, -1);
      js->call = NULL;
      js->udfs = u;
      arm(js, rt, thr);
      u->js_armed = 1;
      if (duk_safe_call(thr, udf_setup, js, 0, 1) != DUK_EXEC_SUCCESS) {
        char msg[300];
        error_text(thr, msg, sizeof(msg));
        u->js_stopped = 1;
        return u->js_stopped_rc = rg_fail(e, js->stop == RG_STOP_MEMORY ?
                                          413 : js->stop ? 408 : 500,
                                          "cannot set up user-defined "
                                          "functions: %s", msg);
      }
      duk_pop(thr);
    }
    thr = js->thr;
    mine = 1;
  }
  c.js = js;
  c.name = name;
  c.n = n;
  c.rec = rec;
  c.key = key;
  c.klen = klen;
  c.args = args;
  c.lens = lens;
  c.nargs = nargs;
  c.out = out;
  outer = js->fatal;
  js->fatal = &jb;
  if (setjmp(jb)) {
    js->fatal = NULL;
    js->running = 0;
    abandon(js);
    u->js_armed = 0;
    u->js_stopped = 1;
    u->js_stopped_rc = rg_fail(e, 500, "the JavaScript engine failed running "
                               "user-defined function '%.*s'", (int)n, name);
    if (outer) longjmp(*outer, 1);
    return u->js_stopped_rc;
  }
  rc = duk_safe_call(thr, udf_main, &c, 0, 1);
  why = js->stop;
  js->fatal = outer;
  if (why == RG_STOP_BUDGET)
    rc = rg_fail(e, 408, "user-defined function '%.*s' exceeded the "
                 "instruction budget (%llu instructions)", (int)n, name,
                 (unsigned long long)js->budget);
  else if (why == RG_STOP_MEMORY)
    rc = rg_fail(e, 413, "user-defined function '%.*s' exceeded the memory "
                 "budget (%llu bytes)", (int)n, name,
                 (unsigned long long)js->memory);
  else if (why == RG_STOP_ABORT)
    rc = rg_fail(e, js->status, "user-defined function '%.*s' aborted: %s",
                 (int)n, name, js->err.msg);
  else if (rc != DUK_EXEC_SUCCESS) {
    char msg[300];
    error_text(thr, msg, sizeof(msg));
    rc = rg_fail(e, 400, "user-defined function '%.*s' failed: %s", (int)n,
                 name, msg);
  }
  else rc = out->oom ? rg_fail(e, 500, "out of memory") : 0;
  duk_pop(thr);
  if (why != RG_STOP_NONE && mine) {
    u->js_stopped = 1;
    u->js_stopped_rc = rc;
  }
  return rc;
}

void rg_js_udfs_done (rg_runtime *rt, rg_udfs *u) {
  rg_js *js = rt ? rt->js : NULL;
  if (js == NULL || !u->js_armed) return;
  disarm(js);
  js->udfs = NULL;
  u->js_armed = 0;
  if (js->ctx) {
    duk_pop(js->ctx);                /* the query's thread */
    duk_gc(js->ctx, 0);
  }
}
/* }===================================================================== */
