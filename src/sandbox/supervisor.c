/*
 * The supervisor: one thread per runner that starts queued runs when a slot
 * is free (global cap, per-key cap, FIFO among the startable ones) and
 * watches every running sandbox through one epoll set: the process
 * descriptor (exit), the stdout/stderr pipes (output, capped per stream and
 * drained past the cap), the stdin pipe, the provider's status pipe (setup
 * failure) and a timerfd (deadline, then a short grace for the pipes after
 * the exit). No thread per run, no blocking call on a sandboxed process.
 *
 * Runs are spawned from this thread on purpose: PR_SET_PDEATHSIG fires when
 * the creating thread exits, and this thread lives as long as the runner.
 * Trust: everything read from the pipes is untrusted bytes, only counted and
 * copied up to the cap.
 */
#include "sandbox/runner_int.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* After the process exited, how long the pipes may stay open (a provider's
 * helper still flushing) before they are closed. */
#define GRACE_MS 300
#define READ_CHUNK 65536
#define READS_PER_EVENT 16

static void arm_timer(int fd, int64_t ms)
{
    struct itimerspec its = {0};
    if (ms < 1)
        ms = 1;
    its.it_value.tv_sec = ms / 1000;
    its.it_value.tv_nsec = (ms % 1000) * 1000000;
    timerfd_settime(fd, 0, &its, NULL);
}

static void unwatch(skd_runner *r, int *fd)
{
    if (*fd < 0)
        return;
    epoll_ctl(r->epfd, EPOLL_CTL_DEL, *fd, NULL);
    close(*fd);
    *fd = -1;
}

static int watch(skd_runner *r, struct run *run, enum watch_kind k, int fd, uint32_t events)
{
    run->w[k].run = run;
    run->w[k].kind = k;
    struct epoll_event ev = {.events = events, .data.ptr = &run->w[k]};
    return epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* Unlink run from the list; caller holds r->mu. */
static void unlink_locked(skd_runner *r, struct run *run)
{
    struct run **pp = &r->head, *prev = NULL;
    while (*pp && *pp != run) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = run->next;
    if (r->tail == run)
        r->tail = prev;
    run->next = NULL;
}

/* Hand the result to the caller and queue the run on r->dead, freed by
 * free_dead between epoll batches. The provider state is cleaned up first. */
static void complete(skd_runner *r, struct run *run, int error, const char *msg)
{
    skd_sandbox_result res;
    memset(&res, 0, sizeof(res));
    unwatch(r, &run->pidfd);
    unwatch(r, &run->out.fd);
    unwatch(r, &run->err.fd);
    unwatch(r, &run->in_fd);
    unwatch(r, &run->status_fd);
    unwatch(r, &run->timer_fd);
    if (run->egress) { /* closes the run's proxy socket and connections */
        res.egress = skd__egress_detach(r->egress, run->egress);
        run->egress = NULL;
    }
    run->oc.killed = run->kill_sent;
    run->prov->cleanup(run->pstate, &run->oc);
    run->pstate = NULL;
    memcpy(res.id, run->id, sizeof(res.id));
    skd_strlcpy(res.runtime, run->runtime_name, sizeof(res.runtime));
    if (!error && run->status_len) {
        error = SKD_ESANDBOX;
        msg = run->status_msg;
    }
    if (!error && run->oc.setup_error[0]) { /* a container engine never started it */
        error = SKD_ESANDBOX;
        msg = run->oc.setup_error;
    }
    res.error = error;
    if (msg)
        skd_strlcpy(res.message, msg, sizeof(res.message));
    res.exited = run->oc.exited && !error;
    res.exit_code = run->oc.exit_code;
    res.signal = error ? 0 : run->oc.signal;
    res.out_total = run->out.total;
    res.err_total = run->err.total;
    res.out = skd_buf_steal(&run->out.buf, &res.out_len);
    res.err = skd_buf_steal(&run->err.buf, &res.err_len);
    res.truncated = res.out_total > res.out_len || res.err_total > res.err_len;
    res.oom_killed = run->oc.oom_killed;
    res.killed = run->oc.killed || res.oom_killed;
    res.timed_out = run->timed_out;
    res.ws_checked = run->oc.ws_checked;
    res.ws_error = run->oc.ws_error;
    res.ws_bytes = run->oc.ws_bytes;
    res.ws_written = run->oc.ws_written;
    res.cpu_us = run->oc.cpu_us;
    res.mem_peak_bytes = run->oc.mem_peak;
    skd_strlcpy(res.ws_message, run->oc.ws_message, sizeof(res.ws_message));
    res.duration_ms = run->started ? (run->ended ? run->ended : skd_mono_ms()) - run->started : 0;
    pthread_mutex_lock(&r->mu);
    unlink_locked(r, run);
    if (run->state == RUN_QUEUED)
        r->queued--;
    else
        r->running--;
    if (run->state != RUN_QUEUED && run->background)
        r->running_bg--;
    pthread_mutex_unlock(&r->mu);
    skd_debug("sandbox %s done: exit=%d signal=%d killed=%d timedOut=%d oom=%d error=%d", run->id,
              res.exit_code, res.signal, res.killed, res.timed_out, res.oom_killed, error);
    run->done(run->done_arg, &res);
    /* Not freed here: the epoll batch being handled may still hold events
     * of this run (a sandbox that exited before its descriptors were
     * watched has all of them ready at once, in the order they were
     * added), and each points into it. */
    run->completed = 1;
    run->dead_next = r->dead;
    r->dead = run;
}

static void free_dead(skd_runner *r)
{
    while (r->dead) {
        struct run *d = r->dead;
        r->dead = d->dead_next;
        skd__run_free(d);
    }
}

static void maybe_complete(skd_runner *r, struct run *run)
{
    if (run->reaped && run->out.fd < 0 && run->err.fd < 0 && run->status_fd < 0)
        complete(r, run, 0, NULL);
}

static void send_kill(struct run *run)
{
    if (run->kill_sent)
        return;
    run->kill_sent = 1;
    run->prov->kill(run->pstate);
}

int skd__runner_egress_attach(skd_runner *r, const char *key, const char *allow, const char *deny,
                              const skd_secret *secrets, size_t nsecrets, int egress_fd,
                              skd_egress_run **out, skd_err *err)
{
    *out = NULL;
    skd_egress_policy p;
    char key_hosts[4096];
    skd__egress_policy_defaults(&p, r->cfg);
    const char *kh = skd__egress_key_hosts(r->cfg, key, key_hosts, sizeof(key_hosts));
    if (skd__egress_policy_narrow(&p, kh, NULL, err) ||
        skd__egress_policy_narrow(&p, allow, deny, err)) {
        close(egress_fd);
        return SKD_ESANDBOX;
    }
    p.secrets = secrets;
    p.nsecrets = nsecrets;
    return skd__egress_attach(r->egress, egress_fd, &p, out, err);
}

/* networkEnabled: serve the socket the provider placed on the sandbox's
 * loopback (steals egress_fd). Fail closed: without it the run must not
 * go on. */
static int attach_egress(skd_runner *r, struct run *run, int egress_fd, skd_err *err)
{
    if (egress_fd < 0)
        return skd_err_set(err, SKD_ESANDBOX,
                           "%s sandbox: networkEnabled, but no egress proxy socket was placed",
                           run->prov->name);
    return skd__runner_egress_attach(r, run->key, run->egress_allow, run->egress_deny, run->secrets,
                                     run->nsecrets, egress_fd, &run->egress, err);
}

/* Spawn a run that left the queue (state RUN_STARTING, slot counted). */
static void start_run(skd_runner *r, struct run *run)
{
    skd__spawned sp = SKD__SPAWNED_NONE;
    skd_err e = {0};
    run->started = skd_mono_ms();
    if (run->cfg.network_enabled && !skd__runner_egress(r, &e)) {
        complete(r, run, SKD_ESANDBOX, skd_err_msg(&e));
        return;
    }
    if (run->prov->spawn(run->pstate, &sp, &e) != 0) {
        complete(r, run, e.code ? e.code : SKD_ESANDBOX, skd_err_msg(&e));
        return;
    }
    run->pidfd = sp.pidfd;
    run->in_fd = sp.stdin_fd;
    run->out.fd = sp.stdout_fd;
    run->err.fd = sp.stderr_fd;
    run->status_fd = sp.status_fd;
    int egress_bad = 0;
    /* An exec into a live sandbox goes out through its sandbox's proxy,
     * attached for the sandbox's life (live.c). */
    if (run->cfg.network_enabled && !run->live)
        egress_bad = attach_egress(r, run, sp.egress_fd, &e) != 0;
    else if (sp.egress_fd >= 0)
        close(sp.egress_fd);
    /* A background process of a live sandbox has no timeout: it ends with
     * its sandbox (or when it is killed). */
    run->timer_fd =
        run->background ? -1 : timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    int bad = (!run->background && run->timer_fd < 0) || egress_bad;
    if (!bad && !run->background) {
        arm_timer(run->timer_fd, run->cfg.timeout_ms);
        bad |= watch(r, run, W_TIMER, run->timer_fd, EPOLLIN);
    }
    bad |= watch(r, run, W_PID, run->pidfd, EPOLLIN);
    bad |= watch(r, run, W_OUT, run->out.fd, EPOLLIN);
    bad |= watch(r, run, W_ERR, run->err.fd, EPOLLIN);
    if (run->status_fd >= 0)
        bad |= watch(r, run, W_STATUS, run->status_fd, EPOLLIN);
    if (run->in_fd >= 0 && run->on_stdin) {
        run->on_stdin(run->output_arg, run->in_fd); /* it owns the descriptor now */
        run->in_fd = -1;
    } else if (run->in_fd >= 0 && run->in_len > 0)
        bad |= watch(r, run, W_IN, run->in_fd, EPOLLOUT);
    else if (run->in_fd >= 0) {
        close(run->in_fd);
        run->in_fd = -1;
    }
    pthread_mutex_lock(&r->mu);
    run->state = RUN_RUNNING;
    pthread_mutex_unlock(&r->mu);
    if (bad) {
        /* Without a watch the run could never be supervised: kill it and
         * wait for the exit synchronously (SIGKILL is prompt). */
        send_kill(run);
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        waitid((idtype_t)P_PIDFD, (id_t)run->pidfd, &si, WEXITED);
        run->reaped = 1;
        complete(r, run, SKD_ESANDBOX,
                 egress_bad ? skd_err_msg(&e) : "the supervisor could not watch the sandbox");
    }
}

static void read_stream(skd_runner *r, struct run *run, struct stream *s)
{
    char buf[READ_CHUNK];
    for (int i = 0; i < READS_PER_EVENT; i++) {
        ssize_t n = read(s->fd, buf, sizeof(buf));
        if (n > 0) {
            if (run->on_output)
                run->on_output(run->output_arg, s == &run->out ? 1 : 2, buf, (size_t)n);
            s->total += (uint64_t)n;
            size_t room = s->buf.max - s->buf.len;
            size_t k = (size_t)n < room ? (size_t)n : room;
            if (k)
                skd_buf_append(&s->buf, buf, k); /* ENOMEM: counted, not kept */
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        unwatch(r, &s->fd); /* EOF or error */
        return;
    }
}

static void write_stdin(skd_runner *r, struct run *run)
{
    while (run->in_off < run->in_len) {
        ssize_t n = write(run->in_fd, run->in + run->in_off, run->in_len - run->in_off);
        if (n > 0) {
            run->in_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n < 0 && errno == EPIPE) {
            /* The command closed its stdin. SIGPIPE is blocked in this
             * thread; consume the pending one. */
            sigset_t set;
            struct timespec zero = {0, 0};
            sigemptyset(&set);
            sigaddset(&set, SIGPIPE);
            sigtimedwait(&set, NULL, &zero);
        }
        break;
    }
    unwatch(r, &run->in_fd);
}

static void read_status(skd_runner *r, struct run *run)
{
    size_t room = sizeof(run->status_msg) - 1 - run->status_len;
    ssize_t n = read(run->status_fd, run->status_msg + run->status_len, room);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0) {
        run->status_len += (size_t)n;
        run->status_msg[run->status_len] = '\0';
        if (run->status_len < sizeof(run->status_msg) - 1)
            return;
    }
    unwatch(r, &run->status_fd);
}

static void reap(skd_runner *r, struct run *run)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid((idtype_t)P_PIDFD, (id_t)run->pidfd, &si, WEXITED | WNOHANG) != 0) {
        if (errno == EINTR || errno == EAGAIN)
            return;
        si.si_code = CLD_KILLED; /* ECHILD: someone else reaped it */
        si.si_status = SIGKILL;
        si.si_pid = 1;
    }
    if (si.si_pid == 0)
        return;
    run->ended = skd_mono_ms();
    run->reaped = 1;
    if (si.si_code == CLD_EXITED) {
        run->oc.exited = 1;
        run->oc.exit_code = si.si_status;
    } else {
        run->oc.signal = si.si_status;
    }
    unwatch(r, &run->pidfd);
    if (run->timer_fd >= 0)
        arm_timer(run->timer_fd, GRACE_MS);
}

static void on_timer(skd_runner *r, struct run *run)
{
    uint64_t ticks;
    if (read(run->timer_fd, &ticks, sizeof(ticks)) < 0 && errno == EAGAIN)
        return;
    if (!run->reaped) {
        run->timed_out = !run->kill_sent;
        send_kill(run);
        return;
    }
    /* Grace over: whatever still holds the pipes is not waited for. */
    send_kill(run);
    unwatch(r, &run->out.fd);
    unwatch(r, &run->err.fd);
    unwatch(r, &run->status_fd);
}

static void on_event(skd_runner *r, struct watch *w, uint32_t events)
{
    struct run *run = w->run;
    (void)events;
    if (run->completed) /* an event of this batch from before its completion */
        return;
    switch (w->kind) {
    case W_PID:
        reap(r, run);
        break;
    case W_OUT:
        read_stream(r, run, &run->out);
        break;
    case W_ERR:
        read_stream(r, run, &run->err);
        break;
    case W_IN:
        write_stdin(r, run);
        break;
    case W_STATUS:
        read_status(r, run);
        break;
    case W_TIMER:
        on_timer(r, run);
        break;
    default:
        break;
    }
    maybe_complete(r, run);
}

static int key_active_locked(skd_runner *r, const char *key)
{
    int n = 0;
    for (struct run *run = r->head; run; run = run->next)
        if (run->state != RUN_QUEUED && !run->background && strcmp(run->key, key) == 0)
            n++;
    return n;
}

/* Background processes of live sandboxes are bounded by their sandboxes'
 * pids limits and the caps on live sandboxes, not by the caps on runs. */
static struct run *next_startable_locked(skd_runner *r)
{
    if (r->running - r->running_bg >= r->max_conc)
        return NULL;
    for (struct run *run = r->head; run; run = run->next)
        if (run->state == RUN_QUEUED && !run->kill_req &&
            key_active_locked(r, run->key) < r->max_key)
            return run;
    return NULL;
}

/* Kill requests and starts; returns 1 when the supervisor should stop. */
static int service_queue(skd_runner *r)
{
    struct run *cancelled = NULL, *to_kill = NULL, *run, *next;
    pthread_mutex_lock(&r->mu);
    for (run = r->head; run; run = next) {
        next = run->next;
        if (!run->kill_req)
            continue;
        if (run->state == RUN_QUEUED) {
            unlink_locked(r, run);
            run->next = cancelled;
            cancelled = run;
        } else if (run->state == RUN_RUNNING && !run->kill_sent) {
            run->kill_next = to_kill;
            to_kill = run;
        }
    }
    while ((run = next_startable_locked(r)) != NULL) {
        run->state = RUN_STARTING;
        r->queued--;
        r->running++;
        r->running_bg += run->background;
        pthread_mutex_unlock(&r->mu);
        start_run(r, run);
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    /* Providers' kill may be slow (docker kill): never under the lock. Runs
     * are freed only by this thread, so the pointers stay valid. */
    for (run = to_kill; run; run = run->kill_next)
        send_kill(run);
    for (run = cancelled; run; run = next) {
        next = run->next;
        run->next = NULL; /* already unlinked; complete() counts it out of the queue */
        run->oc.killed = 1;
        run->kill_sent = 1;
        complete(r, run, SKD_ECANCELLED, "the run was killed before it started");
    }
    pthread_mutex_lock(&r->mu);
    int stop = r->stopping && !r->head;
    pthread_mutex_unlock(&r->mu);
    return stop;
}

static void *supervisor_main(void *arg)
{
    skd_runner *r = arg;
    struct epoll_event evs[64];
    /* The spawner is forked from this thread: its parent-death signal
     * follows the creating thread, and this one lives as long as the
     * runner. skd_runner_new waits for the outcome. */
    skd_err e = {0};
    int rc = skd__spawner_client_new(&r->spawner_conf, &r->spawner, &e);
    pthread_mutex_lock(&r->mu);
    r->spawner_ready = rc == 0 ? 1 : -1;
    r->spawner_err = e;
    pthread_cond_broadcast(&r->spawner_cv);
    pthread_mutex_unlock(&r->mu);
    if (rc != 0)
        return NULL;
    for (;;) {
        int stop = service_queue(r);
        /* runs it completed (cancelled while queued, failed starts): no
         * batch holds events of them, and an idle runner may wait long */
        free_dead(r);
        if (stop)
            break;
        int n = epoll_wait(r->epfd, evs, 64, -1);
        if (n < 0 && errno != EINTR) {
            skd_error("sandbox supervisor: epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (!evs[i].data.ptr) {
                uint64_t v;
                if (read(r->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                    skd_warn("sandbox supervisor: eventfd read: %s", strerror(errno));
                continue;
            }
            on_event(r, evs[i].data.ptr, evs[i].events);
        }
        free_dead(r);
    }
    free_dead(r);
    /* Its exit starts now, and is waited for here: the zygote's (and so
     * the spawner's) parent-death signal follows this thread, and a return
     * before it is gone would kill the spawner in the middle of its
     * cleanup, leaving its cgroups behind (seen with `skilld doctor`, whose
     * process lives on after its runner). */
    skd__spawner_client_close(r->spawner);
    skd__spawner_client_reap(r->spawner);
    return NULL;
}

int skd__supervisor_start(skd_runner *r, skd_err *err)
{
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    r->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->epfd < 0 || r->evfd < 0)
        return skd_err_set(err, SKD_ESANDBOX, "sandbox supervisor: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->evfd, &ev) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "sandbox supervisor: %s", strerror(errno));
    /* The supervisor takes no signals: SIGPIPE from a closed stdin becomes
     * EPIPE, and the server's handlers run elsewhere. Children reset it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&r->thread, NULL, supervisor_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return skd_err_set(err, SKD_ESANDBOX, "sandbox supervisor thread: %s", strerror(rc));
    r->thread_started = 1;
    pthread_mutex_lock(&r->mu);
    while (r->spawner_ready == 0)
        pthread_cond_wait(&r->spawner_cv, &r->mu);
    int ok = r->spawner_ready > 0;
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        *err = r->spawner_err;
        return err->code ? err->code : SKD_ESANDBOX;
    }
    return 0;
}
