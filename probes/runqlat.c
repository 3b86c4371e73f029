// Run-queue delay per task, rolled up per cgroup (one hierarchy: v2 or one v1 controller).
//
// BTF tracepoints (tp_btf): the programs get the tracepoint's own arguments
// (task pointers, not a formatted record), so the kernel copies no comm strings
// before calling us, and fields are plain loads the verifier checks against the
// running kernel's BTF. The kernel headers on the build machine may not match the
// running kernel, so no struct is dereferenced through them: the loader reads the
// offsets (OFF_* macros) and the argument order from /sys/kernel/btf/vmlinux.
//
// Per task state is one u64 in task-local storage (the time it became runnable;
// 0 while running or sleeping): no pid-keyed hash to fill up, no delete at exit
// (the kernel frees the storage with the task). Delay is attributed at switch-in
// to the cgroup `next` is in at that moment. Per switch: two task-storage
// accesses, one hash lookup of the cgroup row and two atomic adds.
//
// Constants from runqlat.toml: RQ_OVERFLOW_CGID. From the config: RQ_MAX_CGROUPS.

#ifndef RQ_MAX_CGROUPS
#define RQ_MAX_CGROUPS 4096
#endif

BPF_TASK_STORAGE(rq_tasks, u64);
BPF_HASH(rq_cgroups, u64, struct log2_hist, RQ_MAX_CGROUPS);
// 0: task slot unavailable (storage allocation failed), 1: cgroup row unavailable (folded into overflow)
BPF_PERCPU_ARRAY(rq_drops, u64, 2);

#define RQ_FIELD(type, p, off) (*(type *)((char *)(p) + (off)))

// ctx indices of the TP_PROTO arguments (runqlat.toml `args`, checked by the loader)
#define RQ_WAKEUP_ARG_TASK 0        // sched_wakeup(_new)(struct task_struct *p)
#define RQ_SWITCH_ARG_PREEMPT 0     // sched_switch(bool preempt,
#define RQ_SWITCH_ARG_PREV 1        //   struct task_struct *prev,
#define RQ_SWITCH_ARG_NEXT 2        //   struct task_struct *next,
#define RQ_SWITCH_ARG_PREV_STATE 3  //   unsigned int prev_state)

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

// Stamp a task as runnable unless it already is (a wakeup of a queued task must
// not restart its wait).
static __always_inline void rq_stamp_wakeup(void *task)
{
    u64 zero = 0;
    u64 *ts = rq_tasks.task_storage_get(task, &zero, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (!ts) {
        rq_drop(0);
        return;
    }
    if (!*ts)
        *ts = bpf_ktime_get_ns();
}

int rq_on_wakeup(u64 *ctx)
{
    rq_stamp_wakeup((void *)ctx[RQ_WAKEUP_ARG_TASK]);
    return 0;
}

int rq_on_wakeup_new(u64 *ctx)
{
    rq_stamp_wakeup((void *)ctx[RQ_WAKEUP_ARG_TASK]);
    return 0;
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
    u64 now = bpf_ktime_get_ns();
    void *prev = (void *)ctx[RQ_SWITCH_ARG_PREV];
    void *next = (void *)ctx[RQ_SWITCH_ARG_NEXT];
    // the idle tasks (pid 0) never wait in a run queue
    if (RQ_FIELD(int, prev, OFF_TASK_PID)) {
        // prev stays queued when preempted or still TASK_RUNNING (yield, cond_resched)
        int runnable = ctx[RQ_SWITCH_ARG_PREEMPT] & 1 || (u32)ctx[RQ_SWITCH_ARG_PREV_STATE] == 0;
        u64 zero = 0;
        u64 *ts = rq_tasks.task_storage_get(prev, &zero, runnable ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
        if (ts)
            *ts = runnable ? now : 0;
        else if (runnable)
            rq_drop(0);
    }
    if (!RQ_FIELD(int, next, OFF_TASK_PID))
        return 0;
    u64 *ts = rq_tasks.task_storage_get(next, 0, 0);
    if (!ts || !*ts)
        return 0;
    u64 since = *ts;
    *ts = 0;
    if (now > since)
        rq_account(rq_cgroup_id(next), now - since);
    return 0;
}
