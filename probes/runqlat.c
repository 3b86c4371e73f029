// Run-queue delay per task, rolled up per cgroup (one hierarchy: v2 or one v1 controller).
//
// Tracepoint format fields only, plus a task -> cgroup id walk through offsets the
// loader reads from the running kernel's BTF (OFF_* macros); the kernel headers
// on the build machine may not match the running kernel, so no struct is
// dereferenced through them.
//
// The cgroup id is read only where `current` is the task itself: at sched_switch
// (current == prev, cached in the task slot) and at sched_wakeup_new (current ==
// parent, which the child inherits). Delay is attributed at switch-in to the id
// cached in next's slot. Hot path: hash lookups and in-place writes; a map update
// happens only the first time a task or a cgroup is seen.

#include <uapi/linux/ptrace.h>

#ifndef RQ_MAX_TASKS
#define RQ_MAX_TASKS 32768
#endif
#ifndef RQ_MAX_CGROUPS
#define RQ_MAX_CGROUPS 4096
#endif
#define RQ_SLOTS 32
#define RQ_OVERFLOW_CGID 0xffffffffffffffffULL

struct rq_task {
    u64 ts;    // ns when it became runnable; 0 while running or sleeping
    u64 cgid;  // cgroup id as of its last switch-out (or its parent's at fork)
};

struct rq_cgroup {
    u64 slots[RQ_SLOTS];  // log2(delay in us) histogram
    u64 sum_ns;
};

BPF_HASH(rq_tasks, u32, struct rq_task, RQ_MAX_TASKS);
BPF_HASH(rq_cgroups, u64, struct rq_cgroup, RQ_MAX_CGROUPS);
// 0: task slots unavailable (map full), 1: cgroup rows unavailable (folded into overflow)
BPF_PERCPU_ARRAY(rq_drops, u64, 2);

static __always_inline u64 rq_current_cgid(void)
{
    struct task_struct *t = (struct task_struct *)bpf_get_current_task();
    void *cset = 0, *cgrp = 0, *kn = 0;
    u64 id = 0;
    bpf_probe_read_kernel(&cset, sizeof(cset), (char *)t + OFF_TASK_CGROUPS);
    if (!cset)
        return 0;
#ifdef CGROUP_V2
    bpf_probe_read_kernel(&cgrp, sizeof(cgrp), (char *)cset + OFF_CSS_SET_DFL_CGRP);
#else
    void *css = 0;
    bpf_probe_read_kernel(&css, sizeof(css), (char *)cset + OFF_CSS_SET_SUBSYS + 8 * CGROUP_SUBSYS_ID);
    if (!css)
        return 0;
    bpf_probe_read_kernel(&cgrp, sizeof(cgrp), (char *)css + OFF_CSS_CGROUP);
#endif
    if (!cgrp)
        return 0;
    bpf_probe_read_kernel(&kn, sizeof(kn), (char *)cgrp + OFF_CGROUP_KN);
    if (!kn)
        return 0;
    bpf_probe_read_kernel(&id, sizeof(id), (char *)kn + OFF_KN_ID);
    return id;
}

static __always_inline void rq_drop(int which)
{
    u64 *c = rq_drops.lookup(&which);
    if (c)
        (*c)++;
}

// Stamp a task as runnable unless it already is (a wakeup of a queued task must
// not restart its wait).
static __always_inline void rq_stamp_wakeup(u32 pid, u64 cgid_if_new)
{
    if (!pid)
        return;
    struct rq_task *s = rq_tasks.lookup(&pid);
    if (s) {
        if (!s->ts)
            s->ts = bpf_ktime_get_ns();
        return;
    }
    struct rq_task fresh = {.ts = bpf_ktime_get_ns(), .cgid = cgid_if_new};
    if (rq_tasks.insert(&pid, &fresh))
        rq_drop(0);
}

int rq_on_wakeup(struct tracepoint__sched__sched_wakeup *args)
{
    rq_stamp_wakeup(args->pid, 0);
    return 0;
}

int rq_on_wakeup_new(struct tracepoint__sched__sched_wakeup_new *args)
{
    // current is the parent; the child starts in the parent's cgroup.
    rq_stamp_wakeup(args->pid, rq_current_cgid());
    return 0;
}

static __always_inline void rq_account(u64 cgid, u64 delta_ns)
{
    struct rq_cgroup *c = rq_cgroups.lookup(&cgid);
    if (!c) {
        struct rq_cgroup zero = {};
        rq_cgroups.insert(&cgid, &zero);
        c = rq_cgroups.lookup(&cgid);
        if (!c) {
            u64 over = RQ_OVERFLOW_CGID;
            rq_drop(1);
            c = rq_cgroups.lookup(&over);  // pre-inserted by the loader
            if (!c)
                return;
        }
    }
    u64 slot = bpf_log2l(delta_ns / 1000);
    if (slot >= RQ_SLOTS)
        slot = RQ_SLOTS - 1;
    __sync_fetch_and_add(&c->slots[slot], 1);
    __sync_fetch_and_add(&c->sum_ns, delta_ns);
}

int rq_on_switch(struct tracepoint__sched__sched_switch *args)
{
    u64 now = bpf_ktime_get_ns();
    u32 prev = args->prev_pid;
    if (prev) {
        // Runnable (preempted) prev: state 0 or TASK_REPORT_MAX ("R+").
        int runnable = (args->prev_state & 0xff) == 0;
        u64 cgid = rq_current_cgid();
        struct rq_task *s = rq_tasks.lookup(&prev);
        if (s) {
            s->ts = runnable ? now : 0;
            s->cgid = cgid;
        } else if (runnable) {
            struct rq_task fresh = {.ts = now, .cgid = cgid};
            if (rq_tasks.insert(&prev, &fresh))
                rq_drop(0);
        }
    }
    u32 next = args->next_pid;
    if (!next)
        return 0;
    struct rq_task *n = rq_tasks.lookup(&next);
    if (!n || !n->ts)
        return 0;
    u64 ts = n->ts;
    n->ts = 0;
    if (now > ts)
        rq_account(n->cgid, now - ts);
    return 0;
}

int rq_on_free(struct tracepoint__sched__sched_process_free *args)
{
    u32 pid = args->pid;
    rq_tasks.delete(&pid);
    return 0;
}
