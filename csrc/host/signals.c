/*
** signals.c: _signals, what the `regolith` command needs to stop cleanly
** on a signal and to read a terminal without blocking Ctrl-C.
**
**   _signals.catch("INT", "TERM", "HUP")  handlers that only record the
**                                         signal (no SA_RESTART, so a sleep
**                                         or a wait returns early)
**   _signals.caught() -> "INT" | "TERM" | "HUP" | nil   and forgets it
**   _signals.release()                    the handlers from before catch
**   _signals.wait_input(seconds) -> bool  is stdin readable within
**                                         seconds? (false on a signal)
**
** Invariants: the handler only sets a sig_atomic_t; catch is idempotent
** per signal (the handler saved to release is the one found the first
** time).  Only the command calls this: never inside nginx, whose master
** and workers own their signals.
*/

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>

#include "host/binding.h"

static const struct { const char *name; int sig; } SIGNALS[] = {
  {"INT", SIGINT}, {"TERM", SIGTERM}, {"HUP", SIGHUP}
};
#define NSIGNALS ((int)(sizeof(SIGNALS) / sizeof(SIGNALS[0])))

static volatile sig_atomic_t pending[NSIGNALS];
static struct sigaction saved[NSIGNALS];
static int installed[NSIGNALS];

static void on_signal (int sig) {
  int i;
  for (i = 0; i < NSIGNALS; i++)
    if (SIGNALS[i].sig == sig) pending[i] = 1;
}

static int index_of (lua_State *L, int arg) {
  const char *name = luaL_checkstring(L, arg);
  int i;
  for (i = 0; i < NSIGNALS; i++)
    if (strcmp(SIGNALS[i].name, name) == 0) return i;
  return luaL_argerror(L, arg, "expected INT, TERM or HUP");
}

/* _signals.catch(name, ...) */
static int l_catch (lua_State *L) {
  int n = lua_gettop(L), a;
  for (a = 1; a <= n; a++) {
    int i = index_of(L, a);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;                 /* no SA_RESTART: waits return EINTR */
    pending[i] = 0;
    if (sigaction(SIGNALS[i].sig, &sa, installed[i] ? NULL : &saved[i]) != 0)
      return luaL_error(L, "sigaction: %s", strerror(errno));
    installed[i] = 1;
  }
  return 0;
}

/* _signals.caught() -> the name of a signal received since, or nil */
static int l_caught (lua_State *L) {
  int i;
  for (i = 0; i < NSIGNALS; i++) {
    if (pending[i]) {
      pending[i] = 0;
      lua_pushstring(L, SIGNALS[i].name);
      return 1;
    }
  }
  lua_pushnil(L);
  return 1;
}

/* _signals.release(): the handlers catch replaced */
static int l_release (lua_State *L) {
  int i;
  for (i = 0; i < NSIGNALS; i++) {
    if (installed[i]) {
      sigaction(SIGNALS[i].sig, &saved[i], NULL);
      installed[i] = 0;
    }
  }
  (void)L;
  return 0;
}

/* _signals.wait_input(seconds) -> is fd 0 readable (or at its end)? */
static int l_wait_input (lua_State *L) {
  lua_Number s = luaL_checknumber(L, 1);
  struct pollfd p;
  int r;
  p.fd = 0;
  p.events = POLLIN;
  p.revents = 0;
  r = poll(&p, 1, s <= 0 ? 0 : (int)(s * 1000));
  lua_pushboolean(L, r > 0);
  return 1;
}

void rgl_signals_open (lua_State *L) {
  static const luaL_Reg fns[] = {
    {"catch", l_catch},
    {"caught", l_caught},
    {"release", l_release},
    {"wait_input", l_wait_input},
    {NULL, NULL}
  };
  luaL_newlib(L, fns);
  lua_setfield(L, -2, "_signals");
}
