/*
** damage_fuzz.c: a libFuzzer target for damaged databases (docs/
** guarantees.md, A damaged file): no file, however damaged, makes the
** library crash, hang or pass a damaged database for a sound one.
**
** At its start the target makes a real database through the Lua API (the
** template): a container with the default indexing, one keeping the
** all-versions feed with a unique key and a composite index, items of a
** few bytes to a few pages (overflow pages), replaced, patched and deleted
** (so that the free-page tree is not empty), a container with a diskANN
** vector index and text, a procedure, a trigger and a processor's
** checkpoint.  Its files are kept twice: copied while the
** database is open after its last commit (the log then holds records a
** restart replays, as after a crash), and after it was closed.
**
** An input is a list of damages, each an op byte and its arguments (read
** from the input as far as it goes; a missing byte reads as 0):
**   0 flip one bit of the data file or the log   (file, offset u32, bit)
**   1 set one byte                               (file, offset u32, byte)
**   2 cut the data file short                    (bytes u32; ffffffff:
**                                                 empty it, fffffffe:
**                                                 remove it)
**   3 zero a page                                (page u16)
**   4 swap two pages                             (page u16, page u16)
**   5 copy a page over another (repeat it)       (page u16, page u16)
**   6 flip n bits at random places of the data   (n - 1 u8, seed u32)
**   7 cut the log short                          (bytes u32)
**   8 fill a page with bytes from a seed         (page u16, seed u32)
**   9 set a byte of the lock file or regolith.id (file, offset u32, byte)
** (PAGE_DAMAGE, below, says which of them are on.)  The first byte of
** the input chooses the template (even: as after a
** crash; odd: closed) and whether the first open is read-only.  The files
** are written into a scratch directory (under /dev/shm when there is one)
** and the database is opened, every item read, queries of each kind run
** (vector and full-text searches too), the feed read, a write and a
** procedure tried, verify run, and closed, each call protected: an error raised or returned is an answer; a signal,
** a sanitizer report or a run past libFuzzer's -timeout is a failure.
**
** FZ_KEEP=dir keeps a copy of the damaged files of the last input run.
** It links every layer, the Lua binding included, with the Lua library:
**   make fuzz FUZZ_SECONDS=60      (from the top of the checkout: the
**                                   target loads lua/regolith)
*/

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

int luaopen_regolith_core (lua_State *L);

#define PAGE 4096
/* Damage inside the data file's pages (ops 3, 4, 5, 6, 8, and flips past
** the meta pages): LMDB 0.9 follows what it finds there, so these wait
** for the reads to be guarded; until then the damages are those opening
** checks (the meta pages, a short file, the log, the lock file). */
#define PAGE_DAMAGE 1

#define FZ_CHECK(cond, what) \
  do { if (!(cond)) { fprintf(stderr, "check failed: %s (%s:%d)\n", what, \
                              __FILE__, __LINE__); abort(); } } while (0)

enum { FL_DATA, FL_WAL, FL_LOCK, FL_ID, NFILES };
static const char *const names[NFILES] = { "data.mdb", "regolith.wal",
                                           "lock.mdb", "regolith.id" };

typedef struct files {
  uint8_t *p[NFILES];
  size_t n[NFILES];
  int absent[NFILES];
} files;

static lua_State *L;
static files tmpl[2];                  /* as after a crash; closed */
static files work;
static char scratch[256];

/* {=====================================================================
** The Lua side: making the template, probing a directory
** ====================================================================== */
static const char *const lua_code =
  "local regolith = require 'regolith'\n"
  "local M = {}\n"
  "local SIZES = { 10, 300, 40, 120, 10, 60, 200, 30, 2500, 7000 }\n"
  "function M.make(dir, crash_copy, copy)\n"
  "  local db = assert(regolith.open(dir, { sync = 'full' }))\n"
  "  local t = assert(db:create_container('t', { partition_key = '/pk' }))\n"
  "  local f = assert(db:create_container('f', { partition_key = '/pk',\n"
  "    change_feed = { all_versions = true }, unique_keys = { { '/u' } },\n"
  "    indexing = { composite = { { { path = '/pk' }, { path = '/v' } } } } }))\n"
  "  for i = 1, 40 do\n"
  "    local s = ('x'):rep(SIZES[i % #SIZES + 1])\n"
  "    assert(t:create({ id = 'i' .. i, pk = 'p' .. i % 7, v = i, s = s,\n"
  "                      tags = { 'a' .. i % 3, 'b' } }))\n"
  "    assert(f:create({ id = 'j' .. i, pk = 'q' .. i % 3, v = i, u = 'u' .. i }))\n"
  "  end\n"
  "  for i = 1, 40, 4 do assert(t:delete('i' .. i, 'p' .. i % 7)) end\n"
  "  for i = 2, 40, 4 do\n"
  "    assert(t:patch('i' .. i, 'p' .. i % 7, { { op = 'set', path = '/v', value = -i } }))\n"
  "    assert(f:replace({ id = 'j' .. i, pk = 'q' .. i % 3, v = i * 2, u = 'w' .. i }))\n"
  "  end\n"
  "  local v = assert(db:create_container('v', { partition_key = '/pk',\n"
  "    vector_embeddings = { { path = '/e', dimensions = 4,\n"
  "                            distance_function = 'cosine' } },\n"
  "    indexing = { vector_indexes = { { path = '/e', type = 'diskANN' } } } }))\n"
  "  for i = 1, 30 do\n"
  "    assert(v:create({ id = 'k' .. i, pk = 'r' .. i % 2, text = 'word' .. i % 5 ..\n"
  "      ' shared words', e = { i % 3 + 1, i % 5, i % 7 - 3, 1 } }))\n"
  "  end\n"
  "  assert(t:create_procedure('bump', [[return function(ctx, id, pk)\n"
  "    local d = assert(ctx:read(id, pk)) d.v = (d.v or 0) + 1\n"
  "    return assert(ctx:replace(d)) end]]))\n"
  "  assert(t:create_trigger('stamp', { type = 'pre', source =\n"
  "    'return function(ctx) local d = ctx:body() d.stamped = true ctx:set_body(d) end' }))\n"
  "  local p = db:processor({ source = 'f', name = 'fz', instance = 'a',\n"
  "    handler = function() end })\n"
  "  assert(p:run_once() > 0)\n"
  "  crash_copy()\n"
  "  db:close()\n"
  "  copy()\n"
  "end\n"
  "local function try(f, ...) return pcall(f, ...) end\n"
  "local function count(db, name)\n"
  "  local ok, c = try(db.container, db, name)\n"
  "  if not (ok and c) then return -1 end\n"
  "  local okq, rows = try(c.query, c, 'SELECT VALUE COUNT(1) FROM c')\n"
  "  return okq and type(rows) == 'table' and rows[1] or -1\n"
  "end\n"
  "function M.probe(dir, readonly)\n"
  "  local db = regolith.open(dir, { readonly = readonly, sync = 'lazy' })\n"
  "  if not db then return end\n"
  "  local nt, nf = count(db, 't'), count(db, 'f')\n"
  "  local okv, sound = try(db.verify, db)\n"
  "  sound = okv and sound == true\n"
  "  local ok, names = try(db.containers, db)\n"
  "  for _, name in ipairs(ok and names or {}) do\n"
  "    local okc, c = try(db.container, db, name)\n"
  "    if okc and c then\n"
  "      for i = 1, 40 do\n"
  "        try(c.read, c, 'i' .. i, 'p' .. i % 7)\n"
  "        try(c.read, c, 'j' .. i, 'q' .. i % 3)\n"
  "      end\n"
  "      try(c.query, c, 'SELECT * FROM c')\n"
  "      try(c.query, c, 'SELECT VALUE COUNT(1) FROM c')\n"
  "      try(c.query, c, 'SELECT c.id FROM c WHERE c.v > 10 ORDER BY c.v DESC')\n"
  "      try(c.query, c, 'SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk')\n"
  "      try(c.query, c, 'SELECT VALUE t FROM c JOIN t IN c.tags WHERE t = \"b\"')\n"
  "      try(c.query, c, 'SELECT * FROM c WHERE c.pk = \"q1\" AND c.v > 3 ORDER BY c.v',\n"
  "          nil, { partition_key = 'q1' })\n"
  "      try(c.query, c, 'SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.e, [1, 2, 0, 1])')\n"
  "      try(c.query, c, 'SELECT TOP 5 c.id FROM c ORDER BY RANK FullTextScore(c.text, \"word2\")')\n"
  "      try(c.changes, c, { start = 'beginning' })\n"
  "      try(c.changes, c, { start = 'beginning', mode = 'all_versions' })\n"
  "      if not readonly then\n"
  "        try(c.create, c, { id = 'new', pk = 'p1', u = 'n' })\n"
  "        try(c.execute, c, 'bump', 'p2', 'i2', 'p2')\n"
  "        try(c.upsert, c, { id = 'i3', pk = 'p3', v = 1 }, { pre_trigger = 'stamp' })\n"
  "        try(c.delete, c, 'i5', 'p5')\n"
  "      end\n"
  "    end\n"
  "  end\n"
  "  try(db.stats, db)\n"
  "  try(db.verify, db)\n"
  "  try(db.close, db)\n"
  "  return sound, nt, nf\n"
  "end\n"
  "return M\n";

static void file_read (const char *dir, const char *name, uint8_t **p,
                       size_t *n) {
  char path[512];
  struct stat st;
  int fd;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  *p = NULL;
  *n = 0;
  if ((fd = open(path, O_RDONLY)) < 0) return;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    *n = (size_t)st.st_size;
    *p = (uint8_t *)malloc(*n);
    FZ_CHECK(*p && read(fd, *p, *n) == (ssize_t)*n, "reading a template");
  }
  close(fd);
}

/* Keeps the files of dir; the log without the zeros it grew by. */
static void keep (files *f, const char *dir) {
  int i;
  for (i = 0; i < NFILES; i++) file_read(dir, names[i], &f->p[i], &f->n[i]);
  while (f->n[FL_WAL] > 8192 && f->p[FL_WAL][f->n[FL_WAL] - 1] == 0)
    f->n[FL_WAL]--;
  if (getenv("FZ_VERBOSE"))
    fprintf(stderr, "template: data %zu, log %zu, lock %zu bytes\n",
            f->n[FL_DATA], f->n[FL_WAL], f->n[FL_LOCK]);
}

static const char *template_dir;
/* The items of the template's two containers, as an undamaged probe
** counts them (-1 until known). */
static lua_Integer whole[2] = { -1, -1 };

static void copy_files (files *to, const files *from);
static void write_files (const files *f);
static void probe (int readonly, int check);

static int crash_copy (lua_State *S) { (void)S; keep(&tmpl[0], template_dir); return 0; }
static int closed_copy (lua_State *S) { (void)S; keep(&tmpl[1], template_dir); return 0; }

static void rm_dir (const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  char path[512];
  if (d == NULL) return;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

static void setup (void) {
  char tdir[256];
  const char *root = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const char *lua_dir = getenv("REGOLITH_LUA_DIR");
  snprintf(scratch, sizeof(scratch), "%s/rg_damage_%d", root, (int)getpid());
  snprintf(tdir, sizeof(tdir), "%s/rg_damage_tmpl_%d", root, (int)getpid());
  rm_dir(scratch);
  rm_dir(tdir);
  L = luaL_newstate();
  FZ_CHECK(L != NULL, "no Lua state");
  luaL_openlibs(L);
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua", lua_dir ? lua_dir : "lua",
                  lua_dir ? lua_dir : "lua");
  lua_setfield(L, -2, "path");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_regolith_core);
  lua_setfield(L, -2, "regolith.core");
  lua_pop(L, 2);
  FZ_CHECK(luaL_loadstring(L, lua_code) == LUA_OK, "the probe compiles");
  if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    FZ_CHECK(0, "the probe loads (run from the top of the checkout)");
  }
  lua_setglobal(L, "M");
  template_dir = tdir;
  lua_getglobal(L, "M");
  lua_getfield(L, -1, "make");
  lua_pushstring(L, tdir);
  lua_pushcfunction(L, crash_copy);
  lua_pushcfunction(L, closed_copy);
  if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    FZ_CHECK(0, "the template is made");
  }
  lua_pop(L, 1);
  rm_dir(tdir);
  FZ_CHECK(tmpl[0].n[FL_DATA] >= 4 * PAGE && tmpl[1].n[FL_DATA] >= 4 * PAGE,
           "the template has a data file");
  copy_files(&work, &tmpl[1]);         /* what a sound probe counts */
  rm_dir(scratch);
  write_files(&work);
  probe(1, 1);
  rm_dir(scratch);
  FZ_CHECK(whole[0] > 0 && whole[1] > 0, "the template probes sound");
}
/* }===================================================================== */


/* {=====================================================================
** Damages
** ====================================================================== */
typedef struct reader {
  const uint8_t *p;
  size_t n, at;
} reader;

static uint32_t take (reader *r, int bytes) {
  uint32_t v = 0;
  int i;
  for (i = 0; i < bytes; i++)
    v = v << 8 | (r->at < r->n ? r->p[r->at++] : 0);
  return v;
}

static uint32_t rnd (uint32_t *s) {      /* xorshift32 */
  uint32_t x = *s ? *s : 0x9E3779B9u;
  x ^= x << 13; x ^= x >> 17; x ^= x << 5;
  return *s = x;
}

static void copy_files (files *to, const files *from) {
  int i;
  for (i = 0; i < NFILES; i++) {
    to->n[i] = from->n[i];
    to->absent[i] = 0;
    to->p[i] = (uint8_t *)realloc(to->p[i], to->n[i] ? to->n[i] : 1);
    FZ_CHECK(to->p[i] != NULL, "out of memory");
    if (from->n[i]) memcpy(to->p[i], from->p[i], from->n[i]);
  }
}

static void damage (files *f, reader *r) {
  size_t *n = f->n;
  uint8_t **p = f->p;
  size_t pages = n[FL_DATA] / PAGE;
  while (r->at < r->n) {
    int op = (int)(take(r, 1) % 10);
    if (!PAGE_DAMAGE && (op == 3 || op == 4 || op == 5 || op == 6 || op == 8))
      continue;
    switch (op) {
      case 0: case 1: {
        int which = (int)(take(r, 1) % 2) == 0 ? FL_DATA : FL_WAL;
        uint32_t off = take(r, 4), v = take(r, 1);
        if (n[which] == 0) break;
        off %= (uint32_t)n[which];
        if (!PAGE_DAMAGE && which == FL_DATA) off %= 2 * PAGE;
        if (op == 0) p[which][off] ^= (uint8_t)(1u << (v % 8));
        else p[which][off] = (uint8_t)v;
        break;
      }
      case 2: {
        uint32_t cut = take(r, 4);
        if (cut >= 0xFFFFFFFEu) f->absent[FL_DATA] = cut == 0xFFFFFFFEu;
        n[FL_DATA] -= cut >= n[FL_DATA] ? n[FL_DATA] : cut;
        pages = n[FL_DATA] / PAGE;
        break;
      }
      case 3: {
        uint32_t a = take(r, 2);
        if (pages) memset(p[FL_DATA] + (a % pages) * PAGE, 0, PAGE);
        break;
      }
      case 4: case 5: {
        uint32_t a = take(r, 2), b = take(r, 2);
        uint8_t tmp[PAGE];
        if (!pages) break;
        a %= pages; b %= pages;
        if (op == 4) {
          memcpy(tmp, p[FL_DATA] + a * PAGE, PAGE);
          memcpy(p[FL_DATA] + a * PAGE, p[FL_DATA] + b * PAGE, PAGE);
          memcpy(p[FL_DATA] + b * PAGE, tmp, PAGE);
        }
        else memcpy(p[FL_DATA] + b * PAGE, p[FL_DATA] + a * PAGE, PAGE);
        break;
      }
      case 6: {
        uint32_t k = take(r, 1) + 1, seed = take(r, 4), i;
        for (i = 0; i < k && n[FL_DATA]; i++) {
          uint32_t x = rnd(&seed);
          p[FL_DATA][x % n[FL_DATA]] ^= (uint8_t)(1u << (rnd(&seed) % 8));
        }
        break;
      }
      case 7: {
        uint32_t cut = take(r, 4);
        n[FL_WAL] -= cut >= n[FL_WAL] ? n[FL_WAL] : cut;
        break;
      }
      case 8: {
        uint32_t a = take(r, 2), seed = take(r, 4), i;
        if (!pages) break;
        a %= pages;
        for (i = 0; i < PAGE; i++)
          p[FL_DATA][a * PAGE + i] = (uint8_t)rnd(&seed);
        break;
      }
      case 9: {
        int which = take(r, 1) % 2 ? FL_ID : FL_LOCK;
        uint32_t off = take(r, 4), v = take(r, 1);
        if (n[which]) p[which][off % n[which]] = (uint8_t)v;
        break;
      }
    }
  }
}

static void write_files (const files *f) {
  char path[512];
  int i;
  mkdir(scratch, 0755);
  for (i = 0; i < NFILES; i++) {
    int fd;
    if (f->absent[i]) continue;
    snprintf(path, sizeof(path), "%s/%s", scratch, names[i]);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    FZ_CHECK(fd >= 0, "writing the scratch directory");
    FZ_CHECK(f->n[i] == 0 ||
             write(fd, f->p[i], f->n[i]) == (ssize_t)f->n[i],
             "writing the scratch directory");
    close(fd);
  }
}
/* }===================================================================== */


/* Opens, reads, writes, verifies the scratch database.  A raise is an
** answer too; what is not is a signal or a sanitizer's report.  A database
** verify calls sound must hold what the template held. */
static void probe (int readonly, int check) {
  lua_getglobal(L, "M");
  lua_getfield(L, -1, "probe");
  lua_pushstring(L, scratch);
  lua_pushboolean(L, readonly);
  if (lua_pcall(L, 2, 3, 0) == LUA_OK && lua_toboolean(L, -3) && check) {
    lua_Integer nt = lua_tointeger(L, -2), nf = lua_tointeger(L, -1);
    if (whole[0] < 0) { whole[0] = nt; whole[1] = nf; }
    FZ_CHECK(nt == whole[0] && nf == whole[1],
             "verify calls sound a database that lost or gained items");
  }
  lua_settop(L, 0);
  lua_gc(L, LUA_GCCOLLECT, 0);         /* handles closed before the files go */
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  reader r;
  int mode;
  if (L == NULL) setup();
  r.p = data;
  r.n = size;
  r.at = 0;
  mode = (int)take(&r, 1);
  copy_files(&work, &tmpl[mode & 1]);
  damage(&work, &r);
  rm_dir(scratch);
  write_files(&work);
  if (getenv("FZ_KEEP")) {             /* the damaged files, for a look */
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s'",
             getenv("FZ_KEEP"), scratch, getenv("FZ_KEEP"));
    if (system(cmd) != 0) fprintf(stderr, "FZ_KEEP: cannot copy\n");
  }
  probe((mode & 2) != 0, 1);
  probe(0, 0);
  rm_dir(scratch);
  return 0;
}
