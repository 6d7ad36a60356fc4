/*
 * `skilld doctor`: which isolation features and limits work on this
 * machine, and what to change when one does not.
 */
#ifndef SKILLD_DOCTOR_H
#define SKILLD_DOCTOR_H

#include <jansson.h>

#include "skilld/config.h"

/* Run every check. Returns a new reference (caller json_decref), NULL only
 * when out of memory:
 *   {"status": "ok"|"warn"|"fail",            worst of the checks
 *    "kernel": "6.1.0-...", "uid": 0,
 *    "checks": [{"name": "userns", "status": "ok"|"warn"|"fail",
 *                "detail": "...", "fix": "..."}, ...]}   fix only when not ok
 * Check names: kernel, userns, cgroup_v2, cgroup_v1, cgroup_limits,
 * seccomp, no_new_privs, openat2, clone3, pidfd_open, protected_symlinks,
 * protected_hardlinks, docker, podman, native_sandbox, egress_proxy. cfg (borrowed) may
 * be NULL (built-in defaults). The checks are read-only probes; the
 * user-namespace probe forks a child that unshares and exits at once, and
 * native_sandbox runs `true` in a native sandbox with the default limits;
 * egress_proxy (with SKILLS_SANDBOX_NETWORK_ENABLED) asks a proxy of its own
 * on a loopback port for a tunnel to the metadata address. */
json_t *skd_doctor_run(const skd_config *cfg);

#endif
