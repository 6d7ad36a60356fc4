/*
 * jget: one field of a JSON document, for the shell tests.
 *
 *   jget [-l] PATH [FILE]     PATH is "." or ".a.b" (object members only)
 *
 * Prints the value at PATH: a string as is, anything else as compact JSON
 * (a JSON null as "null"). With -l it prints the value's length instead (a
 * string's code points, an array's elements, an object's members; 0 for
 * anything else), as jq's `length` does. When a member is missing, the
 * document is not JSON or not an object where PATH needs one, it prints
 * nothing and exits 1, so a test cannot mistake a missing field for null.
 *
 * Why not jq or python3: the VM ring (tests/platform) runs these scripts on
 * an emulated CPU, where cost is the instructions run. jq 1.6 (Debian 12)
 * runs about 175 million instructions to start (it compiles its builtins)
 * and python3 about 58 million; this runs well under one million. jansson
 * does the parsing; this file only walks the path.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t utf8_codepoints(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            count++;
    return count;
}

static size_t length_of(const json_t *v)
{
    if (json_is_string(v))
        return utf8_codepoints(json_string_value(v), json_string_length(v));
    if (json_is_array(v))
        return json_array_size(v);
    if (json_is_object(v))
        return json_object_size(v);
    return 0;
}

/* walk: the value at PATH (".a.b") under root, or NULL. */
static json_t *walk(json_t *root, const char *path)
{
    json_t *v = root;
    const char *p = path + 1; /* past the leading '.' */
    char name[256];

    while (v && *p) {
        size_t n = strcspn(p, ".");
        if (n == 0 || n >= sizeof(name))
            return NULL;
        memcpy(name, p, n);
        name[n] = '\0';
        v = json_is_object(v) ? json_object_get(v, name) : NULL;
        p += n;
        if (*p == '.')
            p++;
    }
    return v;
}

int main(int argc, char **argv)
{
    int want_length = 0;
    int i = 1;

    if (i < argc && strcmp(argv[i], "-l") == 0) {
        want_length = 1;
        i++;
    }
    if (i >= argc || argv[i][0] != '.' || argc - i > 2) {
        fprintf(stderr, "usage: jget [-l] .PATH [FILE]\n");
        return 2;
    }
    const char *path = argv[i];
    const char *file = i + 1 < argc ? argv[i + 1] : NULL;

    json_error_t err;
    json_t *root = file ? json_load_file(file, JSON_DECODE_ANY, &err)
                        : json_loadf(stdin, JSON_DECODE_ANY, &err);
    json_t *v = root ? walk(root, path) : NULL;

    int rc = 0;
    if (!v) {
        rc = 1;
    } else if (want_length) {
        printf("%zu\n", length_of(v));
    } else if (json_is_string(v)) {
        fwrite(json_string_value(v), 1, json_string_length(v), stdout);
        putchar('\n');
    } else {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (s)
            puts(s);
        else
            rc = 1;
        free(s);
    }
    json_decref(root);
    return ferror(stdout) ? 1 : rc;
}
