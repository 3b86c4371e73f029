// DMA faults reported by the IOMMU, per device (PCI address or device name).

struct iommu_key {
    char device[32];
};

BPF_HASH(iommu_faults, struct iommu_key, u64, 256);

int iommu_on_fault(struct tracepoint__iommu__io_page_fault *args)
{
    struct iommu_key k = {};
    TP_DATA_LOC_READ_STR(k.device, device, sizeof(k.device));
    u64 *c = iommu_faults.lookup(&k);
    if (c) {
        __sync_fetch_and_add(c, 1);
    } else {
        u64 one = 1;
        iommu_faults.insert(&k, &one);
    }
    return 0;
}
