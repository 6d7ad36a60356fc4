/*
 * Libraries loaded on first use (bench/README.md, "skilld exec start-up").
 *
 * build/skilld is linked without the libraries in the Makefile's LAZY_PKGS
 * (libcurl, libxml2, libarchive, libmicrohttpd, sqlite3, libcrypto, nettle,
 * libcjose, and libpq and libsystemd where they are used): scripts/lazy-stubs.sh
 * generates, for every function of theirs that skilld calls, a trampoline
 * of the same name that jumps through skd__lazy_ptr[i]. The first call of
 * any function of a library lands here: the library is opened with dlopen
 * (its soname, as the linker would have recorded it), every symbol skilld
 * uses from it is looked up, and the table is filled, so every later call
 * is one indirect jump. Commands that never call those libraries (skilld
 * exec) never load them nor their dependencies (gnutls, OpenLDAP,
 * Kerberos, ICU, ...): 4 objects at start-up instead of 48.
 *
 * The test programs and libskilld.a users link the libraries as usual;
 * only build/skilld has the trampolines. A library or symbol that cannot be
 * loaded is a broken installation: skilld says which and aborts (it cannot
 * return an error from inside a libcurl call).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIBS 32

struct lazy_info {
    uint32_t lib;
    uint32_t size; /* 0: a function; else a data symbol of that size */
};

/* The generated tables (weak: absent in a build without lazy libraries). */
extern void *skd__lazy_ptr[] __attribute__((weak));
extern const char *const skd__lazy_sym[] __attribute__((weak));
extern const struct lazy_info skd__lazy_info[] __attribute__((weak));
extern const char *const skd__lazy_lib[] __attribute__((weak));
extern const uint32_t skd__lazy_nsyms __attribute__((weak));
extern const uint32_t skd__lazy_nlibs __attribute__((weak));

void *skd__lazy_resolve(unsigned long k);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *handles[MAX_LIBS];

__attribute__((noreturn)) static void die(const char *what, const char *name, const char *why)
{
    fprintf(stderr,
            "skilld: cannot load %s %s: %s\n"
            "skilld: it is a library skilld was built with; reinstall it (scripts/deps.sh)\n",
            what, name, why ? why : "unknown error");
    abort();
}

/* Called by the trampolines (scripts/lazy-stubs.sh) with the index of the
 * symbol being called; returns its address. */
void *skd__lazy_resolve(unsigned long k)
{
    if (!&skd__lazy_nsyms || k >= skd__lazy_nsyms)
        abort();
    uint32_t lib = skd__lazy_info[k].lib;
    if (lib >= skd__lazy_nlibs || lib >= MAX_LIBS)
        abort();
    pthread_mutex_lock(&mu);
    if (!handles[lib]) {
        dlerror();
        void *h = dlopen(skd__lazy_lib[lib], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            die("library", skd__lazy_lib[lib], dlerror());
        /* Data first, then the functions: a thread that sees a resolved
         * function pointer sees the library's variables filled in too. */
        for (int pass = 0; pass < 2; pass++)
            for (uint32_t i = 0; i < skd__lazy_nsyms; i++) {
                if (skd__lazy_info[i].lib != lib || (pass == 0) != (skd__lazy_info[i].size > 0))
                    continue;
                dlerror();
                void *p = dlsym(h, skd__lazy_sym[i]);
                if (!p)
                    die("symbol", skd__lazy_sym[i], dlerror());
                if (pass == 0)
                    memcpy(skd__lazy_ptr[i], p, skd__lazy_info[i].size);
                else
                    __atomic_store_n(&skd__lazy_ptr[i], p, __ATOMIC_RELEASE);
            }
        handles[lib] = h;
    }
    void *fn = __atomic_load_n(&skd__lazy_ptr[k], __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&mu);
    return fn;
}
