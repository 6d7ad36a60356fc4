/*
 * The sandbox's fixed environment (see env.h): the table's rows as the
 * NULL-terminated vectors execve takes, and the test of a name.
 */
#include "sandbox/env.h"
#include "net/egress.h"
#include "skilld/sandbox.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(SKD_EGRESS_PORT == 3128, "SKD__SANDBOX_PROXY_URL names the egress proxy's port");

#define ROW_BASE(name, value) #name "=" value,
#define ROW_PROXY(name, value)
#define ROW_TRUST(name, value)
#define AS_BASE(name, value, kind) ROW_##kind(name, value)
const char *const skd__sandbox_env_base[] = {SKD__SANDBOX_ENV(AS_BASE) NULL};
#undef ROW_BASE
#undef ROW_PROXY
#undef ROW_TRUST

#define ROW_BASE(name, value)
#define ROW_PROXY(name, value) #name "=" value,
#define ROW_TRUST(name, value)
#define AS_PROXY(name, value, kind) ROW_##kind(name, value)
const char *const skd__sandbox_env_proxy[] = {SKD__SANDBOX_ENV(AS_PROXY) NULL};
#undef ROW_BASE
#undef ROW_PROXY
#undef ROW_TRUST

#define ROW_BASE(name, value)
#define ROW_PROXY(name, value)
#define ROW_TRUST(name, value) #name "=" value,
#define AS_TRUST(name, value, kind) ROW_##kind(name, value)
const char *const skd__sandbox_env_trust[] = {SKD__SANDBOX_ENV(AS_TRUST) NULL};

int skd__sandbox_env_is_proxy(const char *entry)
{
    size_t len = strcspn(entry, "=");
    for (const char *const *p = skd__sandbox_env_proxy; *p; p++)
        if (strncmp(*p, entry, len) == 0 && (*p)[len] == '=')
            return 1;
    return 0;
}

/* Names a trust or proxy setting could be moved with besides the rows
 * (NODE_OPTIONS requires the egress preload). */
static const char *const ca_names[] = {"SSL_CERT_DIR", "NODE_OPTIONS", NULL};

static int in_rows(const char *const *rows, const char *name, size_t len)
{
    for (const char *const *p = rows; *p; p++)
        if (strncmp(*p, name, len) == 0 && ((*p)[len] == '=' || (*p)[len] == '\0'))
            return 1;
    return 0;
}

int skd_sandbox_env_reserved(const char *name)
{
    size_t len = strcspn(name, "=");
    if (strncmp(name, "SKILLD_", 7) == 0 || strncmp(name, "SKILLS_", 7) == 0)
        return 1;
    return in_rows(skd__sandbox_env_base, name, len) ||
           in_rows(skd__sandbox_env_proxy, name, len) ||
           in_rows(skd__sandbox_env_trust, name, len) || in_rows(ca_names, name, len);
}

/* The preload NODE_OPTIONS names (SKD__SANDBOX_NODE_PRELOAD): node before
 * 22.21 has no NODE_USE_ENV_PROXY, and its fetch (undici) ignores the proxy
 * variables, so a fetch would try the sandbox's absent resolver. On the
 * first fetch, when no dispatcher was set, it gives undici's own Agent a
 * dispatcher that sends http: requests to the proxy in absolute form and
 * opens https: ones with CONNECT, TLS verified by node as always (so with
 * NODE_EXTRA_CA_CERTS). A convenience, not a boundary: the proxy is the
 * only way out whatever node does. */
const char skd__sandbox_node_preload[] =
    "'use strict';\n"
    "(() => {\n"
    "  if (process.allowedNodeEnvironmentFlags.has('--use-env-proxy')) return;\n"
    "  const env = process.env, p = env.HTTPS_PROXY || env.https_proxy;\n"
    "  const f = globalThis.fetch, S = Symbol.for('undici.globalDispatcher.1');\n"
    "  let u;\n"
    "  try { u = new URL(p); } catch { return; }\n"
    "  if (typeof f !== 'function' || u.protocol !== 'http:') return;\n"
    "  const net = require('net'), tls = require('tls');\n"
    "  const ph = u.hostname.replace(/^\\[|\\]$/g, ''), pp = Number(u.port) || 80;\n"
    "  function tunnel(o, cb) {\n"
    "    const https = o.protocol === 'https:', h = o.hostname;\n"
    "    const a = (h.includes(':') ? '[' + h + ']' : h) + ':' + (o.port || (https ? 443 : 80));\n"
    "    const s = net.connect(pp, ph);\n"
    "    let b = Buffer.alloc(0), over = false;\n"
    "    const end = (e, c) => { if (over) return; over = true; if (e) s.destroy(); cb(e, c); };\n"
    "    s.on('error', end);\n"
    "    s.once('connect', () => s.write('CONNECT ' + a + ' HTTP/1.1\\r\\nHost: ' + a + "
    "'\\r\\n\\r\\n'));\n"
    "    s.on('data', function head(c) {\n"
    "      b = Buffer.concat([b, c]);\n"
    "      const i = b.indexOf('\\r\\n\\r\\n');\n"
    "      if (i < 0) return b.length > 65536 && end(new Error('egress proxy: answer too long'));\n"
    "      s.removeListener('data', head);\n"
    "      const first = b.toString('latin1', 0, i).split('\\r\\n')[0];\n"
    "      if (!/^HTTP\\/1\\.[01] 200 /.test(first))\n"
    "        return end(Object.assign(new Error('egress proxy: ' + first + ' for ' + a + ': ' + "
    "b.toString('utf8', i + 4)), {code: 'ECONNREFUSED'}));\n"
    "      if (!https) return end(null, s);\n"
    "      const t = tls.connect({socket: s, servername: net.isIP(h) ? undefined : o.servername || "
    "h, ALPNProtocols: ['http/1.1']});\n"
    "      t.on('error', end);\n"
    "      t.once('secureConnect', () => { s.removeListener('error', end); "
    "t.removeListener('error', end); end(null, t); });\n"
    "    });\n"
    "  }\n"
    "  function install() {\n"
    "    if (globalThis[S] !== undefined) return;\n"
    "    f('data:,').catch(() => {});\n"
    "    const d = globalThis[S];\n"
    "    if (!d || d.constructor.name !== 'Agent') return;\n"
    "    const A = d.constructor, fwd = new A(), tun = new A({connect: tunnel}), proxy = "
    "u.origin;\n"
    "    globalThis[S] = {\n"
    "      dispatch(o, h) {\n"
    "        if (String(o.origin).startsWith('http:')) {\n"
    "          const t = new URL(o.origin);\n"
    "          return fwd.dispatch(Object.assign({}, o, {origin: proxy, path: t.origin + o.path}), "
    "h);\n"
    "        }\n"
    "        return tun.dispatch(o, h);\n"
    "      },\n"
    "      close(...a) { return Promise.all([fwd.close(), tun.close()]).then(() => a[0] && "
    "a[0]()); },\n"
    "      destroy(...a) { return Promise.all([fwd.destroy(), tun.destroy()]).then(() => typeof "
    "a[a.length - 1] === 'function' && a[a.length - 1]()); },\n"
    "      on() { return this; }, once() { return this; }, off() { return this; }, emit() { return "
    "false; }\n"
    "    };\n"
    "  }\n"
    "  globalThis.fetch = function fetch(input, init) {\n"
    "    globalThis.fetch = f;\n"
    "    install();\n"
    "    return f(input, init);\n"
    "  };\n"
    "})();\n";

char *skd__sandbox_trust_text(const char *ca_pem)
{
    static const char sys_bundle[] = "/etc/ssl/certs/ca-certificates.crt";
    size_t cap = 768 * 1024, len = 0;
    char *text = malloc(cap + strlen(ca_pem) + 2);
    if (!text)
        return NULL;
    int fd = open(sys_bundle, O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && len < cap) {
        ssize_t n = read(fd, text + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    if (fd >= 0)
        close(fd);
    if (len == cap) /* a system bundle this large is not ours to cut */
        len = 0;
    if (len && text[len - 1] != '\n')
        text[len++] = '\n';
    memcpy(text + len, ca_pem, strlen(ca_pem) + 1);
    return text;
}
