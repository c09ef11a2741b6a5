/*
** jsengine.c: Duktape itself, compiled from the amalgamated source that
** Debian's duktape-dev installs (/usr/share/duktape/duktape.c, found
** through the include path: the Makefile's DUKTAPE_DIR), with regolith's
** configuration (jsconf.h).  Nothing of Duktape is kept in this tree.
**
** One addition needs Duktape's internals, so it lives here:
** rg_js_counter gives the address of a thread's instruction countdown,
** which js.c's watchdog sets to zero when a run is past its deadline, so
** that the execution-timeout check runs at the next instruction.
*/

#define DUK_COMPILING_DUKTAPE
#include "script/jsconf.h"
#include <duktape.c>

__attribute__ ((visibility("hidden")))
duk_int_t *rg_js_counter (duk_context *ctx) {
  return &((duk_hthread *)ctx)->interrupt_counter;
}
