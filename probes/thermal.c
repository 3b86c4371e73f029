// Thermal trip crossings per zone and trip type (0 active, 1 passive, 2 hot, 3 critical).
//
// The generated tracepoint struct would need the kernel's enum thermal_trip_type
// from headers that may not match; the record is declared here from the format
// file instead (offsets 8/12/16/20 in events/thermal/thermal_zone_trip/format).
// Attach points: thermal.toml.

struct thermal_trip_args {
    u64 common;
    int data_loc_thermal_zone;
    int id;
    int trip;
    u32 trip_type;
};

struct thermal_key {
    char zone[24];
    u32 trip_type;
    u32 pad;
};

BPF_HASH(thermal_trips, struct thermal_key, u64, 256);

int thermal_on_trip(void *ctx)
{
    struct thermal_trip_args *args = (struct thermal_trip_args *)ctx;
    struct thermal_key k = {};
    TP_DATA_LOC_READ_STR(k.zone, thermal_zone, sizeof(k.zone));
    k.trip_type = args->trip_type;
    u64 zero = 0;
    count_add(thermal_trips.lookup_or_try_init(&k, &zero), 1);
    return 0;
}
