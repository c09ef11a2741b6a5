# regolith: build, test, demo, bench, install, check.
#
#   make              build the C module for Lua 5.4 (build/lua5.4/regolith/core.so)
#   make LUA=luajit   build it for LuaJIT (build/luajit/regolith/core.so)
#   make test         install what is missing, build, run every spec (and
#                     again under LuaJIT when it is installed), then the
#                     cluster specs when Redis can be installed
#   make cluster-test the cluster specs (spec/cluster/) on a local Redis
#                     Cluster started for the run and stopped after it
#   make demo         install what is missing, build, run the blog example:
#                     the article's three models beside its table (examples/blog)
#   make bench        benchmarks (examples/bench/), and the blog at a larger scale
#   make bench-search the search bench alone (vectors beside hnswlib and FAISS)
#   make bench-charges the charge of every query the query specs run, locally
#                     and on a Redis Cluster, compared (CHARGES_BASE=DIR: and
#                     against another build's logs)
#   make check        AddressSanitizer + UndefinedBehaviorSanitizer over the specs
#   make openresty    the blog over HTTP from nginx workers, under wrk's load
#   make gateway      the Cosmos DB REST API on 127.0.0.1:8081 (docs/gateway.md);
#                     make gateway-stop stops it
#   make gateway-test Microsoft's SDKs against the gateway (tests/sdk/)
#   make gateway-bench the SDK's calls through the gateway beside the same
#                     calls in Lua inside nginx, with 1, 2 and 4 workers
#   make crash        kill writers at random moments; nothing may be lost
#   make powerloss    disk images a power cut could leave, each checked
#   make hammer       many processes on one database, then exact counts
#   make fuzz         libFuzzer targets, FUZZ_SECONDS each
#   make valgrind     every spec under valgrind (slow)
#   make install      install into LUADIR/LIBDIR (as LuaRocks passes them)
#   make dist         the release tarball (build/dist): sources and the
#                     explorer's page with its vendored libraries
#   make rock         build/rock/regolith-VERSION-1.src.rock, offline
#   make install-test the packed rocks installed offline for Lua 5.4 and
#                     LuaJIT, the command, explore and the README's synopsis
#                     run from them, and the OpenResty quick start of
#                     docs/openresty.md as root and as a user
#   make explorer     what `regolith explore` needs: nginx, the LuaJIT build,
#                     the page with its libraries (build/explorer)
#   make explorer-test  the Data Explorer in headless Chromium (screenshots
#                     in build/explorer-test)
#
# Variables follow LuaRocks' names so that the rockspec can drive them.

LUA        ?= lua5.4
CC         ?= cc
CFLAGS     ?= -O2 -g
LIBFLAG    ?= -shared
LMDB_INCDIR  ?= /usr/include
CJSON_INCDIR ?= /usr/include
LMDB_LIBDIR  ?= /usr/lib
CJSON_LIBDIR ?= /usr/lib
PCRE2_INCDIR ?= /usr/include
PCRE2_LIBDIR ?= /usr/lib
# Duktape's amalgamated source, compiled by csrc/script/jsengine.c with
# regolith's configuration (Debian's duktape-dev installs it here)
DUKTAPE_DIR  ?= /usr/share/duktape

ifeq ($(LUA),luajit)
LUA_INCDIR ?= /usr/include/luajit-2.1
else
LUA_INCDIR ?= /usr/include/lua5.4
endif
# The build folder is named after the Lua headers, so that a build for
# LuaJIT (LuaRocks passes LUA_INCDIR=/usr/include/luajit-2.1) never reuses
# objects compiled for Lua 5.4: build/lua5.4 or build/luajit.
BUILD      ?= build/$(if $(findstring luajit,$(LUA_INCDIR)),luajit,$(notdir $(LUA_INCDIR)))

# Where `make install` puts the Lua files and the module: LuaJIT reads the
# 5.1 paths.
ifeq ($(LUA),luajit)
LUAVER  ?= 5.1
else
LUAVER  ?= 5.4
endif
PREFIX  ?= /usr/local
LUADIR  ?= $(PREFIX)/share/lua/$(LUAVER)
LIBDIR  ?= $(PREFIX)/lib/lua/$(LUAVER)
BINDIR  ?= $(PREFIX)/bin

WARN     = -std=c99 -Wall -Wextra -Wno-unused-parameter
ALL_CFLAGS = $(CFLAGS) $(WARN) -D_GNU_SOURCE -fPIC -fvisibility=hidden \
             -MMD -MP -Icsrc -I$(LUA_INCDIR) -I$(LMDB_INCDIR) -I$(CJSON_INCDIR) \
             -I$(PCRE2_INCDIR) -I$(DUKTAPE_DIR)
LIBS     = -L$(LMDB_LIBDIR) -L$(CJSON_LIBDIR) -L$(PCRE2_LIBDIR) -llmdb -lcjson \
           -lpcre2-8 -lstemmer -lpthread -lm

# The C core, one folder per layer (csrc/README.md): base, sql and store
# never include a Lua header; luax, script and host are the Lua side.
LAYERS = base sql store luax script host
SRC = $(foreach l,$(LAYERS),$(wildcard csrc/$(l)/*.c))
OBJ = $(patsubst csrc/%.c,$(BUILD)/obj/%.o,$(SRC))
MODULE = $(BUILD)/regolith/core.so
# The lower layers as static archives, linked without Lua by the plain C
# tests (tests/c) and the fuzzers.
ARCHIVES = $(BUILD)/lib/libstore.a $(BUILD)/lib/libsql.a \
           $(BUILD)/lib/libbase.a

# Debian packages: the build, the tests, the benchmarks
DEPS_BUILD = gcc make liblua5.4-dev liblmdb-dev libcjson-dev libpcre2-dev \
             libstemmer-dev \
             lua5.4 duktape-dev
DEPS_TEST  = $(DEPS_BUILD) lua-busted lua-system luajit2 libluajit2-5.1-dev \
             lua-argparse lua-readline lua-sql-sqlite3
DEPS_BENCH = $(DEPS_TEST) libsqlite3-dev
DEPS_FUZZ  = $(DEPS_TEST) clang libclang-rt-14-dev
DEPS_VALGRIND = $(DEPS_TEST) valgrind
DEPS_CLUSTER = redis-server redis-tools lua-socket nginx libnginx-mod-http-lua

BUSTED = busted --lua=lua5.4

# LuaJIT (luajit2 and libluajit2-5.1-dev): when both are installed, make test
# also builds build/luajit and runs every spec under LuaJIT.
LUAJIT_INCDIR ?= /usr/include/luajit-2.1
HAVE_LUAJIT := $(shell command -v luajit >/dev/null 2>&1 && \
                 test -f $(LUAJIT_INCDIR)/lua.h && echo yes)

.PHONY: dist rock install-test all test test-luajit luajit-build ctest layers tour demo bench check crash powerloss hammer \
        fuzz fuzz-build valgrind install clean deps-test deps-bench deps-fuzz \
        bench-search-text \
        openresty explorer explorer-test install-explorer cluster-test gateway \
        gateway-stop gateway-test gateway-bench bench-search bench-charges

.SECONDEXPANSION:

all: $(MODULE)

$(BUILD)/obj/%.o: csrc/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# Duktape's own source is not held to the project's warnings.
$(BUILD)/obj/script/jsengine.o: WARN = -std=c99 -w

-include $(OBJ:.o=.d)

$(MODULE): $(OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAG) -o $@ $(OBJ) $(LIBS)

# The objects of layer $(2) under the object folder $(1).
layer_objs = $(patsubst csrc/%.c,$(1)/%.o,$(wildcard csrc/$(2)/*.c))

$(BUILD)/lib/lib%.a: $$(call layer_objs,$(BUILD)/obj,$$*)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

deps-test:
	@sh tools/deps.sh $(DEPS_TEST)

deps-bench:
	@sh tools/deps.sh $(DEPS_BENCH)

test: deps-test
	$(MAKE) all ctest
	$(MAKE) luajit-build
	$(BUSTED)
	$(MAKE) test-luajit
	@if sh tools/deps.sh $(DEPS_CLUSTER); then $(MAKE) cluster-test; \
	  else echo "Redis cannot be installed here: the cluster specs did not run"; fi

# Makes of their own, so that LuaJIT is looked for after deps-test ran.
# The LuaJIT build comes before the Lua 5.4 specs, some of which compare
# the two interpreters' output.
luajit-build:
ifeq ($(HAVE_LUAJIT),yes)
	$(MAKE) all LUA=luajit LUA_INCDIR=$(LUAJIT_INCDIR)
endif

test-luajit:
ifeq ($(HAVE_LUAJIT),yes)
	$(MAKE) all LUA=luajit LUA_INCDIR=$(LUAJIT_INCDIR)
	busted --lua=luajit
else
	@echo "LuaJIT not installed (luajit2, libluajit2-5.1-dev): specs ran under Lua 5.4 only"
endif

# The specs that describe the API, run against a Redis Cluster too
# (REGOLITH_BACKEND=cluster: spec/helper.lua opens databases there).
CLUSTER_API_SPECS = $(addprefix spec/,$(addsuffix _spec.lua,items batch patch \
  procedures triggers query query_plan query_functions query_grammar \
  query_groupby query_udf feed processor unique ttl none_pk containers \
  bad_input search_text js_scripts bulk_load charges concurrency db \
  group_commit json limits processor_multiprocess replace_container vector \
  verify throughput gateway explorer_api search_ftindex))
# Run against the cluster under Lua 5.4 only: the blog's spec, the longest,
# the sandbox's, whose rules are the engine's whatever stores the scripts
# (a minute under each Lua), and the command's, which runs bin/regolith
# under Lua 5.4 (its #! line; the explorer's nginx under LuaJIT) whatever
# Lua runs the spec.
CLUSTER_54_SPECS = $(addprefix spec/,$(addsuffix _spec.lua,blog sandbox \
  sandbox_escape js_sandbox cli cli_shell explore))

# The cluster specs against a local Redis Cluster (3 primaries, 3 replicas,
# 127.0.0.1, a random base port; tools/redis-cluster.sh) started for this
# run and stopped by pid whatever happens (a failing spec, an interrupt):
# spec/cluster and the API specs under Lua 5.4, and under LuaJIT too when
# it is installed; the fault specs (spec/cluster/faults: nodes killed,
# slots moved, a primary added and drained) once, under Lua 5.4, last, so
# that no other spec meets a cluster they left recovering.  Prints
# how long the start, the specs and the stop took, and after a failure
# what each node sees and the end of its log.
cluster-test: deps-test
	@sh tools/deps.sh $(DEPS_CLUSTER)
	$(MAKE) all
ifeq ($(HAVE_LUAJIT),yes)
	$(MAKE) all LUA=luajit LUA_INCDIR=$(LUAJIT_INCDIR)
endif
	@dir=$$(mktemp -d); \
	trap 'tools/redis-cluster.sh stop '$$dir' >/dev/null 2>&1; rm -rf '$$dir EXIT INT TERM; \
	t0=$$(date +%s.%N); \
	base=$$(RG_CLUSTER_OWNER=$$$$ tools/redis-cluster.sh start $$dir) || exit 1; \
	t1=$$(date +%s.%N); \
	export REGOLITH_URL=redis://127.0.0.1:$$base/ci RG_CLUSTER_DIR=$$dir; \
	$(BUSTED) --helper=spec/cluster/helper.lua spec/cluster; rc=$$?; \
	REGOLITH_BACKEND=cluster $(BUSTED) $(CLUSTER_API_SPECS) $(CLUSTER_54_SPECS) || rc=1; \
	if [ "$(HAVE_LUAJIT)" = yes ]; then \
	  busted --lua=luajit --helper=spec/cluster/helper.lua spec/cluster || rc=1; \
	  REGOLITH_BACKEND=cluster busted --lua=luajit $(CLUSTER_API_SPECS) || rc=1; fi; \
	$(BUSTED) --helper=spec/cluster/helper.lua spec/cluster/faults || rc=1; \
	t2=$$(date +%s.%N); \
	[ $$rc = 0 ] || tools/redis-cluster.sh status $$dir; \
	tools/redis-cluster.sh stop $$dir; \
	t3=$$(date +%s.%N); \
	echo "$$t0 $$t1 $$t2 $$t3" | awk '{ printf "cluster-test: start %.1f s, specs %.1f s, stop %.1f s\n", $$2-$$1, $$3-$$2, $$4-$$3 }'; \
	exit $$rc

# The plain C tests (tests/c): the lower layers' archives, linked with no
# Lua (base_test: not even LMDB).
CTESTS = $(BUILD)/tests/base_test $(BUILD)/tests/store_test \
         $(BUILD)/tests/ftindex_test
TEST_CFLAGS = $(CFLAGS) $(WARN) -D_GNU_SOURCE -Icsrc -I$(LMDB_INCDIR) \
              -I$(CJSON_INCDIR) -I$(PCRE2_INCDIR)

$(BUILD)/tests/base_test: tests/c/base_test.c $(BUILD)/lib/libsql.a \
                          $(BUILD)/lib/libbase.a
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $^ -L$(CJSON_LIBDIR) -L$(PCRE2_LIBDIR) -lcjson \
	  -lpcre2-8 -lstemmer -lm

$(BUILD)/tests/store_test: tests/c/store_test.c $(ARCHIVES)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $^ $(LIBS) -lm

$(BUILD)/tests/ftindex_test: tests/c/ftindex_test.c tests/c/memkv.h \
                             $(ARCHIVES)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ tests/c/ftindex_test.c $(ARCHIVES) $(LIBS) -lm

ctest: $(CTESTS)
	@for t in $(CTESTS); do $$t || exit 1; done

# The layering of the C core (csrc/README.md): includes point down only,
# no call cycle among the files of a folder, only the files behind the
# store's seam call LMDB (tools/layers.sh, which first checks itself on a
# planted bad tree), and the lower layers link without Lua: every
# object of base and sql with cJSON (and PCRE2, RegexMatch's) alone, and of
# the store with LMDB too.  It builds the whole module first, so that the
# objects it reads are those of the sources, every folder's included.
layers: $(ARCHIVES) $(MODULE)
	@mkdir -p build
	sh tools/layers.sh --self-test
	sh tools/layers.sh csrc $(BUILD)/obj
	$(CC) -shared -o $(BUILD)/lib/check_sql.so -Wl,--whole-archive \
	  $(BUILD)/lib/libsql.a $(BUILD)/lib/libbase.a -Wl,--no-whole-archive \
	  -Wl,--no-undefined -L$(CJSON_LIBDIR) -L$(PCRE2_LIBDIR) -lcjson -lpcre2-8 -lstemmer -lm
	$(CC) -shared -o $(BUILD)/lib/check_store.so -Wl,--whole-archive \
	  $(ARCHIVES) -Wl,--no-whole-archive -Wl,--no-undefined $(LIBS) -lm
	$(MAKE) ctest
	@echo "layers: base, sql and store link without Lua; the module exports:"
	@$(MAKE) -s all && nm -D --defined-only $(MODULE) | awk '$$2 == "T" {print "  " $$3}'

tour: all
	$(RUN) examples/tour.lua

RUN = LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' lua5.4

# The blog example (examples/blog/bench.lua): DEMO_SCALE finishes in about a
# minute; BENCH_SCALE is ten times larger (1 is the article's full data set).
DEMO_SCALE  ?= 0.001
DEMO_TIME   ?= 0.5
BENCH_SCALE ?= 0.01

demo: deps-bench
	$(MAKE) all
	@mkdir -p build/demo
	$(RUN) examples/blog/bench.lua --scale $(DEMO_SCALE) --time $(DEMO_TIME) \
	  --svg build/demo/blog.svg

build/tools/lmdb_poke: tools/lmdb_poke.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -std=c99 -I$(LMDB_INCDIR) -o $@ $< -L$(LMDB_LIBDIR) -llmdb

build/bench/raw_lmdb: examples/bench/raw_lmdb.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c99 -D_GNU_SOURCE -I$(LMDB_INCDIR) -I$(CJSON_INCDIR) -o $@ $< $(LIBS)

build/bench/disk: examples/bench/disk.c
	@mkdir -p $(dir $@)
	$(CC) -O2 $(WARN) -D_GNU_SOURCE -o $@ $<

build/bench/search_text: examples/bench/search_text.c $(ARCHIVES)
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c99 -D_GNU_SOURCE -Icsrc -I$(LMDB_INCDIR) -o $@ $< \
	  $(ARCHIVES) $(LIBS) -lsqlite3 -lm

# The full-text part of the search bench (examples/bench/search_text.c;
# SEARCH_DOCS documents), run by bench-search:
# full text against SQLite FTS5, and hybrid fusion, on one seeded corpus.
SEARCH_DOCS ?= 200000
bench-search-text: deps-bench
	$(MAKE) all build/bench/search_text
	@mkdir -p build/bench/search
	nice build/bench/search_text build/bench/search --docs $(SEARCH_DOCS) \
	  --json build/bench/search.json

# The search bench's C programs (examples/bench/search_data.c, search_c.c):
# the data generator and the C-level vector searches, on the base archive.
build/bench/search_%: examples/bench/search_%.c $(BUILD)/lib/libbase.a
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $^ -lm

DEPS_SEARCH_BENCH = python3-hnswlib python3-faiss python3-numpy

bench: deps-bench
	$(MAKE) all build/bench/raw_lmdb build/bench/disk
	$(RUN) examples/bench/items.lua
	$(RUN) examples/bench/query.lua
	$(RUN) examples/bench/monotone.lua
	$(MAKE) bench-charges
	$(RUN) examples/bench/feed.lua
	$(RUN) examples/bench/scripts.lua
	$(RUN) examples/bench/scripts_js.lua
	$(RUN) examples/bench/throughput.lua
	$(RUN) examples/bench/writers.lua
	@mkdir -p build/bench
	$(RUN) examples/blog/bench.lua --scale $(BENCH_SCALE) \
	  --json build/bench/blog.json --dir build/bench/blog
	$(RUN) examples/blog/durable.lua --dir build/bench/blog
	$(MAKE) bench-search

# The search bench alone (examples/bench/search.lua; docs/search.md).
bench-search: deps-bench
	@sh tools/deps.sh $(DEPS_SEARCH_BENCH)
	$(MAKE) all build/bench/search_data build/bench/search_c
	$(RUN) examples/bench/search.lua
	$(MAKE) bench-search-text

# regolith in nginx workers under HTTP load, with 1, 2 and 4 workers
# (examples/openresty/load.sh; OPENRESTY_WORKERS to choose).
OPENRESTY_WORKERS ?= 1 2 4
openresty:
	sh examples/openresty/load.sh $(OPENRESTY_WORKERS)

# The Cosmos DB gateway (tools/gateway/gateway.sh: GATEWAY_PORT,
# GATEWAY_WORKERS, GATEWAY_ROOT, GATEWAY_SYNC, TLS=1 for https).
gateway:
	sh tools/gateway/gateway.sh start

gateway-stop:
	sh tools/gateway/gateway.sh stop

gateway-test:
	sh tests/sdk/run.sh

GATEWAY_BENCH_WORKERS ?= 1 2 4
# The charge of every query the query specs run (examples/bench/
# charge_log.lua), locally and, when Redis can be installed, on a local
# Redis Cluster, compared (examples/bench/charges.lua); with
# CHARGES_BASE=DIR, also against the logs DIR/local.jsonl (and
# DIR/cluster.jsonl) that another build wrote the same way.
QUERY_SPECS = $(addprefix spec/,$(addsuffix _spec.lua,query query_plan \
  query_functions query_grammar query_groupby query_udf))
CHARGES_BASE ?=

bench-charges: deps-test
	$(MAKE) all
	@mkdir -p build/charges
	rm -f build/charges/local.jsonl build/charges/cluster.jsonl
	CHARGE_LOG=build/charges/local.jsonl $(BUSTED) \
	  --helper=examples/bench/charge_log.lua $(QUERY_SPECS) >/dev/null
	@if sh tools/deps.sh $(DEPS_CLUSTER); then \
	  dir=$$(mktemp -d); \
	  trap 'tools/redis-cluster.sh stop '$$dir' >/dev/null 2>&1; rm -rf '$$dir EXIT INT TERM; \
	  base=$$(RG_CLUSTER_OWNER=$$$$ tools/redis-cluster.sh start $$dir) || exit 1; \
	  REGOLITH_BACKEND=cluster REGOLITH_URL=redis://127.0.0.1:$$base/charges \
	  RG_CLUSTER_DIR=$$dir CHARGE_LOG=build/charges/cluster.jsonl $(BUSTED) \
	    --helper=examples/bench/charge_log.lua $(QUERY_SPECS) >/dev/null; \
	  tools/redis-cluster.sh stop $$dir >/dev/null; \
	fi
	@logs=""; base="$(CHARGES_BASE)"; \
	if [ -n "$$base" ]; then logs="local-before=$$base/local.jsonl"; fi; \
	logs="$$logs local=build/charges/local.jsonl"; \
	if [ -n "$$base" ] && [ -f "$$base/cluster.jsonl" ]; then \
	  logs="$$logs cluster-before=$$base/cluster.jsonl"; fi; \
	if [ -f build/charges/cluster.jsonl ]; then \
	  logs="$$logs cluster=build/charges/cluster.jsonl"; fi; \
	$(RUN) examples/bench/charges.lua $$logs

gateway-bench:
	sh tests/sdk/bench.sh $(GATEWAY_BENCH_WORKERS)

# The sanitizer build: the same sources with ASan and UBSan, and the
# assertions on (-DRG_DEBUG, base/support.h), loaded into the stock
# interpreter by preloading the ASan runtime.  A debug build of one's own:
# make BUILD=build/debug CFLAGS="-O0 -g -DRG_DEBUG".
check: deps-test
	$(MAKE) all BUILD=build/asan \
	  CFLAGS="-O1 -g -DRG_DEBUG -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  LIBS="$(LIBS) -fsanitize=address,undefined"
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  REGOLITH_CPATH='build/asan/?.so' $(BUSTED)

# Every spec under valgrind's memcheck (slow: about twenty minutes); any
# definite leak or memory error fails.  Processes the specs kill on purpose
# leave incomplete logs, which are skipped.
valgrind:
	@sh tools/deps.sh $(DEPS_VALGRIND)
	$(MAKE) all
	rm -rf build/valgrind && mkdir -p build/valgrind
	-valgrind --trace-children=yes --leak-check=full \
	  --errors-for-leak-kinds=definite \
	  --log-file=build/valgrind/%p.log $(BUSTED)
	@ls build/valgrind/*.log >/dev/null 2>&1 || { echo "valgrind wrote no logs"; exit 1; }
	@bad=$$(grep -l -E "definitely lost: [1-9]|ERROR SUMMARY: [1-9]" build/valgrind/*.log); \
	  if [ -n "$$bad" ]; then echo "valgrind found problems: $$bad"; exit 1; fi; \
	  echo "valgrind: no leaks or memory errors in $$(ls build/valgrind | wc -l) processes"

# The crash harness: SIGKILL a writer at random moments, then check that
# nothing acknowledged was lost and nothing half-applied (tools/crash.lua);
# a run with a tiny log and page deltas (wal.h), killing writers in its
# checkpoints too; the last through the write queue, killing its leader.
CRASH_KILLS ?= 200
crash: deps-test
	$(MAKE) all
	$(RUN) tools/crash.lua --kills $(CRASH_KILLS) --sync full
	$(RUN) tools/crash.lua --kills $(CRASH_KILLS) --sync lazy
	REGOLITH_WAL_RING="16384 65536" REGOLITH_LOG_DELTAS=1 $(RUN) tools/crash.lua \
	  --kills $(CRASH_KILLS) --sync full
	$(RUN) tools/crash.lua --kills $(CRASH_KILLS) --sync full --queue

# The power-loss harness (tools/powerloss.lua): writers run with
# build/powerloss/shim.so preloaded, which journals every write and flush of
# the database's files; build/powerloss/image makes the disk images a power
# cut at random moments could leave (what was flushed, plus any subset of the
# pages written since, in any order), and each is opened and checked:
# verify() clean, nothing acknowledged lost under sync "full", and for
# "lazy" nothing acknowledged before the log's last flush; with one writer,
# with coroutines sharing transactions (group commit), with processes, with
# processes sharing transactions through the write queue; then
# with a log made tiny (REGOLITH_WAL_RING), so that its checkpoints without
# the writer lock and its laps happen many times a run; then page deltas
# (REGOLITH_LOG_DELTAS=1), through the queue and with the tiny log (whose
# checkpoint claims bound what a delta may be made from).  First the self-test:
# with every flush dropped (PL_DROP_SYNC=1) the harness must find a loss.
POWERLOSS_IMAGES ?= 500
build/powerloss/shim.so: tools/powerloss/shim.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g $(WARN) -D_GNU_SOURCE -shared -fPIC -o $@ $< -ldl

# The fault shim (tools/fault/shim.c): preloaded into a writer, it fails
# chosen writes to a file with EIO (spec/held_fail_spec.lua builds it).
build/fault/shim.so: tools/fault/shim.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g $(WARN) -D_GNU_SOURCE -shared -fPIC -o $@ $< -ldl

build/powerloss/image: tools/powerloss/image.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g $(WARN) -Wno-format-truncation -D_GNU_SOURCE -o $@ $<

powerloss: deps-test
	$(MAKE) all build/powerloss/shim.so build/powerloss/image
	PL_DROP_SYNC=1 $(RUN) tools/powerloss.lua --sync full --images 100 --expect-loss
	$(RUN) tools/powerloss.lua --sync full --images $(POWERLOSS_IMAGES)
	$(RUN) tools/powerloss.lua --sync full --images $(POWERLOSS_IMAGES) --writers 8 --group
	$(RUN) tools/powerloss.lua --sync full --images $(POWERLOSS_IMAGES) --procs 4
	$(RUN) tools/powerloss.lua --sync full --images $(POWERLOSS_IMAGES) --procs 4 --queue
	$(RUN) tools/powerloss.lua --sync lazy --images $(POWERLOSS_IMAGES) --writers 4
	REGOLITH_WAL_RING="16384 65536" $(RUN) tools/powerloss.lua --sync full \
	  --images $(POWERLOSS_IMAGES) --procs 4
	REGOLITH_WAL_RING="16384 65536" $(RUN) tools/powerloss.lua --sync lazy \
	  --images $(POWERLOSS_IMAGES) --writers 4
	REGOLITH_LOG_DELTAS=1 $(RUN) tools/powerloss.lua --sync full \
	  --images $(POWERLOSS_IMAGES) --procs 4 --queue
	REGOLITH_WAL_RING="16384 65536" REGOLITH_LOG_DELTAS=1 $(RUN) \
	  tools/powerloss.lua --sync full --images $(POWERLOSS_IMAGES)

# The hammer: writers, readers and processors in several processes on one
# database for HAMMER_SECONDS, then verify() and exact counts
# (tools/hammer.lua).
HAMMER_SECONDS ?= 30
hammer: all
	$(RUN) tools/hammer.lua --seconds $(HAMMER_SECONDS) --writers 4 \
	  --readers 2 --processors 2

# libFuzzer targets (tools/fuzz/<target>.c): each is built with clang, with
# ASan and UBSan, against the layer archives it names in FUZZ_LIBS_<target>
# (instrumented archives of the layers under build/fuzz/lib; luax and
# those above need the Lua library), then run for FUZZ_SECONDS on a scratch
# corpus seeded from tools/fuzz/corpus/<target>/ (and <target>.dict if
# present).  A crash, or an input running past FUZZ_TIMEOUT seconds, stops
# the run and leaves its input in build/fuzz/crash-* (timeout-*).
# damage_fuzz damages a real database and opens, reads, queries, writes
# and verifies it (docs/guarantees.md, A damaged file).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_MAXLEN  ?= 4096
FUZZ_TIMEOUT ?= 60
FUZZ_LUALIB  ?= -llua5.4
FUZZ_FLAGS    = -g -O1 -std=c99 -D_GNU_SOURCE -DRG_DEBUG -fno-sanitize-recover=all \
                -fno-omit-frame-pointer -Icsrc -I$(LUA_INCDIR) \
                -I$(LMDB_INCDIR) -I$(CJSON_INCDIR) -I$(PCRE2_INCDIR) \
                -I$(DUKTAPE_DIR)
FUZZ_TARGETS  = $(basename $(notdir $(wildcard tools/fuzz/*.c)))

FUZZ_LIBS_query_fuzz = sql base
FUZZ_LIBS_json_fuzz  = luax store sql base
FUZZ_LIBS_patch_fuzz = base
FUZZ_LIBS_token_fuzz = store sql base
FUZZ_LIBS_damage_fuzz = host script luax store sql base
FUZZ_LIBS_text_fuzz  = sql base
FUZZ_LIBS_vector_fuzz = base

build/fuzz/obj/%.o: csrc/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -MMD -MP \
	  -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@

-include $(wildcard build/fuzz/obj/*/*.d)

build/fuzz/lib/lib%.a: $$(call layer_objs,build/fuzz/obj,$$*)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

.PRECIOUS: build/fuzz/obj/%.o build/fuzz/lib/lib%.a
build/fuzz/%: tools/fuzz/%.c tools/fuzz/fuzz_util.h \
              $$(foreach l,$$(FUZZ_LIBS_$$*),build/fuzz/lib/lib$$(l).a)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined $< \
	  $(foreach l,$(FUZZ_LIBS_$*),build/fuzz/lib/lib$(l).a) -o $@ \
	  $(LIBS) $(if $(filter luax,$(FUZZ_LIBS_$*)),$(FUZZ_LUALIB)) -lm

deps-fuzz:
	@sh tools/deps.sh $(DEPS_FUZZ)

fuzz-build: $(addprefix build/fuzz/,$(FUZZ_TARGETS))

fuzz: deps-fuzz
	$(MAKE) fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  echo "== $$t ($(FUZZ_SECONDS)s)"; \
	  mkdir -p build/fuzz/corpus/$$t; \
	  dict=""; [ -f tools/fuzz/$$t.dict ] && dict="-dict=tools/fuzz/$$t.dict"; \
	  supp=""; [ -f tools/fuzz/$$t.lsan ] && supp="suppressions=tools/fuzz/$$t.lsan"; \
	  LSAN_OPTIONS="$$supp" build/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAXLEN) \
	    -timeout=$(FUZZ_TIMEOUT) -artifact_prefix=build/fuzz/ \
	    -print_final_stats=1 $$dict \
	    build/fuzz/corpus/$$t tools/fuzz/corpus/$$t || exit 1; \
	done

# The Data Explorer (regolith explore; docs/explorer.md): nginx with the Lua
# module, regolith built for LuaJIT, and the page in build/explorer with the
# libraries it uses, installed by npm from explorer/package-lock.json (in
# build/npm: `npm ci` works offline from npm's cache) and copied with their
# licenses, so that the page needs nothing from the internet.
DEPS_EXPLORER = $(DEPS_TEST) nginx libnginx-mod-http-lua lua-resty-core
EXPLORER_PAGE = explorer/index.html explorer/app.js explorer/style.css \
                explorer/favicon.svg
NPM_MODULES   = build/npm/node_modules
CODEMIRROR    = $(NPM_MODULES)/codemirror
TABULATOR     = $(NPM_MODULES)/tabulator-tables
JSONFORMATTER = $(NPM_MODULES)/json-formatter-js
NPM_CI        = npm ci --prefer-offline --no-audit --no-fund

explorer:
	@sh tools/deps.sh $(DEPS_EXPLORER)
	$(MAKE) all
	$(MAKE) all LUA=luajit LUA_INCDIR=$(LUAJIT_INCDIR)
	$(MAKE) build/explorer/index.html

build/npm/package-lock.json: explorer/package.json explorer/package-lock.json
	@command -v npm >/dev/null || { echo "the explorer's page needs npm (Node.js)" >&2; exit 1; }
	@mkdir -p build/npm
	cp explorer/package.json explorer/package-lock.json build/npm/
	cd build/npm && $(NPM_CI)

# The libraries: CodeMirror 5 (the editors), Tabulator (the grids),
# json-formatter-js (results as JSON), each with its LICENSE, and their
# versions in vendor/VERSIONS.
npm_version = $$(node -p 'require("./$(1)/package.json").version')

build/explorer/index.html: $(EXPLORER_PAGE) build/npm/package-lock.json
	rm -rf build/explorer
	mkdir -p build/explorer/vendor/codemirror build/explorer/vendor/tabulator \
	  build/explorer/vendor/json-formatter
	cp $(EXPLORER_PAGE) build/explorer/
	cp $(CODEMIRROR)/lib/codemirror.js $(CODEMIRROR)/lib/codemirror.css \
	  $(CODEMIRROR)/addon/edit/matchbrackets.js $(CODEMIRROR)/mode/sql/sql.js \
	  $(CODEMIRROR)/mode/javascript/javascript.js $(CODEMIRROR)/mode/lua/lua.js \
	  $(CODEMIRROR)/LICENSE build/explorer/vendor/codemirror/
	cp $(TABULATOR)/dist/js/tabulator.min.js \
	  $(TABULATOR)/dist/css/tabulator_simple.min.css $(TABULATOR)/LICENSE \
	  build/explorer/vendor/tabulator/
	cp $(JSONFORMATTER)/dist/json-formatter.umd.js \
	  $(JSONFORMATTER)/dist/json-formatter.css $(JSONFORMATTER)/LICENSE \
	  build/explorer/vendor/json-formatter/
	{ echo "codemirror $(call npm_version,$(CODEMIRROR)) (MIT): vendor/codemirror/LICENSE"; \
	  echo "tabulator-tables $(call npm_version,$(TABULATOR)) (MIT): vendor/tabulator/LICENSE"; \
	  echo "json-formatter-js $(call npm_version,$(JSONFORMATTER)) (MIT): vendor/json-formatter/LICENSE"; \
	} > build/explorer/vendor/VERSIONS

# The page in a real browser: Debian's Chromium driven by playwright-core
# (explorer/browser_test.js) against the blog's data set; then the explorer
# and the gateway under hostile clients (spec/servers_spec.lua, which
# needs nginx and the page, so `make test` leaves it pending).
DEPS_BROWSER = chromium
explorer-test: explorer
	@sh tools/deps.sh $(DEPS_BROWSER)
	rm -rf build/explorer-test && mkdir -p build/explorer-test
	$(RUN) tools/blog_db.lua build/explorer-test/blog 0.0001
	NODE_PATH=build/npm/node_modules node explorer/browser_test.js \
	  build/explorer-test/blog build/explorer-test
	SERVERS_SPEC=1 $(BUSTED) spec/servers_spec.lua
	$(BUSTED) spec/explore_spec.lua

# The Data Explorer's page: explorer/www in a release tarball, else the
# checkout's build/explorer (make explorer); installed beside the modules,
# where `regolith explore` looks for it.
EXPLORER_WWW ?= $(firstword $(wildcard explorer/www build/explorer))

install: all
	mkdir -p $(DESTDIR)$(LUADIR)/regolith/cluster $(DESTDIR)$(LUADIR)/regolith/gateway \
	  $(DESTDIR)$(LIBDIR)/regolith
	cp lua/regolith/*.lua $(DESTDIR)$(LUADIR)/regolith/
	cp lua/regolith/cluster/*.lua $(DESTDIR)$(LUADIR)/regolith/cluster/
	cp redis/regolith.lua $(DESTDIR)$(LUADIR)/regolith/cluster/regolith_functions.lua
	cp lua/regolith/gateway/*.lua $(DESTDIR)$(LUADIR)/regolith/gateway/
	cp $(MODULE) $(DESTDIR)$(LIBDIR)/regolith/core.so
	mkdir -p $(DESTDIR)$(LUADIR)/regolith/cli $(DESTDIR)$(LUADIR)/regolith/explorer \
	  $(DESTDIR)$(BINDIR)
	cp lua/regolith/cli/*.lua $(DESTDIR)$(LUADIR)/regolith/cli/
	cp lua/regolith/explorer/*.lua $(DESTDIR)$(LUADIR)/regolith/explorer/
	cp bin/regolith $(DESTDIR)$(BINDIR)/regolith
ifneq ($(EXPLORER_WWW),)
	rm -rf $(DESTDIR)$(LUADIR)/regolith/explorer/www
	cp -r $(EXPLORER_WWW) $(DESTDIR)$(LUADIR)/regolith/explorer/www
else
	@echo "note: the Data Explorer's page is not built (make explorer): regolith explore will say so"
endif

# What `regolith explore` needs beside an installed regolith: the LuaJIT
# build where LuaJIT looks (lib/lua/5.1) and the page (share/regolith).
install-explorer: explorer install
	mkdir -p $(DESTDIR)$(PREFIX)/lib/lua/5.1/regolith $(DESTDIR)$(PREFIX)/share/regolith
	cp build/luajit/regolith/core.so $(DESTDIR)$(PREFIX)/lib/lua/5.1/regolith/core.so
	rm -rf $(DESTDIR)$(PREFIX)/share/regolith/explorer
	cp -r build/explorer $(DESTDIR)$(PREFIX)/share/regolith/explorer

# The release: build/dist/regolith-$(VERSION).tar.gz holds the files git
# tracks (as they are in the work tree) and the explorer's page, built, in
# explorer/www; the rockspec's source.  build/rock/*.src.rock is that
# tarball and the rockspec, as `luarocks pack` lays out a source rock, so
# that `luarocks install` builds it offline.
VERSION  = 0.1.0
ROCKSPEC = rockspec/regolith-$(VERSION)-1.rockspec
DIST     = build/dist/regolith-$(VERSION).tar.gz

dist: build/explorer/index.html
	@test -n "$$(git ls-files 2>/dev/null)" || { echo "make dist needs a git checkout" >&2; exit 1; }
	rm -rf build/dist && mkdir -p build/dist/regolith-$(VERSION)
	git ls-files -z | xargs -0 sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done' sh | \
	  tar --null -T - -cf - | tar -xf - -C build/dist/regolith-$(VERSION)
	cp -r build/explorer build/dist/regolith-$(VERSION)/explorer/www
	tar -C build/dist -czf $(DIST) regolith-$(VERSION)
	rm -rf build/dist/regolith-$(VERSION)
	@echo "$(DIST)"

rock: dist
	rm -rf build/rock && mkdir -p build/rock/src
	cp $(ROCKSPEC) $(DIST) build/rock/src/
	cd build/rock/src && zip -q ../regolith-$(VERSION)-1.src.rock \
	  regolith-$(VERSION)-1.rockspec regolith-$(VERSION).tar.gz
	rm -rf build/rock/src
	@echo "build/rock/regolith-$(VERSION)-1.src.rock"

install-test: explorer
	sh tools/install_test.sh

clean:
	rm -rf build
