/*
 * The egress proxy's certificate authority (DESIGN.md, "Secrets at
 * egress"): made on first use by the process that runs the proxy (the
 * unprivileged server, so it belongs to the service user) and kept in
 * DATA_DIR as egress-ca.pem and egress-ca.key (mode 0600). Leaf
 * certificates for the hosts a secret is bound to are minted from it on
 * demand (one EC P-256 key for all of them, a certificate per host, cached)
 * and presented to the sandbox, which trusts the CA through its trust
 * bundle. Upstream TLS is verified against the system's roots plus
 * SKILLS_EGRESS_UPSTREAM_CA_FILE.
 *
 * What it trusts: DATA_DIR and the configuration. The files are opened
 * without following links and the key must be mode 0600.
 */
#include "net/egress_int.h"
#include "skilld/log.h"
#include "skilld/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LEAF_CACHE 128
#define LEAF_DAYS 7
#define CA_YEARS 10

struct leaf {
    char host[SKD_EGRESS_HOST_MAX + 1];
    X509 *cert;
    time_t made;
};

struct skd__egress_tls {
    pthread_mutex_t mu;
    X509 *ca;
    EVP_PKEY *ca_key, *leaf_key;
    char *ca_pem;
    SSL_CTX *server, *client;
    struct leaf leaves[LEAF_CACHE];
    size_t nleaves, next;
};

static int ssl_err(skd_err *err, const char *what)
{
    char buf[200];
    unsigned long e = ERR_get_error();
    ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    return skd_err_set(err, SKD_EINTERNAL, "egress TLS: %s: %s", what, e ? buf : "failed");
}

static EVP_PKEY *new_key(void)
{
    return EVP_EC_gen("P-256");
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ex)
        return -1;
    int ok = X509_add_ext(cert, ex, -1);
    X509_EXTENSION_free(ex);
    return ok ? 0 : -1;
}

static int random_serial(X509 *cert)
{
    unsigned char b[16];
    if (skd_random(b, sizeof(b)))
        return -1;
    b[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(b, sizeof(b), NULL);
    int ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != NULL;
    BN_free(bn);
    return ok ? 0 : -1;
}

/* A certificate for cn with key, signed by issuer/ikey (itself when NULL). */
static X509 *make_cert(const char *cn, EVP_PKEY *key, X509 *issuer, EVP_PKEY *ikey, long days,
                       int ca)
{
    X509 *c = X509_new();
    if (!c)
        return NULL;
    X509_NAME *name = X509_get_subject_name(c);
    int bad =
        X509_set_version(c, 2) != 1 || random_serial(c) ||
        !X509_gmtime_adj(X509_getm_notBefore(c), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(c), days * 86400L) || X509_set_pubkey(c, key) != 1 ||
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                    0) ||
        (!ca && !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                            (const unsigned char *)"skilld egress", -1, -1, 0)) ||
        X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name) != 1;
    X509 *iss = issuer ? issuer : c;
    if (!bad && ca)
        bad = add_ext(c, iss, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
              add_ext(c, iss, NID_key_usage, "critical,keyCertSign,cRLSign") ||
              add_ext(c, iss, NID_subject_key_identifier, "hash");
    if (!bad && !ca) {
        char san[SKD_EGRESS_HOST_MAX + 8];
        snprintf(san, sizeof(san), "DNS:%s", cn);
        bad = add_ext(c, iss, NID_basic_constraints, "critical,CA:FALSE") ||
              add_ext(c, iss, NID_key_usage, "critical,digitalSignature") ||
              add_ext(c, iss, NID_ext_key_usage, "serverAuth") ||
              add_ext(c, iss, NID_subject_alt_name, san) ||
              add_ext(c, iss, NID_authority_key_identifier, "keyid:always");
    }
    if (bad || !X509_sign(c, ikey ? ikey : key, EVP_sha256())) {
        X509_free(c);
        return NULL;
    }
    return c;
}

static FILE *open_file(const char *path, int write, mode_t mode)
{
    int fd = write ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
                   : open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, write ? "w" : "r");
    if (!f)
        close(fd);
    return f;
}

/* Make the CA's key and certificate files. */
static int make_ca(const char *kpath, const char *cpath, skd_err *err)
{
    EVP_PKEY *k = new_key();
    char cn[128], host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(cn, sizeof(cn), "skilld egress CA (%s)", host);
    X509 *c = k ? make_cert(cn, k, NULL, NULL, CA_YEARS * 365L, 1) : NULL;
    FILE *kf = NULL, *cf = NULL;
    int rc = 0;
    if (!c) {
        rc = ssl_err(err, "cannot make the CA");
        goto out;
    }
    if (!(kf = open_file(kpath, 1, 0600)) ||
        !PEM_write_PrivateKey(kf, k, NULL, NULL, 0, NULL, NULL) || fflush(kf) ||
        fsync(fileno(kf))) {
        rc = skd_err_set(err, SKD_EIO, "cannot write %s: %s", kpath, strerror(errno));
        goto out;
    }
    if (!(cf = open_file(cpath, 1, 0644)) || !PEM_write_X509(cf, c) || fflush(cf) ||
        fsync(fileno(cf)))
        rc = skd_err_set(err, SKD_EIO, "cannot write %s: %s", cpath, strerror(errno));
out:
    if (kf)
        fclose(kf);
    if (cf)
        fclose(cf);
    if (rc) {
        unlink(kpath);
        unlink(cpath);
    }
    X509_free(c);
    EVP_PKEY_free(k);
    return rc;
}

static int load_ca(struct skd__egress_tls *t, const char *kpath, const char *cpath, skd_err *err)
{
    FILE *kf = open_file(kpath, 0, 0), *cf = open_file(cpath, 0, 0);
    struct stat st;
    int rc = 0;
    if (!kf || !cf) {
        rc = skd_err_set(err, SKD_EIO, "cannot open the egress CA in %s: %s", kpath,
                         strerror(errno));
        goto out;
    }
    if (fstat(fileno(kf), &st) || (st.st_mode & 077)) {
        rc = skd_err_set(err, SKD_ECONFIG, "the egress CA key %s must be mode 0600", kpath);
        goto out;
    }
    t->ca_key = PEM_read_PrivateKey(kf, NULL, NULL, NULL);
    t->ca = PEM_read_X509(cf, NULL, NULL, NULL);
    if (!t->ca_key || !t->ca || X509_check_private_key(t->ca, t->ca_key) != 1) {
        rc = ssl_err(err, "the CA files do not hold a certificate and its key");
        goto out;
    }
    BIO *b = BIO_new(BIO_s_mem());
    BUF_MEM *m = NULL;
    if (!b || !PEM_write_bio_X509(b, t->ca) || BIO_get_mem_ptr(b, &m) != 1 ||
        !(t->ca_pem = strndup(m->data, m->length)))
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    BIO_free(b);
out:
    if (kf)
        fclose(kf);
    if (cf)
        fclose(cf);
    return rc;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl, (void)arg;
    for (unsigned int i = 0; i < inlen;) {
        unsigned int l = in[i];
        if (i + 1 + l > inlen)
            break;
        if (l == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *outlen = 8;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + l;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

int skd__egress_tls_new(const skd_config *cfg, struct skd__egress_tls **out, skd_err *err)
{
    *out = NULL;
    struct skd__egress_tls *t = calloc(1, sizeof(*t));
    if (!t)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    char kpath[PATH_MAX], cpath[PATH_MAX];
    const char *dir = skd_config_str(cfg, "DATA_DIR");
    int rc = 0;
    if (snprintf(kpath, sizeof(kpath), "%s/egress-ca.key", dir) >= (int)sizeof(kpath) ||
        snprintf(cpath, sizeof(cpath), "%s/egress-ca.pem", dir) >= (int)sizeof(cpath)) {
        rc = skd_err_set(err, SKD_ECONFIG, "DATA_DIR is too long");
        goto fail;
    }
    if (access(kpath, F_OK) != 0 && errno == ENOENT && (rc = make_ca(kpath, cpath, err)) &&
        access(kpath, F_OK) != 0) /* another process may have made it first */
        goto fail;
    skd_err_clear(err);
    if ((rc = load_ca(t, kpath, cpath, err)))
        goto fail;
    if (!(t->leaf_key = new_key())) {
        rc = ssl_err(err, "cannot make the leaf key");
        goto fail;
    }
    static const unsigned char alpn[] = "\x08http/1.1";
    t->server = SSL_CTX_new(TLS_server_method());
    t->client = SSL_CTX_new(TLS_client_method());
    if (!t->server || !t->client || !SSL_CTX_set_min_proto_version(t->server, TLS1_2_VERSION) ||
        !SSL_CTX_set_min_proto_version(t->client, TLS1_2_VERSION) ||
        SSL_CTX_set_alpn_protos(t->client, alpn, sizeof(alpn) - 1) != 0 ||
        SSL_CTX_set_default_verify_paths(t->client) != 1) {
        rc = ssl_err(err, "cannot set up TLS");
        goto fail;
    }
    SSL_CTX_set_alpn_select_cb(t->server, alpn_select, NULL);
    SSL_CTX_set_verify(t->client, SSL_VERIFY_PEER, NULL);
    const char *extra = skd_config_str(cfg, "SKILLS_EGRESS_UPSTREAM_CA_FILE");
    if (*extra && SSL_CTX_load_verify_locations(t->client, extra, NULL) != 1) {
        ssl_err(err, "SKILLS_EGRESS_UPSTREAM_CA_FILE");
        rc = skd_err_set(err, SKD_ECONFIG, "SKILLS_EGRESS_UPSTREAM_CA_FILE %s: not a PEM file",
                         extra);
        goto fail;
    }
    *out = t;
    return 0;
fail:
    skd__egress_tls_free(t);
    return rc;
}

void skd__egress_tls_free(struct skd__egress_tls *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nleaves; i++)
        X509_free(t->leaves[i].cert);
    SSL_CTX_free(t->server);
    SSL_CTX_free(t->client);
    X509_free(t->ca);
    EVP_PKEY_free(t->ca_key);
    EVP_PKEY_free(t->leaf_key);
    free(t->ca_pem);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

const char *skd__egress_tls_ca_pem(const struct skd__egress_tls *t)
{
    return t->ca_pem;
}

/* The leaf certificate for host (a new reference), minted or cached. */
static X509 *leaf_for(struct skd__egress_tls *t, const char *host)
{
    time_t now = time(NULL);
    X509 *c = NULL;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->nleaves && !c; i++)
        if (strcmp(t->leaves[i].host, host) == 0 && now - t->leaves[i].made < 86400)
            c = t->leaves[i].cert;
    if (!c && (c = make_cert(host, t->leaf_key, t->ca, t->ca_key, LEAF_DAYS, 0))) {
        struct leaf *l = NULL;
        for (size_t i = 0; i < t->nleaves && !l; i++)
            if (strcmp(t->leaves[i].host, host) == 0)
                l = &t->leaves[i];
        if (!l && t->nleaves < LEAF_CACHE)
            l = &t->leaves[t->nleaves++];
        if (!l)
            l = &t->leaves[t->next++ % LEAF_CACHE];
        X509_free(l->cert);
        skd_strlcpy(l->host, host, sizeof(l->host));
        l->cert = c;
        l->made = now;
    }
    if (c)
        X509_up_ref(c);
    pthread_mutex_unlock(&t->mu);
    return c;
}

SSL *skd__egress_tls_accept_new(struct skd__egress_tls *t, const char *host, int fd)
{
    X509 *leaf = leaf_for(t, host);
    SSL *s = leaf ? SSL_new(t->server) : NULL;
    if (s && (SSL_use_certificate(s, leaf) != 1 || SSL_use_PrivateKey(s, t->leaf_key) != 1 ||
              SSL_set_fd(s, fd) != 1)) {
        SSL_free(s);
        s = NULL;
    }
    X509_free(leaf);
    return s;
}

SSL *skd__egress_tls_connect_new(struct skd__egress_tls *t, const char *host, int fd)
{
    SSL *s = SSL_new(t->client);
    if (s && (SSL_set_tlsext_host_name(s, host) != 1 || SSL_set1_host(s, host) != 1 ||
              SSL_set_fd(s, fd) != 1)) {
        SSL_free(s);
        s = NULL;
    }
    return s;
}
