/*
 * skilld secrets set NAME --key KEY_ID --hosts H[,H...] [--headers N[,N...]] < VALUE
 *               | list --key KEY_ID | rm NAME --key KEY_ID
 * A key's secrets (docs/egress.md, Secrets), as the local operator, through
 * the engine as POST/GET/DELETE /v1/secrets do. The value is read from
 * stdin (one trailing newline dropped), never from the command line, where
 * the process list would show it; it is wiped from this process's memory
 * once the engine has sealed it.
 */
#include "cli/cli.h"
#include "skilld/tenancy.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VALUE_CAP (16 * 1024 + 2) /* the engine refuses over 16 KiB; room for "\r\n" */

/* A comma-separated list as a JSON array of its non-empty items. */
static json_t *csv_array(const char *csv)
{
    json_t *a = json_array();
    for (const char *p = csv; a && *p;) {
        size_t n = strcspn(p, ",");
        if (n && json_array_append_new(a, json_stringn(p, n))) {
            json_decref(a);
            return NULL;
        }
        p += n + (p[n] == ',');
    }
    return a;
}

/* stdin into buf (cap bytes, NUL-terminated), one trailing "\n" or "\r\n"
 * dropped. -1 when it does not fit or cannot be read. */
static ssize_t read_value(char *buf, size_t cap)
{
    size_t len = 0;
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == cap)
            return -1;
    }
    if (len && buf[len - 1] == '\n')
        len--;
    if (len && buf[len - 1] == '\r')
        len--;
    buf[len] = '\0';
    return (ssize_t)len;
}

static int set(skd_engine *e, const skd_actor *op, const char *name, const char *key,
               const char *hosts, const char *headers)
{
    if (!hosts)
        return skd__cli_usage("secrets set", "--hosts names the hosts the secret is bound to");
    static char value[VALUE_CAP + 1];
    ssize_t len = read_value(value, VALUE_CAP);
    if (len < 0) {
        fprintf(stderr, "skilld secrets set: the value (stdin) is unreadable or over 16 KiB\n");
        return CLI_FAIL;
    }
    skd_err err = {0};
    json_t *body = json_pack("{s:s, s:s%, s:o*, s:s}", "name", name, "value", value, (size_t)len,
                             "hosts", csv_array(hosts), "key", key);
    if (body && headers)
        json_object_set_new(body, "headers", csv_array(headers));
    json_t *out = body ? skd_engine_secret_set(e, op, body, &err) : NULL;
    if (!body)
        skd_err_set(&err, SKD_ENOMEM, "out of memory");
    explicit_bzero(value, sizeof(value));
    if (body) /* jansson's copy of the value */
        explicit_bzero((char *)json_string_value(json_object_get(body, "value")), (size_t)len);
    json_decref(body);
    if (!out) {
        fprintf(stderr, "skilld secrets set: %s: %s\n", skd_errcode(err.code), skd_err_msg(&err));
        return err.code == SKD_EINVAL ? CLI_USAGE : CLI_FAIL;
    }
    skd__cli_print_json(out);
    json_decref(out);
    return CLI_OK;
}

int skd__cli_secrets(skd_cli *cli, int argc, char **argv)
{
    if (argc < 2 ||
        (strcmp(argv[1], "set") != 0 && strcmp(argv[1], "list") != 0 && strcmp(argv[1], "rm") != 0))
        return skd__cli_usage("secrets", "expected set, list or rm");
    const char *sub = argv[1], *name = NULL, *key = NULL, *hosts = NULL, *headers = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
            key = argv[++i];
        else if (strcmp(argv[i], "--hosts") == 0 && i + 1 < argc && strcmp(sub, "set") == 0)
            hosts = argv[++i];
        else if (strcmp(argv[i], "--headers") == 0 && i + 1 < argc && strcmp(sub, "set") == 0)
            headers = argv[++i];
        else if (argv[i][0] != '-' && !name && strcmp(sub, "list") != 0)
            name = argv[i];
        else
            return skd__cli_usage("secrets", "unexpected argument %s", argv[i]);
    }
    if (!key)
        return skd__cli_usage("secrets", "--key names the API key the secrets belong to");
    if (!name && strcmp(sub, "list") != 0)
        return skd__cli_usage("secrets", "name the secret");
    skd_engine *e = skd__cli_engine(cli);
    if (!e)
        return CLI_FAIL;
    /* The local operator, who may name any key. */
    skd_actor op = {.key_id = NULL, .scopes = SKD_SCOPE_ALL};
    skd_err err = {0};
    if (strcmp(sub, "set") == 0)
        return set(e, &op, name, key, hosts, headers);
    if (strcmp(sub, "rm") == 0) {
        if (skd_engine_secret_delete(e, &op, name, key, &err)) {
            fprintf(stderr, "skilld secrets rm: %s: %s\n", skd_errcode(err.code),
                    skd_err_msg(&err));
            return CLI_FAIL;
        }
        printf("removed %s\n", name);
        return CLI_OK;
    }
    json_t *list = skd_engine_secret_list(e, &op, key, &err);
    if (!list) {
        fprintf(stderr, "skilld secrets list: %s: %s\n", skd_errcode(err.code), skd_err_msg(&err));
        return CLI_FAIL;
    }
    skd__cli_print_json(list);
    json_decref(list);
    return CLI_OK;
}
