/*
 * The outbound guard's policy over socket addresses: every forbidden range of
 * issue 4 (and the IPv6 forms that wrap IPv4), public examples that must stay
 * reachable, the administrator's exceptions and the URL checks.
 */
#include "net/pin.h"
#include "skilld/net.h"
#include "skilld/skilld.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>

/* The reason for text address a ("" when allowed, "?" when unparsable). */
static const char *judge(const char *a)
{
    struct sockaddr_in in4 = {0};
    struct sockaddr_in6 in6 = {0};
    const char *why;
    if (inet_pton(AF_INET, a, &in4.sin_addr) == 1) {
        in4.sin_family = AF_INET;
        why = skd_net_addr_forbidden((struct sockaddr *)&in4, sizeof(in4));
    } else if (inet_pton(AF_INET6, a, &in6.sin6_addr) == 1) {
        in6.sin6_family = AF_INET6;
        why = skd_net_addr_forbidden((struct sockaddr *)&in6, sizeof(in6));
    } else {
        return "?";
    }
    return why ? why : "";
}

static const struct {
    const char *addr;
    const char *why; /* NULL: allowed */
} table[] = {
    /* IPv4 */
    {"0.0.0.0", "unspecified"},
    {"0.1.2.3", "unspecified"},
    {"127.0.0.1", "loopback"},
    {"127.255.255.254", "loopback"},
    {"10.0.0.1", "private network"},
    {"10.255.255.255", "private network"},
    {"172.16.0.1", "private network"},
    {"172.31.255.255", "private network"},
    {"192.168.1.1", "private network"},
    {"100.64.0.1", "carrier-grade NAT"},
    {"100.127.255.255", "carrier-grade NAT"},
    {"169.254.0.1", "link-local"},
    {"169.254.169.254", "cloud metadata"},
    {"100.100.100.200", "cloud metadata"},
    {"224.0.0.1", "multicast"},
    {"239.255.255.250", "multicast"},
    {"255.255.255.255", "broadcast"},
    {"240.0.0.1", "reserved"},
    {"198.18.0.1", "benchmarking"},
    {"198.19.255.255", "benchmarking"},
    {"192.0.0.8", "IETF protocol assignments"},
    {"192.0.2.1", "documentation"},
    {"198.51.100.7", "documentation"},
    {"203.0.113.9", "documentation"},
    /* IPv4 edges that are public */
    {"93.184.216.34", NULL},
    {"8.8.8.8", NULL},
    {"1.1.1.1", NULL},
    {"172.15.255.255", NULL},
    {"172.32.0.0", NULL},
    {"100.63.255.255", NULL},
    {"100.128.0.0", NULL},
    {"198.17.255.255", NULL},
    {"198.20.0.0", NULL},
    {"11.0.0.1", NULL},
    {"223.255.255.255", NULL},
    {"192.0.1.1", NULL},
    {"169.253.255.255", NULL},
    /* IPv6 */
    {"::", "unspecified"},
    {"::1", "loopback"},
    {"fe80::1", "link-local"},
    {"febf:ffff::1", "link-local"},
    {"fec0::1", "site-local"},
    {"fc00::1", "unique local (private)"},
    {"fdff:ffff::1", "unique local (private)"},
    {"fd00:ec2::254", "cloud metadata"},
    {"ff02::1", "multicast"},
    {"ff05::2", "multicast"},
    {"2001:db8::1", "documentation"},
    {"2001:db8:ffff::1", "documentation"},
    {"2001::1", "Teredo tunnel"},
    {"100::1", "discard-only"},
    {"::2:0:0:1", "reserved"},
    {"4000::1", "reserved"},
    /* IPv6 forms wrapping IPv4 */
    {"::ffff:127.0.0.1", "loopback"},
    {"::ffff:7f00:1", "loopback"},
    {"::ffff:10.0.0.1", "private network"},
    {"::ffff:169.254.169.254", "cloud metadata"},
    {"::ffff:0.0.0.0", "unspecified"},
    {"::127.0.0.1", "loopback"},
    {"::192.168.0.1", "private network"},
    {"::169.254.169.254", "cloud metadata"},
    {"64:ff9b::7f00:1", "loopback"},
    {"64:ff9b::10.0.0.1", "private network"},
    {"64:ff9b::a9fe:a9fe", "cloud metadata"},
    {"64:ff9b:1::1", "local NAT64"},
    {"2002:7f00:1::", "loopback"},
    {"2002:a00:1::1", "private network"},
    {"2002:a9fe:a9fe::", "cloud metadata"},
    {"2002:c0a8:101::1", "private network"},
    {"2002::", "unspecified"},
    /* public IPv6, and wrappers of public IPv4 */
    {"2606:4700::1111", NULL},
    {"2001:4860:4860::8888", NULL},
    {"2a00:1450:4001::1", NULL},
    {"::ffff:93.184.216.34", NULL},
    {"64:ff9b::808:808", NULL},
    {"2002:5db8:d822::1", NULL},
};

TEST(address_table)
{
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        const char *got = judge(table[i].addr);
        const char *want = table[i].why ? table[i].why : "";
        if (strcmp(got, want) != 0)
            printf("# %s: want '%s' got '%s'\n", table[i].addr, want, got);
        CHECK_STR(got, want);
    }
}

TEST(other_families_refused)
{
    struct sockaddr sa = {.sa_family = AF_UNIX};
    CHECK(skd_net_addr_forbidden(&sa, sizeof(sa)) != NULL);
    CHECK(skd_net_addr_forbidden(NULL, 0) != NULL);
    struct sockaddr_in in4 = {.sin_family = AF_INET};
    inet_pton(AF_INET, "8.8.8.8", &in4.sin_addr);
    /* A truncated length is never trusted. */
    CHECK(skd_net_addr_forbidden((struct sockaddr *)&in4, 4) != NULL);
}

static skd_net_guard *guard_with(const char *name, const char *value)
{
    skd_config *cfg = skd_config_new();
    skd_net_guard *g = NULL;
    skd_err err = {0};
    if (name)
        skd_config_set(cfg, name, value, &err);
    skd_net_guard_new(cfg, &g, &err);
    skd_config_free(cfg);
    return g;
}

static int check(skd_net_guard *g, const char *host, const char *a)
{
    struct sockaddr_in in4 = {0};
    struct sockaddr_in6 in6 = {0};
    skd_err err = {0};
    if (inet_pton(AF_INET, a, &in4.sin_addr) == 1) {
        in4.sin_family = AF_INET;
        return skd_net_guard_check_addr(g, host, (struct sockaddr *)&in4, sizeof(in4), &err);
    }
    inet_pton(AF_INET6, a, &in6.sin6_addr);
    in6.sin6_family = AF_INET6;
    return skd_net_guard_check_addr(g, host, (struct sockaddr *)&in6, sizeof(in6), &err);
}

TEST(allow_cidrs)
{
    skd_net_guard *g =
        guard_with("SKILLS_OUTBOUND_ALLOW_CIDRS", "127.0.0.2/32, 10.1.0.0/16,fd12::/16");
    CHECK(g != NULL);
    uint64_t before = skd_net_blocked_total();
    CHECK_EQ_INT(check(g, "x", "127.0.0.2"), 0);
    CHECK_EQ_INT(check(g, "x", "::ffff:127.0.0.2"), 0);
    CHECK_EQ_INT(check(g, "x", "127.0.0.1"), SKD_EBLOCKED);
    CHECK_EQ_INT(check(g, "x", "127.0.0.3"), SKD_EBLOCKED);
    CHECK_EQ_INT(check(g, "x", "10.1.200.3"), 0);
    CHECK_EQ_INT(check(g, "x", "10.2.0.1"), SKD_EBLOCKED);
    CHECK_EQ_INT(check(g, "x", "fd12::5"), 0);
    CHECK_EQ_INT(check(g, "x", "fd13::5"), SKD_EBLOCKED);
    /* The NAT64 form of an allowed IPv4 address is another host. */
    CHECK_EQ_INT(check(g, "x", "64:ff9b::7f00:2"), SKD_EBLOCKED);
    CHECK_EQ_INT(check(g, "x", "8.8.8.8"), 0);
    CHECK_EQ_INT(skd_net_blocked_total() - before, 5);
    skd_net_guard_free(g);
}

TEST(bad_settings_refused)
{
    skd_config *cfg = skd_config_new();
    skd_net_guard *g = NULL;
    skd_err err = {0};
    static const struct {
        const char *name, *value;
    } bad[] = {{"SKILLS_OUTBOUND_ALLOW_CIDRS", "127.0.0.1/33"},
               {"SKILLS_OUTBOUND_ALLOW_CIDRS", "localhost"},
               {"SKILLS_OUTBOUND_ALLOW_CIDRS", "::1/129"},
               {"SKILLS_OUTBOUND_RESOLVE", "host:80"},
               {"SKILLS_OUTBOUND_RESOLVE", "host:0:1.2.3.4"},
               {"SKILLS_OUTBOUND_RESOLVE", "host:80:notanip"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        skd_config *c = skd_config_new();
        skd_config_set(c, bad[i].name, bad[i].value, &err);
        CHECK_EQ_INT(skd_net_guard_new(c, &g, &err), SKD_ECONFIG);
        CHECK(g == NULL);
        skd_config_free(c);
    }
    skd_config_set(cfg, "SKILLS_OUTBOUND_RESOLVE", "a.test:80:10.0.0.1,b.test:443:[::1]", &err);
    CHECK_EQ_INT(skd_net_guard_new(cfg, &g, &err), 0);
    size_t n = 0;
    const char *const *pins = skd_net_guard_pins(g, &n);
    CHECK_EQ_INT(n, 2);
    CHECK_STR(pins[1], "b.test:443:[::1]");
    skd_net_guard_free(g);
    skd_config_free(cfg);
}

/* The one parser of host:port:address pins, which the guard checks with
 * and the egress proxy connects by. */
TEST(pins_parsed)
{
    struct skd__pin p;
    CHECK_EQ_INT(skd__pin_parse("A.Test:8080:10.1.2.3", &p), 0);
    CHECK_STR(p.host, "a.test");
    CHECK_EQ_INT(p.port, 8080);
    const struct sockaddr_in *in = (const struct sockaddr_in *)&p.sa;
    CHECK(in->sin_family == AF_INET && ntohs(in->sin_port) == 8080 && p.salen == sizeof(*in));
    CHECK(in->sin_addr.s_addr == htonl(0x0a010203));
    CHECK_EQ_INT(skd__pin_parse("b.test:443:[::1]", &p), 0);
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&p.sa;
    CHECK(in6->sin6_family == AF_INET6 && ntohs(in6->sin6_port) == 443);
    CHECK(IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) && p.salen == sizeof(*in6));
    CHECK_EQ_INT(skd__pin_parse("c.test:80:::1", &p), 0); /* brackets are optional */
    char longhost[300];
    memset(longhost, 'h', 254);
    snprintf(longhost + 254, sizeof(longhost) - 254, ":80:1.2.3.4");
    static const char *const bad[] = {"",
                                      "host",
                                      "host:80",
                                      ":80:1.2.3.4",
                                      "h:0:1.2.3.4",
                                      "h:65536:1.2.3.4",
                                      "h:x:1.2.3.4",
                                      "h:80:",
                                      "h:80:[]",
                                      "h:80:nope",
                                      "h::1.2.3.4",
                                      "h:123456789:1.2.3.4"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_EQ_INT(skd__pin_parse(bad[i], &p), SKD_EINVAL);
    CHECK_EQ_INT(skd__pin_parse(longhost, &p), SKD_EINVAL);
    longhost[1] = ':';
    CHECK_EQ_INT(skd__pin_parse(longhost, &p), SKD_EINVAL); /* h:hhh...:80:... */
}

TEST(allow_and_deny_hosts)
{
    skd_net_guard *g = guard_with("SKILLS_OUTBOUND_ALLOW_HOSTS", "Intranet.Test.");
    skd_err err = {0};
    CHECK_EQ_INT(check(g, "intranet.test", "10.0.0.5"), 0);
    CHECK_EQ_INT(check(g, "INTRANET.test.", "10.0.0.5"), 0);
    CHECK_EQ_INT(check(g, "evil.intranet.test", "10.0.0.5"), SKD_EBLOCKED);
    CHECK_EQ_INT(check(g, "other.test", "10.0.0.5"), SKD_EBLOCKED);
    skd_net_guard_free(g);
    g = guard_with("SKILLS_OUTBOUND_DENY_HOSTS", "example.com, bad.test");
    CHECK_EQ_INT(skd_net_guard_check_host(g, "example.com", &err), SKD_EBLOCKED);
    CHECK_EQ_INT(skd_net_guard_check_host(g, "WWW.Example.COM.", &err), SKD_EBLOCKED);
    CHECK_EQ_INT(skd_net_guard_check_host(g, "notexample.com", &err), 0);
    CHECK_EQ_INT(skd_net_guard_check_host(g, "example.org", &err), 0);
    CHECK_EQ_INT(skd_net_guard_check_host(g, "bad.test", &err), SKD_EBLOCKED);
    skd_net_guard_free(g);
}

TEST(url_checks)
{
    skd_err err = {0};
    CHECK_EQ_INT(skd_net_url_check("http://example.com/", SKD_EINVAL, &err), 0);
    CHECK_EQ_INT(skd_net_url_check("HTTPS://example.com:8443/x?y#z", SKD_EINVAL, &err), 0);
    CHECK_EQ_INT(skd_net_url_check("file:///etc/passwd", SKD_EINVAL, &err), SKD_EINVAL);
    CHECK_EQ_INT(skd_net_url_check("gopher://127.0.0.1:70/", SKD_EBLOCKED, &err), SKD_EBLOCKED);
    CHECK_EQ_INT(skd_net_url_check("ftp://example.com/", SKD_EINVAL, &err), SKD_EINVAL);
    CHECK_EQ_INT(skd_net_url_check("http://good@127.0.0.1/", SKD_EINVAL, &err), SKD_EINVAL);
    CHECK(strstr(err.msg, "credentials") != NULL);
    CHECK_EQ_INT(skd_net_url_check("http://u:p@example.com/", SKD_EINVAL, &err), SKD_EINVAL);
    CHECK_EQ_INT(skd_net_url_check("http://:@example.com/", SKD_EINVAL, &err), SKD_EINVAL);
    CHECK_EQ_INT(skd_net_url_check("example.com", SKD_EINVAL, &err), SKD_EINVAL);
    CHECK_EQ_INT(skd_net_url_check("", SKD_EINVAL, &err), SKD_EINVAL);
    CHECK_EQ_INT(skd_net_url_check("http://", SKD_EINVAL, &err), SKD_EINVAL);
    char big[SKD_NET_URL_MAX + 32];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    memcpy(big, "http://a/", 9);
    CHECK_EQ_INT(skd_net_url_check(big, SKD_EINVAL, &err), SKD_EINVAL);
}

int main(void)
{
    TAP_BEGIN("test_net_guard");
    RUN(address_table);
    RUN(other_families_refused);
    RUN(allow_cidrs);
    RUN(bad_settings_refused);
    RUN(pins_parsed);
    RUN(allow_and_deny_hosts);
    RUN(url_checks);
    return TAP_END();
}
