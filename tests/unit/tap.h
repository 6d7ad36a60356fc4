/*
 * Minimal test harness for the unit ring. Each test program runs its cases
 * and prints one line per case: "PASS <program>: <case>" or
 * "FAIL <program>: <case>: <file>:<line>: <expression>". scripts/test.sh
 * counts those lines. A program exits 1 when any case failed.
 */
#ifndef SKILLD_TESTS_TAP_H
#define SKILLD_TESTS_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_failed_total;
static int tap_case_failed;
static const char *tap_prog = "unit";

#define CHECK(expr)                                                                        \
    do {                                                                                   \
        if (!(expr)) {                                                                     \
            if (!tap_case_failed)                                                          \
                printf("FAIL %s: %s: %s:%d: %s\n", tap_prog, tap_case, __FILE__, __LINE__, \
                       #expr);                                                             \
            tap_case_failed = 1;                                                           \
        }                                                                                  \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                 \
    do {                                                                                   \
        long long tap_a = (long long)(a), tap_b = (long long)(b);                          \
        if (tap_a != tap_b) {                                                              \
            if (!tap_case_failed)                                                          \
                printf("FAIL %s: %s: %s:%d: %s == %s (%lld != %lld)\n", tap_prog, tap_case, \
                       __FILE__, __LINE__, #a, #b, tap_a, tap_b);                          \
            tap_case_failed = 1;                                                           \
        }                                                                                  \
    } while (0)

#define CHECK_STR(a, b)                                                                    \
    do {                                                                                   \
        const char *tap_a = (a), *tap_b = (b);                                             \
        if (!tap_a || !tap_b || strcmp(tap_a, tap_b) != 0) {                               \
            if (!tap_case_failed)                                                          \
                printf("FAIL %s: %s: %s:%d: %s == \"%s\" (got \"%s\")\n", tap_prog,        \
                       tap_case, __FILE__, __LINE__, #a, tap_b ? tap_b : "(null)",          \
                       tap_a ? tap_a : "(null)");                                          \
            tap_case_failed = 1;                                                           \
        }                                                                                  \
    } while (0)

/* Declare a case: TEST(name) { ... } and run it with RUN(name). */
#define TEST(name) static void name(const char *tap_case)
#define RUN(name)                                                                          \
    do {                                                                                   \
        tap_case_failed = 0;                                                               \
        name(#name);                                                                       \
        if (tap_case_failed)                                                               \
            tap_failed_total++;                                                            \
        else                                                                               \
            printf("PASS %s: %s\n", tap_prog, #name);                                      \
        fflush(stdout);                                                                    \
    } while (0)

#define TAP_BEGIN(prog) (tap_prog = (prog))
#define TAP_END() (tap_failed_total ? 1 : 0)

#endif
