/*
 * hwagent-shim: the per-container supervisor that outlives the daemon.
 *
 * The daemon starts one shim per container run. The shim forks the workload;
 * the child joins the container's cgroups (writes its pid to each cgroup.procs
 * it is given), enters a private mount namespace when there are binds, changes
 * to the working directory and execs the command, so the workload's first
 * instruction already runs in its cgroups. The shim then copies the
 * workload's stdout/stderr into the container's log file (size-based
 * rotation), waits for it and writes the exit status atomically to
 * STATE/exit. It never talks to the daemon after the start handshake, so
 * kill -9 of the daemon leaves shim and workload running; a restarted daemon
 * re-attaches by reading STATE/pid and STATE/exit.
 *
 * The shim is a child subreaper (PR_SET_CHILD_SUBREAPER): a process the
 * workload orphans (a daemonised grandchild, `(cmd &)`) is re-parented to the
 * shim, not to PID 1, and the shim reaps it when it ends. When the workload
 * itself exits, what it left behind ends too (SIGKILL, as a container's
 * processes end with its init) and is reaped before the shim exits, so nothing
 * of a container becomes a zombie of a PID 1 that may never wait for it.
 *
 * With -u the workload runs as that user: the child joins its cgroups and makes
 * its mounts as root, then sets its supplementary groups, gid and uid (in that
 * order, so none is left behind) before chdir and exec. The shim itself stays
 * root (it writes STATE, which only root may enter, and ends what the workload
 * leaves behind) but opens and rotates the log with the workload's filesystem
 * uid and gid (setfsuid/setfsgid) and never through a link (O_NOFOLLOW): the
 * log directory is the user's, and a link the user plants there reaches only
 * what the user could write anyway.
 *
 * The shim runs as root on a user's behalf, so nothing of the user's reaches it
 * before the drop: its own environment is the daemon's fixed one (PATH and LANG,
 * set by the launcher; the dynamic loader of a root process would otherwise honour
 * LD_PRELOAD, GCONV_PATH, GLIBC_TUNABLES, ... of the job). The workload's
 * environment is data: "NAME=VALUE\0" entries read from ENV_FD (a memfd the
 * daemon wrote) at the start, applied only in the child's final exec, after the
 * drop to the user, so the command is looked up along the workload's PATH, as
 * the user. The shim keeps no descriptor of the daemon's (it closes every one but
 * the handshake and the environment at the start) and the workload starts with
 * 0, 1 and 2 only (the rest is closed right before exec).
 *
 * With -l the workload starts with exactly those resource limits (its submitter's, read by
 * the daemon at admission, as Slurm's PropagateResourceLimits=ALL; agent/runtime/rlimits.py), never
 * the daemon's own: the child sets them as root, before the drop to the user, since raising
 * a hard limit needs privilege and the job must get the submitter's hard values too.
 *
 * Usage (argv built by agent/runtime/launcher.py, the Python fallback
 * agent/runtime/shim.py takes the same):
 *   hwagent-shim STATE LOG LOG_MAX LOG_KEEP HANDSHAKE_FD CWD [-u UID GID GROUPS|-]
 *                [-l NAME=SOFT:HARD[,...]] [-e ENV_FD] [-p CGROUP_PROCS]... [-b SRC DST ro|rw]... -- ARGV...
 * NAME is prlimit(1)'s (nofile, nproc, core, ...), a value a number or "unlimited".
 * Without -e the workload starts with an empty environment.
 * Handshake (one line on HANDSHAKE_FD, then closed):
 *   "ok <shim_pid> <child_pid>\n"  or  "error <stage> <errno> <message>\n".
 * STATE/pid:  "<shim_pid> <child_pid>\n"
 * STATE/exit: "exited <code>\n" | "signaled <sig>\n" | "error <stage> <errno> <message>\n"
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/fsuid.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 16
#define MAX_BINDS 256
#define MAX_GROUPS 1024
/* the workload's environment, at most (execve itself refuses far less) */
#define MAX_ENV_BYTES (64 << 20)
/* after the workload exited: rounds of 100 ms spent ending what it left behind
 * (a process stuck in uninterruptible sleep must not keep the exit from the daemon) */
#define REAP_ROUNDS 100

struct bind { const char *src, *dst; int ro; };

extern char **environ;

static const char *state_dir;
/* the workload's user (-u); has_user 0: root, as before users */
static int has_user;
static uid_t run_uid;
static gid_t run_gid;
static gid_t run_groups[MAX_GROUPS];
static int run_ngroups;

/* the workload's resource limits (-l), set in the child before the drop to the user */
#define MAX_LIMITS 64
struct limit { const char *name; int resource; struct rlimit value; };
static const struct { const char *name; int resource; } limit_names[] = {
    {"cpu", RLIMIT_CPU}, {"fsize", RLIMIT_FSIZE}, {"data", RLIMIT_DATA}, {"stack", RLIMIT_STACK},
    {"core", RLIMIT_CORE}, {"rss", RLIMIT_RSS}, {"nproc", RLIMIT_NPROC}, {"nofile", RLIMIT_NOFILE},
    {"memlock", RLIMIT_MEMLOCK}, {"as", RLIMIT_AS}, {"locks", RLIMIT_LOCKS},
    {"sigpending", RLIMIT_SIGPENDING}, {"msgqueue", RLIMIT_MSGQUEUE}, {"nice", RLIMIT_NICE},
    {"rtprio", RLIMIT_RTPRIO}, {"rttime", RLIMIT_RTTIME},
};
static struct limit run_limits[MAX_LIMITS];
static int run_nlimits;

/* one value of -l: a decimal number or "unlimited"; -1 for anything else */
static int parse_rlim(const char *s, size_t n, rlim_t *out) {
    if (n == 9 && !strncmp(s, "unlimited", 9)) { *out = RLIM_INFINITY; return 0; }
    if (n == 0 || n > 20) return -1;
    unsigned long long v = 0;
    for (size_t k = 0; k < n; k++) {
        if (!isdigit((unsigned char)s[k])) return -1;
        if (v > (~0ULL - 9) / 10) return -1;
        v = v * 10 + (unsigned)(s[k] - '0');
    }
    if ((rlim_t)v == RLIM_INFINITY) return -1;
    *out = (rlim_t)v;
    return 0;
}

/* -l NAME=SOFT:HARD[,...] (agent/runtime/rlimits.py shim_arg); -1 on anything it does not name exactly */
static int parse_limits(char *s) {
    while (*s) {
        char *end = strchr(s, ','), *eq = strchr(s, '=');
        if (!end) end = s + strlen(s);
        if (!eq || eq > end || run_nlimits >= MAX_LIMITS) return -1;
        char *colon = memchr(eq, ':', (size_t)(end - eq));
        if (!colon) return -1;
        int found = -1;
        for (size_t k = 0; k < sizeof limit_names / sizeof limit_names[0]; k++)
            if ((size_t)(eq - s) == strlen(limit_names[k].name) && !strncmp(s, limit_names[k].name, (size_t)(eq - s)))
                found = (int)k;
        if (found < 0) return -1;
        struct limit *l = &run_limits[run_nlimits];
        if (parse_rlim(eq + 1, (size_t)(colon - eq - 1), &l->value.rlim_cur) < 0 ||
            parse_rlim(colon + 1, (size_t)(end - colon - 1), &l->value.rlim_max) < 0)
            return -1;
        if (l->value.rlim_max != RLIM_INFINITY &&
            (l->value.rlim_cur == RLIM_INFINITY || l->value.rlim_cur > l->value.rlim_max))
            return -1;
        l->name = limit_names[found].name;
        l->resource = limit_names[found].resource;
        run_nlimits++;
        if (*end && !end[1]) return -1; /* a trailing comma names nothing */
        s = *end ? end + 1 : end;
    }
    return 0;
}

static void child_fail(int errfd, const char *stage, int err, const char *what);

/* set one limit in the child; a shim without CAP_SYS_RESOURCE (a confined service, a container)
 * cannot raise a hard limit above its own: then the job gets the submitter's values clipped to
 * the shim's hard limit (never more than the submitter had), and shim.err says so, as
 * slurmstepd logs a limit it cannot propagate */
static void set_limit(const struct limit *l, int errfd) {
    if (setrlimit(l->resource, &l->value) == 0) return;
    struct rlimit cur, clip = l->value;
    if (errno != EPERM || getrlimit(l->resource, &cur) < 0) child_fail(errfd, "rlimit", errno, l->name);
    if (clip.rlim_max > cur.rlim_max) clip.rlim_max = cur.rlim_max; /* RLIM_INFINITY is the largest */
    if (clip.rlim_cur > clip.rlim_max) clip.rlim_cur = clip.rlim_max;
    if (setrlimit(l->resource, &clip) < 0) child_fail(errfd, "rlimit", errno, l->name);
    fprintf(stderr, "hwagent-shim: %s: cannot raise the hard limit (EPERM): kept at %llu:%llu\n", l->name,
            (unsigned long long)clip.rlim_cur, (unsigned long long)clip.rlim_max);
}

/* file access as the workload's user (the log) or as root again (STATE) */
static void fs_as_user(int on) {
    if (!has_user) return;
    setfsgid(on ? run_gid : 0);
    setfsuid(on ? run_uid : 0);
}

static int open_log(const char *log) {
    fs_as_user(1);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    fs_as_user(0);
    return fd;
}

static int parse_groups(const char *s) {
    if (!strcmp(s, "-")) return 0;
    char *end;
    while (*s) {
        if (run_ngroups >= MAX_GROUPS) return -1;
        unsigned long g = strtoul(s, &end, 10);
        if (end == s) return -1;
        run_groups[run_ngroups++] = (gid_t)g;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return 0;
}

static int write_all(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        buf += w; n -= (size_t)w;
    }
    return 0;
}

/* close every descriptor from 3 on but the `nkeep` in `keep` (ascending): close_range
 * where the kernel has it (5.9), else one by one from /proc/self/fd */
static void close_all_but(const int *keep, int nkeep) {
    unsigned lo = 3;
    int ok = 1;
    for (int k = 0; k < nkeep && ok; k++) {
        if (keep[k] < (int)lo) continue;
        if (keep[k] > (int)lo) ok = syscall(SYS_close_range, lo, (unsigned)keep[k] - 1, 0) == 0;
        lo = (unsigned)keep[k] + 1;
    }
    if (ok && syscall(SYS_close_range, lo, ~0U, 0) == 0) return;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return;
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        int fd = atoi(e->d_name), kept = fd < 3 || fd == self;
        for (int k = 0; k < nkeep; k++) kept |= fd == keep[k];
        if (!kept) close(fd);
    }
    closedir(d);
}

/* the workload's environment from fd: "NAME=VALUE\0" entries up to EOF, as a NULL-ended
 * array (its strings point into one buffer that lives until exec); NULL with errno set on
 * a read error, EINVAL for an entry with no name or no '=', E2BIG past MAX_ENV_BYTES */
static char **read_env(int fd) {
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_ENV_BYTES) { free(buf); errno = E2BIG; return NULL; }
            char *more = realloc(buf, cap * 2);
            if (!more) { free(buf); return NULL; }
            buf = more; cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0) { if (errno == EINTR) continue; int e = errno; free(buf); errno = e; return NULL; }
        if (n == 0) break;
        len += (size_t)n;
    }
    if (len > 0 && buf[len - 1] != 0) { free(buf); errno = EINVAL; return NULL; }
    size_t count = 0;
    for (size_t k = 0; k < len; k++) count += buf[k] == 0;
    char **env = calloc(count + 1, sizeof *env);
    if (!env) { free(buf); return NULL; }
    size_t at = 0;
    for (size_t k = 0; k < count; k++) {
        char *entry = buf + at, *eq = strchr(entry, '=');
        if (!eq || eq == entry) { free(env); free(buf); errno = EINVAL; return NULL; }
        env[k] = entry;
        at += strlen(entry) + 1;
    }
    return env;
}

/* write STATE/name atomically: temp file + rename (no fsync: what it describes
 * is processes, which do not survive a power cut either) */
static void write_state(const char *name, const char *text) {
    char tmp[4096], dst[4096];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", state_dir, name);
    snprintf(dst, sizeof dst, "%s/%s", state_dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    write_all(fd, text, strlen(text));
    close(fd);
    rename(tmp, dst);
}

/* the child reports why it could not exec through a CLOEXEC pipe */
static void child_fail(int errfd, const char *stage, int err, const char *what) {
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s %d %s: %s", stage, err, what, strerror(err));
    if (n > 0) write_all(errfd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    _exit(127);
}

static int ensure_target(const char *src, const char *dst) {
    struct stat st, dt;
    if (stat(src, &st) < 0) return -1;
    if (stat(dst, &dt) == 0) return 0;
    /* create parents */
    char path[4096];
    snprintf(path, sizeof path, "%s", dst);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') { *p = 0; mkdir(path, 0755); *p = '/'; }
    }
    if (S_ISDIR(st.st_mode)) return mkdir(dst, 0755) < 0 && errno != EEXIST ? -1 : 0;
    int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

static void rotate(const char *log, int keep) {
    char a[4096], b[4096];
    for (int i = keep - 1; i >= 1; i--) {
        snprintf(a, sizeof a, "%s.%d", log, i);
        snprintf(b, sizeof b, "%s.%d", log, i + 1);
        rename(a, b);
    }
    snprintf(b, sizeof b, "%s.1", log);
    if (keep >= 1) rename(log, b); else unlink(log);
}

/* <container>.times beside <container>.log: one record per chunk copied, its
 * offset in the log and when it was read (unix ns), so `hwagent logs
 * --timestamps/--since` can date lines while the log stays the workload's bytes
 * (agent/runtime/logtimes.py). It rotates with the log. */
static char times_path[4096];
static int times_fd = -1;

static void times_init(const char *log) {
    size_t n = strlen(log);
    if (n >= 4 && !strcmp(log + n - 4, ".log"))
        snprintf(times_path, sizeof times_path, "%.*s.times", (int)(n - 4), log);
    else
        snprintf(times_path, sizeof times_path, "%s.times", log);
    times_fd = open_log(times_path);
}

static void times_record(long long offset) {
    if (times_fd < 0) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t rec[2] = {(uint64_t)offset, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec};
    write_all(times_fd, (const char *)rec, sizeof rec);
}

/* append to the log; a file never grows past log_max: rotate first, cutting a
 * chunk at its last newline that fits (or at the limit for a longer line) */
static void log_write(const char *log, int *logfd, long long *size, long long log_max, int keep,
                      const char *buf, ssize_t n) {
    while (n > 0 && *logfd >= 0) {
        ssize_t take = n;
        if (log_max > 0) {
            long long room = log_max - *size;
            if (room <= 0 || (n > room && *size > 0 && !memchr(buf, '\n', (size_t)(room < n ? room : n)))) {
                close(*logfd);
                if (times_fd >= 0) close(times_fd);
                fs_as_user(1);
                rotate(log, keep);
                rotate(times_path, keep);
                fs_as_user(0);
                *logfd = open_log(log);
                times_fd = open_log(times_path);
                *size = 0;
                continue;
            }
            if (n > room) {
                take = (ssize_t)room;
                const char *nl = memrchr(buf, '\n', (size_t)take);
                if (nl) take = nl - buf + 1;
            }
        }
        times_record(*size);
        if (write_all(*logfd, buf, (size_t)take) < 0) return;
        *size += take;
        buf += take;
        n -= take;
    }
}

/* SIGKILL every process whose parent is the shim (other than none: the workload
 * has exited when this runs): the orphans re-parented here. Their own children
 * are re-parented here in turn when they die, and found by the next round. */
static void kill_children(void) {
    DIR *d = opendir("/proc");
    if (!d) return;
    pid_t self = getpid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) continue;
        buf[n] = 0;
        char *rp = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
        char state;
        int ppid;
        if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == self)
            kill((pid_t)atoi(e->d_name), SIGKILL);
    }
    closedir(d);
}

/* reap every child that has exited; the workload's status goes to *status.
 * Returns 1 once the shim has no child left at all. */
static int reap(pid_t child, int *status, int *exited) {
    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w == child) { *status = st; *exited = 1; continue; }
        if (w > 0) continue;
        return w < 0 && errno == ECHILD;
    }
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: hwagent-shim STATE LOG LOG_MAX LOG_KEEP HANDSHAKE_FD CWD [-u UID GID GROUPS] [-l LIMITS] [-p PROCS]... [-b SRC DST MODE]... -- ARGV...\n");
        return 2;
    }
    state_dir = argv[1];
    const char *log = argv[2];
    long long log_max = atoll(argv[3]);
    int log_keep = atoi(argv[4]);
    int hs = atoi(argv[5]);
    const char *cwd = argv[6];
    const char *procs[MAX_PROCS];
    struct bind binds[MAX_BINDS];
    int nprocs = 0, nbinds = 0, i = 7, envfd = -1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--")) { i++; break; }
        if (!strcmp(argv[i], "-p") && i + 1 < argc && nprocs < MAX_PROCS) { procs[nprocs++] = argv[++i]; continue; }
        if (!strcmp(argv[i], "-e") && i + 1 < argc) {
            char *e;
            envfd = (int)strtol(argv[i + 1], &e, 10);
            if (*e || !*argv[i + 1] || envfd < 3 || envfd == hs) {
                fprintf(stderr, "hwagent-shim: bad -e %s\n", argv[i + 1]);
                return 2;
            }
            i++; continue;
        }
        if (!strcmp(argv[i], "-u") && i + 3 < argc) {
            char *e1, *e2;
            run_uid = (uid_t)strtoul(argv[i + 1], &e1, 10);
            run_gid = (gid_t)strtoul(argv[i + 2], &e2, 10);
            if (*e1 || *e2 || !*argv[i + 1] || !*argv[i + 2] || parse_groups(argv[i + 3]) < 0) {
                fprintf(stderr, "hwagent-shim: bad -u %s %s %s\n", argv[i + 1], argv[i + 2], argv[i + 3]);
                return 2;
            }
            has_user = 1; i += 3; continue;
        }
        if (!strcmp(argv[i], "-l") && i + 1 < argc) {
            if (parse_limits(argv[i + 1]) < 0) {
                fprintf(stderr, "hwagent-shim: bad -l %s\n", argv[i + 1]);
                return 2;
            }
            i++; continue;
        }
        if (!strcmp(argv[i], "-b") && i + 3 < argc && nbinds < MAX_BINDS) {
            binds[nbinds].src = argv[i + 1]; binds[nbinds].dst = argv[i + 2];
            binds[nbinds].ro = !strcmp(argv[i + 3], "ro"); nbinds++; i += 3; continue;
        }
        fprintf(stderr, "hwagent-shim: bad argument %s\n", argv[i]);
        return 2;
    }
    if (i >= argc) { fprintf(stderr, "hwagent-shim: no command\n"); return 2; }
    char **cmd = argv + i;

    /* none of the daemon's descriptors (its eBPF programs and maps, its /dev/null, the pipes
     * of whoever started it) stays here: only 0-2, the handshake and the environment */
    int keep[2] = {hs, envfd};
    if (envfd >= 0 && envfd < hs) { keep[0] = envfd; keep[1] = hs; }
    close_all_but(keep, envfd >= 0 ? 2 : 1);
    char *no_env[] = {NULL};
    char **wenv = no_env;
    if (envfd >= 0) {
        wenv = read_env(envfd);
        int err = errno;
        close(envfd);
        if (!wenv) {
            char m[256]; snprintf(m, sizeof m, "error env %d the workload's environment: %s\n", err, strerror(err));
            write_state("exit", m); dprintf(hs, "%s", m); return 1;
        }
    }

    /* own session: the daemon's terminal or process group signals never reach us */
    setsid();
    /* best effort: without it (a kernel before 3.4) orphans go to PID 1 as before,
     * and the runtime's cgroup kill still ends them */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);

    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        char m[256]; snprintf(m, sizeof m, "error pipe %d %s\n", errno, strerror(errno));
        write_state("exit", m); dprintf(hs, "%s", m); return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        char m[256]; snprintf(m, sizeof m, "error fork %d %s\n", errno, strerror(errno));
        write_state("exit", m); dprintf(hs, "%s", m); return 1;
    }
    if (child == 0) {
        char pidbuf[32];
        int n = snprintf(pidbuf, sizeof pidbuf, "%d\n", (int)getpid());
        for (int k = 0; k < nprocs; k++) {
            int fd = open(procs[k], O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write_all(fd, pidbuf, (size_t)n) < 0) child_fail(err[1], "cgroup", errno, procs[k]);
            close(fd);
        }
        if (nbinds > 0) {
            if (unshare(CLONE_NEWNS) < 0) child_fail(err[1], "mount", errno, "unshare(CLONE_NEWNS)");
            if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) child_fail(err[1], "mount", errno, "make / private");
            for (int k = 0; k < nbinds; k++) {
                if (ensure_target(binds[k].src, binds[k].dst) < 0) child_fail(err[1], "mount", errno, binds[k].src);
                if (mount(binds[k].src, binds[k].dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                    child_fail(err[1], "mount", errno, binds[k].dst);
                if (binds[k].ro && mount(NULL, binds[k].dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
                    child_fail(err[1], "mount", errno, binds[k].dst);
            }
        }
        /* the submitter's limits, as root: raising a hard limit (the daemon's may be lower than
         * the submitter's) needs privilege the user will not have after the drop */
        for (int k = 0; k < run_nlimits; k++)
            set_limit(&run_limits[k], err[1]);
        if (has_user) {
            if (setgroups((size_t)run_ngroups, run_groups) < 0) child_fail(err[1], "user", errno, "setgroups");
            if (setgid(run_gid) < 0) child_fail(err[1], "user", errno, "setgid");
            if (setuid(run_uid) < 0) child_fail(err[1], "user", errno, "setuid");
        }
        if (cwd[0] && chdir(cwd) < 0) child_fail(err[1], "chdir", errno, cwd);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) { dup2(devnull, 0); if (devnull != 0) close(devnull); }
        dup2(out[1], 1);
        dup2(out[1], 2);
        /* a container starts with every signal at its default and none blocked, whatever
         * the daemon inherited: a daemon started from a script's background job has SIGINT
         * and SIGQUIT ignored, and an ignored signal survives exec (a shell cannot even trap it) */
        for (int s = 1; s < NSIG; s++)
            if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* the workload starts with 0, 1 and 2: the error pipe (close-on-exec) only stays to
         * report a failed exec */
        int keep_err[1] = {err[1]};
        close_all_but(keep_err, 1);
        /* its environment, only now (after the drop): execvp looks the command up along the
         * workload's PATH, with the user's permissions, and hands this environment on */
        environ = wenv;
        execvp(cmd[0], cmd);
        child_fail(err[1], "exec", errno, cmd[0]);
    }
    close(out[1]);
    close(err[1]);
    char ebuf[1100];
    ssize_t en, got = 0;
    while ((en = read(err[0], ebuf + got, sizeof ebuf - 1 - (size_t)got)) != 0) {
        if (en < 0) { if (errno == EINTR) continue; break; }
        got += en;
        if ((size_t)got >= sizeof ebuf - 1) break;
    }
    close(err[0]);
    char line[1300];
    if (got > 0) {
        ebuf[got] = 0;
        int status;
        waitpid(child, &status, 0);
        snprintf(line, sizeof line, "error %s\n", ebuf);
        write_state("exit", line);
        write_all(hs, line, strlen(line));
        return 0;
    }
    snprintf(line, sizeof line, "%d %d\n", (int)getpid(), (int)child);
    write_state("pid", line);
    snprintf(line, sizeof line, "ok %d %d\n", (int)getpid(), (int)child);
    write_all(hs, line, strlen(line));
    close(hs);

    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    int logfd = open_log(log);
    times_init(log);
    struct stat lst;
    long long size = (logfd >= 0 && fstat(logfd, &lst) == 0) ? (long long)lst.st_size : 0;
    char buf[65536];
    int status = 0, exited = 0, out_open = 1;
    while (!exited) {
        struct pollfd pf[2] = {{sfd, POLLIN, 0}, {out[0], POLLIN, 0}};
        int np = out_open ? 2 : 1;
        if (poll(pf, (nfds_t)np, -1) < 0) { if (errno == EINTR) continue; break; }
        if (out_open && (pf[1].revents & (POLLIN | POLLHUP))) {
            ssize_t n = read(out[0], buf, sizeof buf);
            if (n <= 0) out_open = 0;
            else log_write(log, &logfd, &size, log_max, log_keep, buf, n);
        }
        if (pf[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) != sizeof si) continue;
            if (si.ssi_signo != SIGCHLD) continue; /* SIGTERM/INT/HUP: the shim stays */
            reap(child, &status, &exited); /* the workload, and any orphan of it that ended */
        }
    }
    /* what the workload wrote before it exited; descendants holding the pipe are not waited for */
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    for (;;) {
        ssize_t n = read(out[0], buf, sizeof buf);
        if (n <= 0) break;
        log_write(log, &logfd, &size, log_max, log_keep, buf, n);
    }
    if (WIFEXITED(status)) snprintf(line, sizeof line, "exited %d\n", WEXITSTATUS(status));
    else snprintf(line, sizeof line, "signaled %d\n", WTERMSIG(status));
    write_state("exit", line);
    /* the workload is gone: end and reap what it left behind before the daemon sees the exit */
    for (int round = 0; round < REAP_ROUNDS && !reap(child, &status, &exited); round++) {
        kill_children();
        struct pollfd pf = {sfd, POLLIN, 0};
        struct signalfd_siginfo si;
        if (poll(&pf, 1, 100) > 0 && read(sfd, &si, sizeof si) < 0) continue; /* reap() looks again */
    }
    return 0;
}
