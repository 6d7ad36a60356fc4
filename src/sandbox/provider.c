/*
 * The table of sandbox providers and the choice among them
 * (SKILLS_SANDBOX_RUNTIME = native | docker | podman | auto). A provider is
 * added by declaring it in provider.h and appending it to `providers`; the
 * order of `auto_order` is DESIGN.md's: native where it works, then podman,
 * then docker.
 */
#include "sandbox/provider.h"

#include <stdio.h>
#include <string.h>

static const skd__provider *const providers[] = {
    &skd__provider_native,
    &skd__provider_docker,
    &skd__provider_podman,
};

static const char *const auto_order[] = {"native", "podman", "docker"};

#define NPROV (sizeof(providers) / sizeof(providers[0]))

static const skd__provider *by_name(const char *name)
{
    for (size_t i = 0; i < NPROV; i++)
        if (strcmp(providers[i]->name, name) == 0)
            return providers[i];
    return NULL;
}

const skd__provider *skd__provider_find(const char *name, skd_err *err)
{
    if (!name || !*name)
        name = "native";
    if (strcmp(name, "auto") != 0) {
        const skd__provider *p = by_name(name);
        if (!p)
            skd_err_set(err, SKD_ESANDBOX,
                        "unknown sandbox runtime '%s' (native, docker, podman, auto)", name);
        return p;
    }
    char why[SKD_ERR_MSG_MAX] = "";
    size_t used = 0;
    for (size_t i = 0; i < sizeof(auto_order) / sizeof(auto_order[0]); i++) {
        const skd__provider *p = by_name(auto_order[i]);
        skd_err e = {0};
        if (!p)
            continue;
        if (p->detect(&e) == 0)
            return p;
        int n = snprintf(why + used, sizeof(why) - used, "%s%s: %s", used ? "; " : "", p->name,
                         skd_err_msg(&e));
        if (n > 0 && (size_t)n < sizeof(why) - used)
            used += (size_t)n;
    }
    skd_err_set(err, SKD_ESANDBOX, "no sandbox runtime works here (%s)", why);
    return NULL;
}

int skd_sandbox_provider_detect(const char *runtime, skd_err *err)
{
    const skd__provider *p = skd__provider_find(runtime, err);
    if (!p)
        return SKD_ESANDBOX;
    return p->detect(err);
}

const char *skd_sandbox_runtime_pick(const char *runtime, skd_err *err)
{
    const skd__provider *p = skd__provider_find(runtime, err);
    return p ? p->name : NULL;
}
