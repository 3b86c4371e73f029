// Hard-IRQ counts and unhandled (IRQ_NONE) returns per IRQ number. A storm is a
// rate over a threshold, decided in userspace. Array indexed by IRQ: the hot
// path is one array lookup and an add, never a map update. Attach points: irq.toml.

#define IRQ_MAX 1024

struct irq_val {
    u64 count;
    u64 unhandled;
};

BPF_ARRAY(irq_stats, struct irq_val, IRQ_MAX);

int irq_on_exit(struct tracepoint__irq__irq_handler_exit *args)
{
    int irq = args->irq;
    if (irq < 0 || irq >= IRQ_MAX)
        return 0;
    struct irq_val *v = irq_stats.lookup(&irq);
    if (!v)
        return 0;
    count_add(&v->count, 1);
    if (args->ret == 0)
        count_add(&v->unhandled, 1);
    return 0;
}
