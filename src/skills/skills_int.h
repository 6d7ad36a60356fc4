/*
 * What src/skills/ works on: the parts of an engine that custom skills and
 * bundles need, handed over by the engine when it opens (skd__skills_new),
 * so that nothing here calls back into the engine (scripts/check-layers.sh).
 * Everything is borrowed from the engine except synced.
 */
#ifndef SKILLD_SKILLS_INT_H
#define SKILLD_SKILLS_INT_H

#include "skilld/custom.h"
#include "skilld/store.h"

struct skd_skills {
    const skd_config *cfg; /* the operator's settings */
    skd_store *store;      /* stored skills and bundles */
    skd_registry *reg;     /* where custom skills are added */
    json_t *synced;        /* owned; custom_sync.c: the stored skills last loaded */
};

#endif
