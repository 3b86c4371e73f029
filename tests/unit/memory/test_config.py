"""[memory]: reservations in the kubelet's --reserved-memory syntax, which must add up to the
system reservation; a bad entry names itself."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, loads
from agent.memory.config import MEMORY_SECTION

MB = 1 << 20


def test_reservations_parse_and_add_up() -> None:
    cfg = loads('[memory]\nreserved_memory = ["0:memory=1Gi", "1:memory=512Mi,hugepages-2Mi=4Mi"]\n'
                'system_reserved_memory = "1536Mi"\n[memory.system_reserved_hugepages]\n"hugepages-2Mi" = "64Mi"\n')
    m = cfg[MEMORY_SECTION]
    assert m.reserved() == {0: {"memory": 1024 * MB}, 1: {"memory": 512 * MB, "hugepages-2Mi": 4 * MB}}
    assert m.system_hugepages() == {"hugepages-2Mi": 64 * MB}


@pytest.mark.parametrize("body,words", [
    ('reserved_memory = ["0:memory=1Gi"]\nsystem_reserved_memory = "2Gi"\n',
     "add up to 1073741824 bytes (node 0: 1073741824) but system_reserved_memory is 2147483648"),
    ('reserved_memory = ["memory=1Gi"]\n', "write <numa node>:<resource>=<quantity>"),
    ('reserved_memory = ["0:cpu=1"]\n', "'cpu=1' is not memory=<q> or hugepages-<size>=<q>"),
    ('reserved_memory = ["0:memory=1Gi,memory=2Gi"]\n', "memory of node 0 given twice"),
    ('reserved_memory = ["0:memory=lots"]\n', "reserved_memory '0:memory=lots'"),
    ('[memory.system_reserved_hugepages]\n"memory" = "1Gi"\n', "is not a hugepages-<size> resource"),
    ('rescan_interval_s = 0\n', "rescan_interval_s must be > 0"),
])
def test_bad_reservations_are_config_errors(body: str, words: str) -> None:
    with pytest.raises(ConfigError) as e:
        loads("[memory]\n" + body)
    assert words in str(e.value)
