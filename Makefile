# skilld build. `make` leaves the binary at build/skilld.
#   make            release build (-O2 -g) into build/
#   make asan       ASan+UBSan build into build-asan/
#   make check      build and run every test (scripts/test.sh)
#   make lint       banned functions, clang-format, no cycle among src/ folders
#   make install    binary, man page, systemd units, /etc/skilld/skilld.conf
#                   (PREFIX=/usr/local, DESTDIR for staging; as root with
#                   no DESTDIR it also creates the `skilld` system user)
# Sources are picked up by directory: src/<part>/*.c go into libskilld.a,
# src/cli/*.c into the binary, tests/unit/test_*.c each into a test program;
# tests/fixtures/*.c into the test programs and build/skilld-test only.

BUILD    ?= build
CC       ?= gcc
PKGS     := jansson libmicrohttpd libcurl libseccomp sqlite3 libpq libssl libcrypto nettle libxml-2.0 libarchive libsystemd \
            cjose
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
            -Wno-format-nonliteral -Werror
CFLAGS   ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -fno-strict-aliasing -pthread $(WARN) -Iinclude -Isrc \
              $(PKG_CFLAGS) $(CFLAGS) $(EXTRA_CFLAGS)
LDLIBS   := $(PKG_LIBS) -lpthread $(EXTRA_LDLIBS)
# build/skilld loads these on first use (src/cli/lazylib.c, scripts/lazy-stubs.sh):
# a command that needs none of them does not pay the loader for them and
# their dependencies. x86-64 only (the trampolines are assembly); elsewhere,
# or with LAZY_PKGS=, they are linked as usual. Tests link everything.
LAZY_PKGS ?= libcurl libxml-2.0 libarchive libmicrohttpd sqlite3 libssl libcrypto nettle libpq libsystemd cjose
ifneq ($(shell uname -m),x86_64)
LAZY_PKGS :=
endif
LAZY_PKGS := $(filter $(PKGS),$(LAZY_PKGS))
# A lazy library's own dependencies that skilld links anyway (cjose's
# jansson) stay linked: only the others get trampolines.
EAGER_LIBS := $(patsubst -l%,%,$(filter -l%,$(shell pkg-config --libs $(filter-out $(LAZY_PKGS),$(PKGS)) 2>/dev/null)))
LAZY_LIBS := $(filter-out $(EAGER_LIBS),$(patsubst -l%,%,$(filter -l%,$(shell pkg-config --libs $(LAZY_PKGS) 2>/dev/null))))
SKILLD_LDLIBS := $(shell pkg-config --libs $(filter-out $(LAZY_PKGS),$(PKGS)) 2>/dev/null) \
                 -lpthread -ldl $(EXTRA_LDLIBS)

LIB_SRCS := $(filter-out src/cli/%,$(wildcard src/*/*.c src/*/*/*.c))
CLI_SRCS := $(wildcard src/cli/*.c)
TEST_SRCS := $(wildcard tests/unit/test_*.c)
# Test fixtures (tests/fixtures/*.c): linked into the unit tests and into
# build/skilld-test, the binary the integration tests that need them run;
# never into build/skilld or libskilld.a (src/server/test_hooks.h).
FIXTURE_SRCS := $(wildcard tests/fixtures/*.c)
TEST_SUPPORT := $(filter-out $(TEST_SRCS),$(wildcard tests/unit/*.c)) $(FIXTURE_SRCS)
EXAMPLE_SRCS := $(wildcard examples/*.c)
BENCH_SRCS := $(wildcard bench/*.c)

# The operator console (ui/*), embedded in the library as a generated C
# file (scripts/embed-ui.sh; src/server/console.c serves it at /ui).
UI_FILES := $(sort $(wildcard ui/*.html ui/*.js ui/*.css))
# The drivers of eval_code's interpreter contexts, embedded the same way
# (scripts/embed-drivers.sh; src/sandbox/interp.c runs them in a sandbox).
DRIVER_FILES := src/sandbox/interp/driver.py src/sandbox/interp/driver.js
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/ui_assets.o \
            $(BUILD)/obj/gen/interp_drivers.o
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
SUPPORT_OBJS := $(TEST_SUPPORT:%.c=$(BUILD)/obj/%.o)
FIXTURE_OBJS := $(FIXTURE_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/%.c=$(BUILD)/examples/%)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
# Helpers of the shell tests (tests/tools/*.c, one program each).
TOOL_SRCS := $(wildcard tests/tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tests/tools/%.c=$(BUILD)/tools/%)

.PHONY: all tests asan check lint format clean fuzz install uninstall
all: $(BUILD)/skilld $(BUILD)/skilld-test $(BUILD)/libskilld.a tests $(EXAMPLE_BINS) $(BENCH_BINS)

tests: $(TEST_BINS) $(TOOL_BINS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC    $<"
	@$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/gen/ui_assets.c: $(UI_FILES) scripts/embed-ui.sh
	@mkdir -p $(dir $@)
	@echo "  GEN   $@"
	@scripts/embed-ui.sh $@ $(UI_FILES)

$(BUILD)/obj/gen/ui_assets.o: $(BUILD)/gen/ui_assets.c
	@mkdir -p $(dir $@)
	@echo "  CC    $<"
	@$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/gen/interp_drivers.c: $(DRIVER_FILES) scripts/embed-drivers.sh
	@mkdir -p $(dir $@)
	@echo "  GEN   $@"
	@scripts/embed-drivers.sh $@ $(DRIVER_FILES)

$(BUILD)/obj/gen/interp_drivers.o: $(BUILD)/gen/interp_drivers.c
	@mkdir -p $(dir $@)
	@echo "  CC    $<"
	@$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libskilld.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	@echo "  AR    $@"
	@rm -f $@ && ar rcs $@ $^

$(BUILD)/lazy/stubs.S: $(CLI_OBJS) $(BUILD)/libskilld.a scripts/lazy-stubs.sh Makefile
	@mkdir -p $(dir $@)
	@echo "  GEN   $@"
	@scripts/lazy-stubs.sh $@ "$(CC)" "$(LAZY_LIBS)" $(CLI_OBJS) $(BUILD)/libskilld.a

$(BUILD)/lazy/stubs.o: $(BUILD)/lazy/stubs.S
	@$(CC) -c $< -o $@

$(BUILD)/skilld: $(CLI_OBJS) $(BUILD)/libskilld.a $(BUILD)/lazy/stubs.o
	@echo "  LINK  $@"
	@$(CC) $(ALL_CFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/lazy/stubs.o $(BUILD)/libskilld.a \
	    $(SKILLD_LDLIBS)

# The same binary with the test fixtures (tests/fixtures/).
$(BUILD)/skilld-test: $(CLI_OBJS) $(FIXTURE_OBJS) $(BUILD)/libskilld.a $(BUILD)/lazy/stubs.o
	@echo "  LINK  $@"
	@$(CC) $(ALL_CFLAGS) -o $@ $(CLI_OBJS) $(FIXTURE_OBJS) $(BUILD)/lazy/stubs.o \
	    $(BUILD)/libskilld.a $(SKILLD_LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(SUPPORT_OBJS) $(BUILD)/libskilld.a
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	@$(CC) $(ALL_CFLAGS) -o $@ $< $(SUPPORT_OBJS) $(BUILD)/libskilld.a $(LDLIBS)

$(BUILD)/tools/jget: $(BUILD)/obj/tests/tools/jget.o
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	@$(CC) $(ALL_CFLAGS) -o $@ $< $(shell pkg-config --libs jansson)

# Any other helper, such as the escape battery's attack programs: plain
# flags, never a sanitizer (they run inside the sandbox); int80 is static.
$(BUILD)/tools/escape_int80: STATIC := -static
$(BUILD)/tools/%: tests/tools/%.c
	@mkdir -p $(dir $@)
	@echo "  CC    $@"
	@$(CC) -O0 $(STATIC) -o $@ $<

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(BUILD)/libskilld.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libskilld.a $(LDLIBS)

# Benchmark drivers: bench/*.c, one program each (bench/README.md).
$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(BUILD)/libskilld.a
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	@$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libskilld.a $(LDLIBS)

asan:
	$(MAKE) BUILD=build-asan CC=clang CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" all

# libFuzzer drivers: tests/fuzz/fuzz_*.c, built with clang.
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang CFLAGS="-O1 -g -fsanitize=fuzzer-no-link,address,undefined" build-fuzz/libskilld.a
	@mkdir -p build-fuzz/fuzz
	for f in $(FUZZ_SRCS); do \
	  n=$$(basename $$f .c); \
	  clang -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude -Isrc $(PKG_CFLAGS) \
	    $$f build-fuzz/libskilld.a $(LDLIBS) -o build-fuzz/fuzz/$$n || exit 1; \
	done

check:
	scripts/test.sh

lint: $(LIB_OBJS) $(CLI_OBJS)
	scripts/check-banned.sh
	scripts/check-format.sh
	BUILD=$(BUILD) scripts/check-layers.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

# Installation. Units go where systemd looks for local ones
# (/usr/local/lib/systemd/{system,user} with the default PREFIX); the
# config file is never overwritten.
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
UNITDIR  ?= $(PREFIX)/lib/systemd/system
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
SYSCONFDIR ?= /etc
SKILLD_USER ?= skilld

install: $(BUILD)/skilld
	install -D -m 0755 $(BUILD)/skilld $(DESTDIR)$(BINDIR)/skilld
	install -D -m 0644 docs/skilld.1 $(DESTDIR)$(MANDIR)/man1/skilld.1
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(USERUNITDIR)
	sed 's|/usr/local/bin/skilld|$(BINDIR)/skilld|g; s|/etc/skilld/|$(SYSCONFDIR)/skilld/|g' \
	    dist/skilld.service >$(DESTDIR)$(UNITDIR)/skilld.service
	sed 's|/usr/local/bin/skilld|$(BINDIR)/skilld|g' dist/skilld-user.service \
	    >$(DESTDIR)$(USERUNITDIR)/skilld-user.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/skilld.service $(DESTDIR)$(USERUNITDIR)/skilld-user.service
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/skilld
	[ -e $(DESTDIR)$(SYSCONFDIR)/skilld/skilld.conf ] || \
	    install -m 0644 dist/skilld.conf $(DESTDIR)$(SYSCONFDIR)/skilld/skilld.conf
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
	    getent passwd $(SKILLD_USER) >/dev/null || \
	        useradd --system --home-dir /var/lib/skilld --no-create-home \
	            --shell /usr/sbin/nologin $(SKILLD_USER); \
	    if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi; \
	fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/skilld $(DESTDIR)$(MANDIR)/man1/skilld.1 \
	    $(DESTDIR)$(UNITDIR)/skilld.service $(DESTDIR)$(USERUNITDIR)/skilld-user.service

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
