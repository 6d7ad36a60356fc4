/*
 * The skill registry (see include/skilld/registry.h).
 *
 * Skills are kept in one array under a read-write lock. Lookups are rare
 * compared with the work a skill does, so a linear scan is fine up to
 * thousands of skills and keeps the code obvious. Every skill is
 * reference-counted: a caller that looked a skill up keeps it valid while
 * another thread removes or replaces it.
 */
#include "skilld/registry.h"
#include "skilld/util.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct skd_skill {
    atomic_int refs;
    char *name, *version, *description, *owner;
    json_t *input_schema, *output_schema, *tags, *manifest;
    enum skd_mode mode;
    int quick;      /* skd_skill_def.quick */
    int live_bound; /* skd_skill_def.live_bound */
    skd_handler_fn handler;
    void *udata;
    void (*udata_free)(void *);
    atomic_int enabled;
};

struct skd_registry {
    pthread_rwlock_t lock;
    skd_skill **items;
    size_t n, cap;
    atomic_ulong generation;
    void (*on_change)(void *);
    void *on_change_arg;
};

int skd_skill_name_valid(const char *s)
{
    if (!s || !islower((unsigned char)s[0]))
        return 0;
    size_t n = 0;
    for (; s[n]; n++) {
        unsigned char c = (unsigned char)s[n];
        if (!(islower(c) || isdigit(c) || c == '_' || c == '-'))
            return 0;
    }
    return n <= 64;
}

int skd_version_valid(const char *s)
{
    if (!s)
        return 0;
    for (int part = 0; part < 3; part++) {
        size_t digits = 0;
        if (s[0] == '0' && isdigit((unsigned char)s[1]))
            return 0;
        while (isdigit((unsigned char)*s)) {
            s++;
            if (++digits > 9)
                return 0;
        }
        if (!digits)
            return 0;
        if (part < 2 && *s++ != '.')
            return 0;
    }
    return *s == '\0';
}

int skd_version_cmp(const char *a, const char *b)
{
    for (int part = 0; part < 3; part++) {
        long x = strtol(a, (char **)&a, 10), y = strtol(b, (char **)&b, 10);
        if (x != y)
            return x < y ? -1 : 1;
        if (*a == '.')
            a++;
        if (*b == '.')
            b++;
    }
    return 0;
}

const char *skd_mode_name(enum skd_mode mode)
{
    return mode == SKD_MODE_SANDBOX ? "sandbox" : "direct";
}

static void skill_free(skd_skill *s)
{
    if (s->udata_free)
        s->udata_free(s->udata);
    free(s->name);
    free(s->version);
    free(s->description);
    free(s->owner);
    json_decref(s->input_schema);
    json_decref(s->output_schema);
    json_decref(s->tags);
    json_decref(s->manifest);
    free(s);
}

void skd_skill_ref(skd_skill *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void skd_skill_unref(skd_skill *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        skill_free(s);
}

skd_registry *skd_registry_new(void)
{
    skd_registry *r = calloc(1, sizeof(*r));
    if (r && pthread_rwlock_init(&r->lock, NULL) != 0) {
        free(r);
        return NULL;
    }
    return r;
}

void skd_registry_free(skd_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        skd_skill_unref(r->items[i]);
    free(r->items);
    pthread_rwlock_destroy(&r->lock);
    free(r);
}

static int same_owner(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void changed(skd_registry *r)
{
    atomic_fetch_add(&r->generation, 1);
    /* Read the callback under the lock (skd_registry_on_change writes it
     * there), call it outside so it may use the registry. */
    pthread_rwlock_rdlock(&r->lock);
    void (*fn)(void *) = r->on_change;
    void *arg = r->on_change_arg;
    pthread_rwlock_unlock(&r->lock);
    if (fn)
        fn(arg);
}

static skd_skill *skill_new(const skd_skill_def *d)
{
    skd_skill *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    atomic_init(&s->enabled, 1);
    s->name = strdup(d->name);
    s->version = strdup(d->version);
    s->description = strdup(d->description ? d->description : "");
    s->owner = d->owner ? strdup(d->owner) : NULL;
    s->input_schema = json_incref(d->input_schema);
    s->output_schema = json_incref(d->output_schema);
    s->tags = d->tags ? json_incref(d->tags) : json_array();
    s->manifest = json_incref(d->manifest);
    s->mode = d->mode;
    s->quick = d->quick != 0;
    s->live_bound = d->live_bound != 0;
    s->handler = d->handler;
    s->udata = d->udata;
    s->udata_free = d->udata_free;
    if (!s->name || !s->version || !s->description || (d->owner && !s->owner) || !s->tags) {
        s->udata_free = NULL; /* the caller still owns udata on failure */
        skill_free(s);
        return NULL;
    }
    return s;
}

int skd_registry_add(skd_registry *r, const skd_skill_def *d, int replace, skd_err *err)
{
    if (!skd_skill_name_valid(d->name))
        return skd_err_set(err, SKD_EINVAL, "skill name \"%s\" must match [a-z][a-z0-9_-]{0,63}",
                           d->name ? d->name : "");
    if (!skd_version_valid(d->version))
        return skd_err_set(err, SKD_EINVAL, "skill version \"%s\" must be x.y.z",
                           d->version ? d->version : "");
    if (!d->handler)
        return skd_err_set(err, SKD_EINVAL, "skill %s has no handler", d->name);
    if (!json_is_object(d->input_schema))
        return skd_err_set(err, SKD_EINVAL, "skill %s: inputSchema must be an object", d->name);
    int rc = skd_schema_check(d->input_schema, err);
    if (rc)
        return rc;
    if (d->output_schema && (rc = skd_schema_check(d->output_schema, err)) != 0)
        return rc;
    skd_skill *s = skill_new(d);
    if (!s)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");

    skd_skill *old = NULL;
    pthread_rwlock_wrlock(&r->lock);
    size_t i;
    for (i = 0; i < r->n; i++) {
        skd_skill *o = r->items[i];
        if (strcmp(o->name, d->name) == 0 && strcmp(o->version, d->version) == 0 &&
            same_owner(o->owner, d->owner))
            break;
    }
    if (i < r->n && !replace) {
        rc =
            skd_err_set(err, SKD_EEXISTS, "skill %s@%s is already registered", d->name, d->version);
    } else if (i < r->n) {
        old = r->items[i];
        r->items[i] = s;
    } else if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        skd_skill **p = realloc(r->items, cap * sizeof(*p));
        if (!p) {
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        } else {
            r->items = p;
            r->cap = cap;
            r->items[r->n++] = s;
        }
    } else {
        r->items[r->n++] = s;
    }
    pthread_rwlock_unlock(&r->lock);
    if (rc) {
        s->udata_free = NULL;
        skill_free(s);
        return rc;
    }
    skd_skill_unref(old);
    changed(r);
    return 0;
}

int skd_registry_remove(skd_registry *r, const char *name, const char *version, const char *owner,
                        skd_err *err)
{
    size_t removed = 0;
    pthread_rwlock_wrlock(&r->lock);
    for (size_t i = 0; i < r->n;) {
        skd_skill *o = r->items[i];
        if (strcmp(o->name, name) == 0 && (!version || strcmp(o->version, version) == 0) &&
            same_owner(o->owner, owner)) {
            skd_skill_unref(o);
            r->items[i] = r->items[--r->n];
            removed++;
        } else {
            i++;
        }
    }
    pthread_rwlock_unlock(&r->lock);
    if (!removed)
        return skd_err_set(err, SKD_ENOENT, "no skill %s%s%s to remove", name, version ? "@" : "",
                           version ? version : "");
    changed(r);
    return 0;
}

/* Split "name@version" into name (copied into buf) and version. */
static int split_ref(const char *ref, char *buf, size_t cap, const char **version)
{
    const char *at = strchr(ref, '@');
    size_t n = at ? (size_t)(at - ref) : strlen(ref);
    if (n >= cap)
        return -1;
    memcpy(buf, ref, n);
    buf[n] = '\0';
    *version = at ? at + 1 : NULL;
    return 0;
}

/* Better match for key_id: own skill beats global at the same version;
 * otherwise the newer version wins. */
static int better(const skd_skill *cand, const skd_skill *best)
{
    if (!best)
        return 1;
    int c = skd_version_cmp(cand->version, best->version);
    if (c != 0)
        return c > 0;
    return cand->owner && !best->owner;
}

static int visible(const skd_skill *s, const char *key_id)
{
    return !s->owner || (key_id && strcmp(s->owner, key_id) == 0);
}

skd_skill *skd_registry_lookup(skd_registry *r, const char *ref, const char *key_id, skd_err *err)
{
    char name[80];
    const char *version = NULL;
    if (!ref || split_ref(ref, name, sizeof(name), &version) != 0 || !skd_skill_name_valid(name) ||
        (version && !skd_version_valid(version))) {
        skd_err_set(err, SKD_EINVAL, "\"%s\" is not a skill name or name@x.y.z", ref ? ref : "");
        return NULL;
    }
    skd_skill *best = NULL;
    pthread_rwlock_rdlock(&r->lock);
    for (size_t i = 0; i < r->n; i++) {
        skd_skill *s = r->items[i];
        if (strcmp(s->name, name) != 0 || !visible(s, key_id))
            continue;
        if (version && strcmp(s->version, version) != 0)
            continue;
        if (better(s, best))
            best = s;
    }
    if (best)
        skd_skill_ref(best);
    pthread_rwlock_unlock(&r->lock);
    if (!best)
        skd_err_set(err, SKD_ENOENT, "no skill named %s", ref);
    return best;
}

int skd_registry_set_enabled(skd_registry *r, const char *name, const char *version,
                             const char *owner, int enabled, skd_err *err)
{
    size_t hit = 0;
    pthread_rwlock_rdlock(&r->lock);
    for (size_t i = 0; i < r->n; i++) {
        skd_skill *s = r->items[i];
        if (strcmp(s->name, name) == 0 && (!version || strcmp(s->version, version) == 0) &&
            same_owner(s->owner, owner)) {
            atomic_store(&s->enabled, enabled ? 1 : 0);
            hit++;
        }
    }
    pthread_rwlock_unlock(&r->lock);
    if (!hit)
        return skd_err_set(err, SKD_ENOENT, "no skill %s to %s", name,
                           enabled ? "enable" : "disable");
    changed(r);
    return 0;
}

static int cmp_skill(const void *a, const void *b)
{
    const skd_skill *x = *(skd_skill *const *)a, *y = *(skd_skill *const *)b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    c = skd_version_cmp(y->version, x->version); /* newest first */
    if (c)
        return c;
    return (y->owner != NULL) - (x->owner != NULL); /* own before global */
}

skd_skill **skd_registry_list(skd_registry *r, const char *key_id, int newest_only,
                              int include_disabled, size_t *count)
{
    *count = 0;
    pthread_rwlock_rdlock(&r->lock);
    skd_skill **out = calloc(r->n + 1, sizeof(*out));
    size_t n = 0;
    for (size_t i = 0; out && i < r->n; i++) {
        skd_skill *s = r->items[i];
        if (!visible(s, key_id) || (!include_disabled && !atomic_load(&s->enabled)))
            continue;
        skd_skill_ref(s);
        out[n++] = s;
    }
    pthread_rwlock_unlock(&r->lock);
    if (!out)
        return NULL;
    qsort(out, n, sizeof(*out), cmp_skill);
    if (newest_only) {
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
            if (w > 0 && strcmp(out[w - 1]->name, out[i]->name) == 0) {
                skd_skill_unref(out[i]);
                continue;
            }
            out[w++] = out[i];
        }
        n = w;
    }
    *count = n;
    return out;
}

void skd_skill_list_free(skd_skill **list, size_t count)
{
    for (size_t i = 0; list && i < count; i++)
        skd_skill_unref(list[i]);
    free(list);
}

unsigned long skd_registry_generation(skd_registry *r)
{
    return atomic_load(&r->generation);
}

void skd_registry_on_change(skd_registry *r, void (*fn)(void *), void *arg)
{
    pthread_rwlock_wrlock(&r->lock);
    r->on_change = fn;
    r->on_change_arg = arg;
    pthread_rwlock_unlock(&r->lock);
}

const char *skd_skill_name(const skd_skill *s)
{
    return s->name;
}
const char *skd_skill_version(const skd_skill *s)
{
    return s->version;
}
const char *skd_skill_description(const skd_skill *s)
{
    return s->description;
}
const char *skd_skill_owner(const skd_skill *s)
{
    return s->owner;
}
json_t *skd_skill_input_schema(const skd_skill *s)
{
    return s->input_schema;
}
json_t *skd_skill_output_schema(const skd_skill *s)
{
    return s->output_schema;
}
json_t *skd_skill_tags(const skd_skill *s)
{
    return s->tags;
}
json_t *skd_skill_manifest(const skd_skill *s)
{
    return s->manifest;
}
enum skd_mode skd_skill_mode(const skd_skill *s)
{
    return s->mode;
}

int skd_skill_quick(const skd_skill *s)
{
    return s->quick;
}
int skd_skill_live_bound(const skd_skill *s)
{
    return s->live_bound;
}
int skd_skill_enabled(const skd_skill *s)
{
    return atomic_load(&((skd_skill *)s)->enabled);
}

json_t *skd_skill_invoke(const skd_skill *s, const skd_ctx *ctx, const json_t *input)
{
    return s->handler(ctx, input, s->udata);
}

json_t *skd_skill_to_json(const skd_skill *s)
{
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:b, s:O, s:O}", "name", s->name, "version", s->version,
                  "description", s->description, "mode", skd_mode_name(s->mode), "enabled",
                  skd_skill_enabled(s), "inputSchema", s->input_schema, "tags", s->tags);
    if (!o)
        return NULL;
    json_object_set_new(o, "owner", s->owner ? json_string(s->owner) : json_null());
    if (s->output_schema)
        json_object_set(o, "outputSchema", s->output_schema);
    return o;
}
