from tests.unit.devices.conftest import hwloc_root  # noqa: F401  (shared snapshot fixture)
