/*
** jsconf.h: regolith's configuration of Duktape, the JavaScript engine
** (private to script/).
**
** Duktape is compiled from Debian's duktape-dev (its amalgamated
** duktape.c, by jsengine.c) with the configuration its package ships,
** changed here in three ways; every file that includes duktape.h includes
** this header first, so that both sides of the API see one configuration:
**   - an execution-timeout check: Duktape counts bytecode instructions and
**     calls rg_js_interrupt every 256K of them, and every time after it
**     has once answered "stop" (the error it throws then is thrown again
**     at the next instruction, so a script cannot catch it);
**   - a native check: Duktape calls rg_js_native_check before every call
**     of a native function, at every level of the regular expression
**     matcher's and the JSON codec's recursions and in number
**     conversions; answering nonzero throws a RangeError there.  js.c
**     charges the work to the run's budget and stops it there too;
**   - the API is hidden: the module exports luaopen_regolith_core only.
** The allocator (the memory budget) is given at heap creation (js.c).
*/

#ifndef rg_jsconf_h
#define rg_jsconf_h

#include <duk_config.h>

#undef DUK_EXTERNAL_DECL
#undef DUK_EXTERNAL
#define DUK_EXTERNAL_DECL  __attribute__ ((visibility("hidden"))) extern
#define DUK_EXTERNAL       __attribute__ ((visibility("hidden")))

#define DUK_USE_INTERRUPT_COUNTER
#define DUK_USE_EXEC_TIMEOUT_CHECK(udata) rg_js_interrupt(udata)
#define DUK_USE_NATIVE_STACK_CHECK() rg_js_native_check()

__attribute__ ((visibility("hidden"))) extern int rg_js_interrupt (void *ud);
__attribute__ ((visibility("hidden"))) extern int rg_js_native_check (void);

#endif
