/*
** pattern.c: Lua patterns for the script sandbox, with a budget.
**
** string.find, match, gmatch and gsub run their matcher in C, where no
** instruction hook can reach: a pattern such as "(.-)(.-)(.-)x" against a
** long subject backtracks for hours inside one VM instruction.  The
** sandbox (sandbox.c) therefore replaces the four functions with this
** matcher, which implements the same pattern language (Lua 5.4: classes
** %a %c %d %g %l %p %s %u %w %x (and the old %z) and their complements,
** sets [...] and [^...], quantifiers * + - ?, anchors ^ and $, captures
** ( ) and position captures (), back-references %1-%9, %bxy and %f[set])
** and counts its
** work: every step of the matcher (one attempt to match a pattern item at
** a position) is charged to the running script's instruction budget as
** STEP_COST instructions (what a step takes, measured against the VM's
** instructions), in batches of CHARGE_BATCH steps, and every call (every
** iteration of gmatch) CALL_COST more, with the steps left over.  When
** the budget (or the time limit) runs out the charge raises an error out
** of the matcher, which holds no C memory (captures live in the match
** state on the C stack, results on the Lua stack).
**
** Plain searches (find with `plain`, or a pattern without specials) are
** charged per candidate position and per byte compared, so a quadratic
** search is bounded too.  Recursion is bounded by MAX_DEPTH ("pattern too
** complex"), captures by MAX_CAPTURES, as in Lua.
*/

#include <ctype.h>
#include <string.h>

#include "script/sandbox.h"

#define MAX_CAPTURES  32
#define MAX_DEPTH     200
#define CHARGE_BATCH  1024
#define STEP_COST     2
#define CALL_COST     24
#define CAP_UNFINISHED (-1)
#define CAP_POSITION   (-2)
#define SPECIALS      "^$*+?.([%-"

typedef struct mstate {
  const char *src, *src_end;   /* the subject */
  const char *p_end;           /* end of the pattern */
  lua_State *L;
  int depth;                   /* recursion left */
  int level;                   /* captures open or closed so far */
  unsigned steps;              /* steps not yet charged */
  struct {
    const char *init;
    ptrdiff_t len;             /* or CAP_UNFINISHED, CAP_POSITION */
  } cap[MAX_CAPTURES];
} mstate;

/* Counts `n` steps; every CHARGE_BATCH of them go to the budget. */
static void step (mstate *ms, unsigned n) {
  ms->steps += n;
  if (ms->steps >= CHARGE_BATCH) {
    unsigned k = ms->steps;
    ms->steps = 0;
    rgl_sandbox_charge(ms->L, (uint64_t)k * STEP_COST);
  }
}

/* Charges the call and the steps not charged yet; returns `n`. */
static int finish (mstate *ms, int n) {
  unsigned k = ms->steps;
  ms->steps = 0;
  rgl_sandbox_charge(ms->L, (uint64_t)k * STEP_COST + CALL_COST);
  return n;
}

static void reset (mstate *ms) {
  ms->level = 0;
  ms->depth = MAX_DEPTH;
}

static void prepare (mstate *ms, lua_State *L, const char *s, size_t ls,
                     const char *p, size_t lp) {
  ms->L = L;
  ms->src = s;
  ms->src_end = s + ls;
  ms->p_end = p + lp;
  ms->steps = 0;
  reset(ms);
}


/*
** {=====================================================================
** Single characters and classes
** ======================================================================
*/
static int class_match (int c, int cl) {
  int r;
  switch (tolower(cl)) {
    case 'a': r = isalpha(c); break;
    case 'c': r = iscntrl(c); break;
    case 'd': r = isdigit(c); break;
    case 'g': r = isgraph(c); break;
    case 'l': r = islower(c); break;
    case 'p': r = ispunct(c); break;
    case 's': r = isspace(c); break;
    case 'u': r = isupper(c); break;
    case 'w': r = isalnum(c); break;
    case 'x': r = isxdigit(c); break;
    case 'z': r = c == 0; break;       /* deprecated, kept as Lua keeps it */
    default: return cl == c;           /* an escaped literal: %. %% ... */
  }
  if (isupper(cl)) r = !r;
  return r != 0;
}

/* Does c belong to the set [..] that spans p (at '[') to ec (at ']')? */
static int set_match (int c, const char *p, const char *ec) {
  int yes = 1;
  if (p[1] == '^') { yes = 0; p++; }
  while (++p < ec) {
    if (*p == '%') {
      p++;
      if (class_match(c, (unsigned char)*p)) return yes;
    }
    else if (p[1] == '-' && p + 2 < ec) {
      if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2]) return yes;
      p += 2;
    }
    else if ((unsigned char)*p == c) return yes;
  }
  return !yes;
}

/* The end of the single-character item at p. */
static const char *item_end (mstate *ms, const char *p) {
  switch (*p++) {
    case '%':
      if (p >= ms->p_end)
        luaL_error(ms->L, "malformed pattern (ends with '%%')");
      return p + 1;
    case '[':
      if (p < ms->p_end && *p == '^') p++;
      do {                               /* the first ']' may be literal */
        if (p >= ms->p_end)
          luaL_error(ms->L, "malformed pattern (missing ']')");
        if (*p++ == '%' && p < ms->p_end) p++;
      } while (p >= ms->p_end || *p != ']');
      return p + 1;
    default:
      return p;
  }
}

/* Does the subject character at s match the item p..ep? */
static int item_match (mstate *ms, const char *s, const char *p,
                       const char *ep) {
  int c;
  if (s >= ms->src_end) return 0;
  c = (unsigned char)*s;
  switch (*p) {
    case '.': return 1;
    case '%': return class_match(c, (unsigned char)p[1]);
    case '[': return set_match(c, p, ep - 1);
    default: return (unsigned char)*p == c;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** The matcher
** ======================================================================
*/
static const char *do_match (mstate *ms, const char *s, const char *p);

static const char *balance (mstate *ms, const char *s, const char *p) {
  int open, close, depth = 1;
  if (p + 1 >= ms->p_end)
    luaL_error(ms->L, "malformed pattern (missing arguments to '%%b')");
  if (s >= ms->src_end || *s != *p) return NULL;
  open = *p;
  close = p[1];
  while (++s < ms->src_end) {
    step(ms, 1);
    if (*s == close) { if (--depth == 0) return s + 1; }
    else if (*s == open) depth++;
  }
  return NULL;
}

/* Greedy: the longest run of the item, then back off until the rest
** matches. */
static const char *expand_max (mstate *ms, const char *s, const char *p,
                               const char *ep) {
  ptrdiff_t i = 0;
  while (item_match(ms, s + i, p, ep)) { i++; step(ms, 1); }
  for (; i >= 0; i--) {
    const char *r = do_match(ms, s + i, ep + 1);
    if (r) return r;
  }
  return NULL;
}

/* Lazy: the shortest run of the item after which the rest matches. */
static const char *expand_min (mstate *ms, const char *s, const char *p,
                               const char *ep) {
  for (;;) {
    const char *r = do_match(ms, s, ep + 1);
    if (r) return r;
    if (!item_match(ms, s, p, ep)) return NULL;
    s++;
    step(ms, 1);
  }
}

static const char *open_capture (mstate *ms, const char *s, const char *p,
                                 ptrdiff_t what) {
  const char *r;
  if (ms->level >= MAX_CAPTURES) luaL_error(ms->L, "too many captures");
  ms->cap[ms->level].init = s;
  ms->cap[ms->level].len = what;
  ms->level++;
  if ((r = do_match(ms, s, p)) == NULL) ms->level--;
  return r;
}

static const char *close_capture (mstate *ms, const char *s, const char *p) {
  const char *r;
  int l;
  for (l = ms->level - 1; l >= 0; l--)
    if (ms->cap[l].len == CAP_UNFINISHED) break;
  if (l < 0) luaL_error(ms->L, "invalid pattern capture");
  ms->cap[l].len = s - ms->cap[l].init;
  if ((r = do_match(ms, s, p)) == NULL) ms->cap[l].len = CAP_UNFINISHED;
  return r;
}

static int capture_index (mstate *ms, int c) {
  int l = c - '1';
  if (l < 0 || l >= ms->level || ms->cap[l].len == CAP_UNFINISHED)
    return luaL_error(ms->L, "invalid capture index %%%d", l + 1);
  return l;
}

static const char *backref (mstate *ms, const char *s, int c) {
  int l = capture_index(ms, c);
  size_t len = (size_t)ms->cap[l].len;
  step(ms, 1 + (unsigned)(len / 64));
  if ((size_t)(ms->src_end - s) >= len &&
      memcmp(ms->cap[l].init, s, len) == 0)
    return s + len;
  return NULL;
}

/*
** Matches the pattern from p against the subject from s; returns the end
** of the match or NULL.  Tail positions loop instead of recursing.
*/
static const char *do_match (mstate *ms, const char *s, const char *p) {
  if (ms->depth-- == 0) luaL_error(ms->L, "pattern too complex");
  step(ms, 1);
  while (s != NULL && p != ms->p_end) {
    const char *ep;
    switch (*p) {
      case '(':
        s = p + 1 < ms->p_end && p[1] == ')'
              ? open_capture(ms, s, p + 2, CAP_POSITION)
              : open_capture(ms, s, p + 1, CAP_UNFINISHED);
        goto done;
      case ')':
        s = close_capture(ms, s, p + 1);
        goto done;
      case '$':
        if (p + 1 != ms->p_end) goto single;
        if (s != ms->src_end) s = NULL;
        goto done;
      case '%':
        if (p + 1 < ms->p_end && p[1] == 'b') {
          if ((s = balance(ms, s, p + 2)) != NULL) p += 4;
          continue;
        }
        if (p + 1 < ms->p_end && p[1] == 'f') {
          int prev, cur;
          p += 2;
          if (p >= ms->p_end || *p != '[')
            luaL_error(ms->L, "missing '[' after '%%f' in pattern");
          ep = item_end(ms, p);
          prev = s == ms->src ? 0 : (unsigned char)s[-1];
          cur = s < ms->src_end ? (unsigned char)*s : 0;
          if (!set_match(prev, p, ep - 1) && set_match(cur, p, ep - 1))
            p = ep;
          else s = NULL;
          continue;
        }
        if (p + 1 < ms->p_end && isdigit((unsigned char)p[1])) {
          if ((s = backref(ms, s, (unsigned char)p[1])) != NULL) p += 2;
          continue;
        }
        goto single;
      default:
      single:
        ep = item_end(ms, p);
        if (!item_match(ms, s, p, ep)) {
          if (ep < ms->p_end && (*ep == '*' || *ep == '?' || *ep == '-')) {
            p = ep + 1;                  /* zero occurrences */
            continue;
          }
          s = NULL;
          continue;
        }
        if (ep < ms->p_end) {
          switch (*ep) {
            case '?': {
              const char *r = do_match(ms, s + 1, ep + 1);
              if (r) s = r;
              else { p = ep + 1; continue; }
              goto done;
            }
            case '+': s = expand_max(ms, s + 1, p, ep); goto done;
            case '*': s = expand_max(ms, s, p, ep); goto done;
            case '-': s = expand_min(ms, s, p, ep); goto done;
            default: break;
          }
        }
        s++;
        p = ep;
        continue;
    }
  }
done:
  ms->depth++;
  return s;
}
/* }===================================================================== */


/*
** {=====================================================================
** Captures and the library functions
** ======================================================================
*/
static void push_capture (mstate *ms, int i, const char *s, const char *e) {
  if (i >= ms->level) {
    if (i != 0) luaL_error(ms->L, "invalid capture index %%%d", i + 1);
    lua_pushlstring(ms->L, s, (size_t)(e - s));   /* the whole match */
    return;
  }
  if (ms->cap[i].len == CAP_UNFINISHED)
    luaL_error(ms->L, "unfinished capture");
  if (ms->cap[i].len == CAP_POSITION)
    lua_pushinteger(ms->L, (lua_Integer)(ms->cap[i].init - ms->src) + 1);
  else
    lua_pushlstring(ms->L, ms->cap[i].init, (size_t)ms->cap[i].len);
}

/* Pushes the captures (or the whole match when there are none and s is
** given); returns how many. */
static int push_captures (mstate *ms, const char *s, const char *e) {
  int n = (ms->level == 0 && s) ? 1 : ms->level, i;
  luaL_checkstack(ms->L, n, "too many captures");
  for (i = 0; i < n; i++) push_capture(ms, i, s, e);
  return n;
}

/* A position argument: negative counts from the end; clipped to 1. */
static size_t start_of (lua_Integer pos, size_t len) {
  if (pos > 0) return (size_t)pos;
  if (pos == 0) return 1;
  if (pos < -(lua_Integer)len) return 1;
  return len + (size_t)pos + 1;
}

static int has_specials (const char *p, size_t lp) {
  size_t i;
  for (i = 0; i < lp; i++)
    if (p[i] && strchr(SPECIALS, p[i])) return 1;
  return 0;
}

/* A plain search, charged per candidate and per byte compared. */
static const char *plain_find (mstate *ms, const char *s, size_t ls,
                               const char *p, size_t lp) {
  const char *end;
  if (lp == 0) return s;
  if (lp > ls) return NULL;
  end = s + (ls - lp) + 1;
  while (s < end) {
    const char *hit = (const char *)memchr(s, *p, (size_t)(end - s));
    if (hit == NULL) {
      step(ms, 1 + (unsigned)((size_t)(end - s) / 64));
      return NULL;
    }
    step(ms, 1 + (unsigned)((size_t)(hit - s) / 64) + (unsigned)(lp / 64));
    if (memcmp(hit + 1, p + 1, lp - 1) == 0) return hit;
    s = hit + 1;
  }
  return NULL;
}

static int find_aux (lua_State *L, int find) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = start_of(luaL_optinteger(L, 3, 1), ls) - 1;
  mstate ms;
  if (init > ls) {
    lua_pushnil(L);
    return 1;
  }
  prepare(&ms, L, s, ls, p, lp);
  if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
    const char *hit = plain_find(&ms, s + init, ls - init, p, lp);
    if (hit) {
      lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
      lua_pushinteger(L, (lua_Integer)(hit - s + lp));
      return finish(&ms, 2);
    }
  }
  else {
    const char *s1 = s + init;
    int anchor = lp > 0 && *p == '^';
    if (anchor) { p++; ms.p_end = p + lp - 1; }
    do {
      const char *e;
      reset(&ms);
      if ((e = do_match(&ms, s1, p)) != NULL) {
        if (find) {
          lua_pushinteger(L, (lua_Integer)(s1 - s) + 1);
          lua_pushinteger(L, (lua_Integer)(e - s));
          return finish(&ms, push_captures(&ms, NULL, NULL) + 2);
        }
        return finish(&ms, push_captures(&ms, s1, e));
      }
    } while (s1++ < ms.src_end && !anchor);
  }
  lua_pushnil(L);
  return finish(&ms, 1);
}

static int l_find (lua_State *L) { return find_aux(L, 1); }
static int l_match (lua_State *L) { return find_aux(L, 0); }

/* The iterator of gmatch; upvalues: subject, pattern, next position,
** end of the last match (-1: none). */
static int gmatch_next (lua_State *L) {
  size_t ls, lp;
  const char *s = lua_tolstring(L, lua_upvalueindex(1), &ls);
  const char *p = lua_tolstring(L, lua_upvalueindex(2), &lp);
  lua_Integer pos = lua_tointeger(L, lua_upvalueindex(3));
  lua_Integer last = lua_tointeger(L, lua_upvalueindex(4));
  const char *src;
  mstate ms;
  prepare(&ms, L, s, ls, p, lp);
  for (src = s + pos; src <= ms.src_end; src++) {
    const char *e;
    reset(&ms);
    if ((e = do_match(&ms, src, p)) != NULL && (e - s) != last) {
      lua_pushinteger(L, (lua_Integer)(e - s));
      lua_pushvalue(L, -1);
      lua_replace(L, lua_upvalueindex(3));
      lua_replace(L, lua_upvalueindex(4));
      return finish(&ms, push_captures(&ms, src, e));
    }
  }
  return finish(&ms, 0);
}

static int l_gmatch (lua_State *L) {
  size_t ls;
  lua_Integer init;
  luaL_checklstring(L, 1, &ls);
  luaL_checkstring(L, 2);
  init = (lua_Integer)start_of(luaL_optinteger(L, 3, 1), ls) - 1;
  if (init > (lua_Integer)ls) init = (lua_Integer)ls + 1;
  lua_settop(L, 2);
  lua_pushinteger(L, init);
  lua_pushinteger(L, -1);
  lua_pushcclosure(L, gmatch_next, 4);
  return 1;
}

/* Appends the replacement string for one match ("%0".."%9", "%%"). */
static void add_string (mstate *ms, luaL_Buffer *b, const char *s,
                        const char *e, int repl) {
  size_t l, i;
  const char *r = lua_tolstring(ms->L, repl, &l);
  step(ms, 1 + (unsigned)(l / 64));
  for (i = 0; i < l; i++) {
    if (r[i] != '%') { luaL_addchar(b, r[i]); continue; }
    i++;
    if (i < l && r[i] == '%') luaL_addchar(b, '%');
    else if (i < l && isdigit((unsigned char)r[i])) {
      if (r[i] == '0') luaL_addlstring(b, s, (size_t)(e - s));
      else {
        push_capture(ms, r[i] - '1', s, e);   /* a string or a position */
        luaL_addvalue(b);
      }
    }
    else luaL_error(ms->L, "invalid use of '%%' in replacement string");
  }
}

/* Appends what one match becomes; returns whether it changed. */
static int add_value (mstate *ms, luaL_Buffer *b, const char *s,
                      const char *e, int tr) {
  lua_State *L = ms->L;
  switch (tr) {
    case LUA_TFUNCTION: {
      int n;
      rgl_sandbox_cstack(L);          /* a replacement may gsub again */
      lua_pushvalue(L, 3);
      n = push_captures(ms, s, e);
      lua_call(L, n, 1);
      break;
    }
    case LUA_TTABLE:
      rgl_sandbox_cstack(L);          /* __index may gsub again */
      push_capture(ms, 0, s, e);
      lua_gettable(L, 3);
      break;
    default:
      add_string(ms, b, s, e, 3);
      return 1;
  }
  if (!lua_toboolean(L, -1)) {          /* nil or false: keep the match */
    lua_pop(L, 1);
    luaL_addlstring(b, s, (size_t)(e - s));
    return 0;
  }
  if (!lua_isstring(L, -1))
    return luaL_error(L, "invalid replacement value (a %s)",
                      luaL_typename(L, -1));
  luaL_addvalue(b);
  return 1;
}

static int l_gsub (lua_State *L) {
  size_t ls, lp;
  const char *src = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  const char *last = NULL;
  int tr = lua_type(L, 3), anchor, changed = 0;
  lua_Integer max_n = luaL_optinteger(L, 4, (lua_Integer)ls + 1), n = 0;
  mstate ms;
  luaL_Buffer b;
  luaL_argcheck(L, tr == LUA_TNUMBER || tr == LUA_TSTRING ||
                   tr == LUA_TFUNCTION || tr == LUA_TTABLE, 3,
                "string/function/table expected");
  anchor = lp > 0 && *p == '^';
  if (anchor) { p++; lp--; }
  luaL_buffinit(L, &b);
  prepare(&ms, L, src, ls, p, lp);
  while (n < max_n) {
    const char *e;
    reset(&ms);
    if ((e = do_match(&ms, src, p)) != NULL && e != last) {
      n++;
      changed |= add_value(&ms, &b, src, e, tr);
      src = last = e;
    }
    else if (src < ms.src_end) {
      luaL_addchar(&b, *src++);
      step(&ms, 1);
    }
    else break;
    if (anchor) break;
  }
  if (!changed) lua_pushvalue(L, 1);
  else {
    luaL_addlstring(&b, src, (size_t)(ms.src_end - src));
    luaL_pushresult(&b);
  }
  lua_pushinteger(L, n);
  return finish(&ms, 2);
}
/* }===================================================================== */


void rgl_pattern_open (lua_State *L, int idx) {
  static const luaL_Reg funcs[] = {
    {"find", l_find}, {"match", l_match}, {"gmatch", l_gmatch},
    {"gsub", l_gsub}, {NULL, NULL}
  };
  const luaL_Reg *f;
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  for (f = funcs; f->name; f++) {
    lua_pushcfunction(L, f->func);
    lua_setfield(L, idx, f->name);
  }
}
