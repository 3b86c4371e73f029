// Net TX watchdog timeouts and transmit failures per interface.
// net_dev_xmit fires for every packet: the program returns after one compare
// unless the driver returned non-zero, so the per-packet cost is the dispatch.
// Attach points: netdev.toml.

#define NETDEV_TX_BUSY 0x10

struct net_key {
    char name[16];
};

struct net_val {
    u64 tx_errors;    // negative errno or NET_XMIT_DROP from the driver/qdisc path
    u64 tx_busy;      // NETDEV_TX_BUSY: driver queue full, requeued
    u64 tx_timeouts;  // TX watchdog fired: the NIC stopped completing
};

BPF_HASH(net_stats, struct net_key, struct net_val, 256);

static __always_inline struct net_val *net_row(struct net_key *k)
{
    struct net_val zero = {};
    return net_stats.lookup_or_try_init(k, &zero);
}

int net_on_xmit(struct tracepoint__net__net_dev_xmit *args)
{
    int rc = args->rc;
    if (rc == 0)
        return 0;
    struct net_key k = {};
    TP_DATA_LOC_READ_STR(k.name, name, sizeof(k.name));
    struct net_val *v = net_row(&k);
    if (!v)
        return 0;
    count_add(rc == NETDEV_TX_BUSY ? &v->tx_busy : &v->tx_errors, 1);
    return 0;
}

int net_on_timeout(struct tracepoint__net__net_dev_xmit_timeout *args)
{
    struct net_key k = {};
    TP_DATA_LOC_READ_STR(k.name, name, sizeof(k.name));
    struct net_val *v = net_row(&k);
    if (v)
        count_add(&v->tx_timeouts, 1);
    return 0;
}
