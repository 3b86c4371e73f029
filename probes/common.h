// Helpers shared by the probes in this directory (included once, before them).
//
// bcc rewrites map calls only where they are written (not inside macros, and a
// map cannot be passed to a function), so lookup-or-init is bcc's own
// `map.lookup_or_try_init(&key, &zero)` and what is shared here is what follows
// it: counting, log2 histograms, and the string copy of a data_loc field.

#ifndef HWAGENT_PROBES_COMMON_H
#define HWAGENT_PROBES_COMMON_H

#define LOG2_SLOTS 32

// Latency histogram in log2(microseconds) slots plus the exact sum, the row
// type of every latency map (the reader turns it into agent.pressure.hist.Histogram).
struct log2_hist {
    u64 slots[LOG2_SLOTS];
    u64 sum_ns;
};

static __always_inline void log2_hist_add(struct log2_hist *h, u64 delta_ns)
{
    u64 slot = bpf_log2l(delta_ns / 1000);
    if (slot >= LOG2_SLOTS)
        slot = LOG2_SLOTS - 1;
    __sync_fetch_and_add(&h->slots[slot], 1);
    __sync_fetch_and_add(&h->sum_ns, delta_ns);
}

// Add to a counter that other CPUs may bump at the same time; NULL (map full) is a no-op.
static __always_inline void count_add(u64 *c, u64 n)
{
    if (c)
        __sync_fetch_and_add(c, n);
}

// Add to a per-CPU counter: no other CPU writes this copy, so no atomic is needed.
static __always_inline void percpu_count_add(u64 *c, u64 n)
{
    if (c)
        *c += n;
}

#endif
