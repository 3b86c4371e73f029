// Run-queue delay per task, rolled up per cgroup (one hierarchy: v2 or one v1 controller).
//
// The scheduler already measures every run-queue wait: sched_info.run_delay of
// each task (CONFIG_SCHED_INFO, what /proc/<tid>/schedstat reports) grows by
// the wait at each switch-in, and sched_info.pcount counts the switch-ins. So
// the probe needs one program, on sched_switch, looking only at `prev` (the
// current task, its cache lines hot): the growth of prev's run_delay since it
// was last switched out is the wait that preceded the run now ending, booked to
// the cgroup prev ran in. No clock read, no wakeup programs, and the sums are
// the kernel's own, to the nanosecond.
//
// BTF tracepoint (tp_btf): the program gets TP_PROTO's arguments (task
// pointers, not a formatted record with comm strings), and fields are plain
// loads the verifier checks against the running kernel's BTF. The kernel
// headers on the build machine may not match the running kernel, so no struct
// is dereferenced through them: the loader passes the offsets (OFF_* macros)
// from /sys/kernel/btf/vmlinux and checks the argument order.
//
// Per task state (the last run_delay and pcount seen) is in task-local storage:
// no pid-keyed hash to fill up, nothing to delete at exit. A task's first
// switch-out after attach only takes its baseline.
//
// Constants from runqlat.toml: RQ_OVERFLOW_CGID. From the config: RQ_MAX_CGROUPS.

#ifndef RQ_MAX_CGROUPS
#define RQ_MAX_CGROUPS 4096
#endif

struct rq_task {
    u64 run_delay;  // prev's sched_info.run_delay at its last switch-out
    u64 pcount;     // and its sched_info.pcount then; 0: no baseline yet
};

BPF_TASK_STORAGE(rq_tasks, struct rq_task);
BPF_HASH(rq_cgroups, u64, struct log2_hist, RQ_MAX_CGROUPS);
// 0: task slot unavailable (storage allocation failed), 1: cgroup row unavailable (folded into overflow)
BPF_PERCPU_ARRAY(rq_drops, u64, 2);

#define RQ_FIELD(type, p, off) (*(type *)((char *)(p) + (off)))

// ctx index of TP_PROTO's `prev` (runqlat.toml `args`, checked by the loader):
// sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
#define RQ_SWITCH_ARG_PREV 1

static __always_inline u64 rq_cgroup_id(void *task)
{
    void *cset = RQ_FIELD(void *, task, OFF_TASK_CGROUPS);
    if (!cset)
        return 0;
#ifdef CGROUP_V2
    void *cgrp = RQ_FIELD(void *, cset, OFF_CSS_SET_DFL_CGRP);
#else
    void *css = RQ_FIELD(void *, cset, OFF_CSS_SET_SUBSYS + 8 * CGROUP_SUBSYS_ID);
    if (!css)
        return 0;
    void *cgrp = RQ_FIELD(void *, css, OFF_CSS_CGROUP);
#endif
    if (!cgrp)
        return 0;
    void *kn = RQ_FIELD(void *, cgrp, OFF_CGROUP_KN);
    if (!kn)
        return 0;
    return RQ_FIELD(u64, kn, OFF_KN_ID);
}

static __always_inline void rq_drop(int which)
{
    percpu_count_add(rq_drops.lookup(&which), 1);
}

static __always_inline void rq_account(u64 cgid, u64 delta_ns)
{
    struct log2_hist zero = {};
    struct log2_hist *row = rq_cgroups.lookup_or_try_init(&cgid, &zero);
    if (!row) {
        u64 over = RQ_OVERFLOW_CGID;
        rq_drop(1);
        row = rq_cgroups.lookup(&over);  // seeded by the loader
        if (!row)
            return;
    }
    log2_hist_add(row, delta_ns);
}

int rq_on_switch(u64 *ctx)
{
    void *prev = (void *)ctx[RQ_SWITCH_ARG_PREV];
    // the idle tasks (pid 0) never wait in a run queue
    if (!RQ_FIELD(int, prev, OFF_TASK_PID))
        return 0;
    u64 run_delay = RQ_FIELD(u64, prev, OFF_TASK_RUN_DELAY);
    u64 pcount = RQ_FIELD(u64, prev, OFF_TASK_PCOUNT);
    struct rq_task zero = {};
    struct rq_task *s = rq_tasks.task_storage_get(prev, &zero, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (!s) {
        rq_drop(0);
        return 0;
    }
    u64 was = s->run_delay;
    int seen = s->pcount != 0;
    int ran = pcount != s->pcount;
    s->run_delay = run_delay;
    s->pcount = pcount;
    if (seen && ran && run_delay >= was)
        rq_account(rq_cgroup_id(prev), run_delay - was);
    return 0;
}
