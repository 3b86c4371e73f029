// Block I/O latency (log2 histogram per device and op) and errors per device.
//
// The classic block tracepoints carry no request pointer, so issue and
// completion are matched on (dev, op, sector). Flush pitfalls: a flush is issued
// with sector 0 but completes with sector (u64)-1, so requests without sectors
// are keyed at sector 0; each preflush write also completes an extra "WS 0+0"
// that was never issued, which simply finds no start stamp. The op is part of
// the key so that stray completion cannot match a pending flush.
// The issue stamp is the one map update per I/O (prealloc hash, no allocation);
// errors come from block_rq_error (only fires on error) when the kernel has it.
// Attach points: blockio.toml.

#ifndef BLK_MAX_INFLIGHT
#define BLK_MAX_INFLIGHT 16384
#endif

enum { BLK_OP_READ = 0, BLK_OP_WRITE = 1, BLK_OP_FLUSH = 2, BLK_OP_DISCARD = 3, BLK_OP_OTHER = 4 };

struct blk_start_key {
    u32 dev;
    u32 op;
    u64 sector;
};

struct blk_key {
    u32 dev;
    u32 op;
};

struct blk_err_key {
    u32 dev;
    u32 op;
    s32 error;
    u32 pad;
};

BPF_HASH(blk_start, struct blk_start_key, u64, BLK_MAX_INFLIGHT);
BPF_HASH(blk_lat, struct blk_key, struct log2_hist, 1024);
BPF_HASH(blk_errors, struct blk_err_key, u64, 1024);

static __always_inline u32 blk_op(const char *rwbs)
{
    char c = rwbs[0];
    if (c == 'F') {  // preflush marker, or a pure flush ("FF", "F")
        char d = rwbs[1];
        if (d == 'R' || d == 'W' || d == 'D' || d == 'N')
            c = d;
    }
    switch (c) {
    case 'R': return BLK_OP_READ;
    case 'W': return BLK_OP_WRITE;
    case 'F': return BLK_OP_FLUSH;
    case 'D': return BLK_OP_DISCARD;
    default: return BLK_OP_OTHER;
    }
}

int blk_on_issue(struct tracepoint__block__block_rq_issue *args)
{
    struct blk_start_key k = {};
    k.dev = args->dev;
    k.op = blk_op(args->rwbs);
    k.sector = args->nr_sector ? args->sector : 0;
    u64 ts = bpf_ktime_get_ns();
    blk_start.update(&k, &ts);
    return 0;
}

static __always_inline void blk_count_error(u32 dev, u32 op, int error)
{
    struct blk_err_key ek = {.dev = dev, .op = op, .error = error};
    u64 zero = 0;
    count_add(blk_errors.lookup_or_try_init(&ek, &zero), 1);
}

int blk_on_complete(struct tracepoint__block__block_rq_complete *args)
{
    struct blk_start_key k = {};
    k.dev = args->dev;
    k.op = blk_op(args->rwbs);
    k.sector = args->nr_sector ? args->sector : 0;
#ifndef BLK_HAVE_RQ_ERROR
    if (args->error)
        blk_count_error(k.dev, k.op, args->error);
#endif
    u64 *tsp = blk_start.lookup(&k);
    if (!tsp)
        return 0;
    u64 delta = bpf_ktime_get_ns() - *tsp;
    blk_start.delete(&k);
    struct blk_key lk = {.dev = k.dev, .op = k.op};
    struct log2_hist zero = {};
    struct log2_hist *l = blk_lat.lookup_or_try_init(&lk, &zero);
    if (l)
        log2_hist_add(l, delta);
    return 0;
}

#ifdef BLK_HAVE_RQ_ERROR
int blk_on_error(struct tracepoint__block__block_rq_error *args)
{
    blk_count_error(args->dev, blk_op(args->rwbs), args->error);
    return 0;
}
#endif
