// DMA faults reported by the IOMMU, per device (PCI address or device name).
// Attach points: iommu.toml.

struct iommu_key {
    char device[32];
};

BPF_HASH(iommu_faults, struct iommu_key, u64, 256);

int iommu_on_fault(struct tracepoint__iommu__io_page_fault *args)
{
    struct iommu_key k = {};
    TP_DATA_LOC_READ_STR(k.device, device, sizeof(k.device));
    u64 zero = 0;
    count_add(iommu_faults.lookup_or_try_init(&k, &zero), 1);
    return 0;
}
