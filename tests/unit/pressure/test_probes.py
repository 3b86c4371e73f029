"""The probe descriptors beside each .c, and the loader's reading of them."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pytest

from agent.pressure.bpfmaps import DescError, ctype_from_desc
from agent.pressure.config import ALL_PROBES
from agent.pressure.probes import PROBES, ProbeSpecError, default_probes_dir, load_spec

PROBES_DIR = default_probes_dir()


@pytest.mark.parametrize("name", ALL_PROBES)
def test_each_descriptor_matches_its_c_source(name):
    spec = PROBES[name]
    src = (PROBES_DIR / spec.source).read_text()
    for p in spec.points:
        assert re.search(rf"\bint {p.program}\(", src), f"{p.program} not defined in {spec.source}"
        if p.optional:
            assert p.macro in src, f"{spec.source} never tests {p.macro}"
    for m in spec.maps:
        assert re.search(rf"BPF_[A-Z_]+\({m},", src), f"map {m} not declared in {spec.source}"
    for const in spec.constants:
        # written once: in the descriptor, used (never defined) in the C source
        assert re.search(rf"\b{const}\b", src), f"{spec.source} does not use {const}"
        assert not re.search(rf"#define\s+{const}\b", src), f"{const} is defined again in {spec.source}"
    for m, key in spec.seeds:
        assert m in spec.maps and key in spec.constants
    for macro in spec.btf_offsets:
        assert macro in src, f"{spec.source} does not use {macro}"


def test_common_header_is_used_instead_of_open_coded_lookup_or_init():
    for name in ALL_PROBES:
        src = (PROBES_DIR / PROBES[name].source).read_text()
        # the old open-coded pattern: lookup, insert a zero row, look up again
        assert not re.search(r"\.insert\(", src), f"{name}: use lookup_or_try_init"


def test_the_run_queue_probe_is_btf_only():
    spec = PROBES["runqlat"]
    assert {p.kind for p in spec.points} == {"tp_btf"}
    sw = next(p for p in spec.points if p.event == "sched_switch")
    assert sw.args == ("_Bool", "struct task_struct *", "struct task_struct *", "unsigned int")
    assert spec.constants["RQ_OVERFLOW_CGID"] == 2**64 - 1
    assert spec.attach == tuple((p.point, p.program) for p in spec.points)  # all required


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "demo.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('maps = []\n[[attach]]\npoint = "a:b"\nprogram = "f"\n', "missing key 'source'"),
        ('source = "x.c"\n', "no \\[\\[attach\\]\\] points"),
        ('source = "x.c"\n[[attach]]\nkind = "kprobe"\npoint = "a:b"\nprogram = "f"\n', "kind 'kprobe'"),
        ('source = "x.c"\n[[attach]]\npoint = "ab"\nprogram = "f"\n', "not category:event"),
        ('source = "x.c"\n[[attach]]\npoint = "a:b"\nprogram = "f"\noptional = true\n', "needs a macro"),
        ('source = "x.c"\n[[attach]]\nkind = "tp_btf"\npoint = "a:b"\nprogram = "f"\n', "needs its args"),
        ('source = "x.c"\n[constants]\nX = "1"\n[[attach]]\npoint = "a:b"\nprogram = "f"\n', "integers"),
        ('source = "x.c"\n[[seed]]\nmap = "m"\nkey = "K"\n[[attach]]\npoint = "a:b"\nprogram = "f"\n',
         "seed key 'K'"),
        ('source = "x.c"\n[[attach]\n', "demo.toml"),
    ],
)
def test_malformed_descriptors_are_refused_naming_the_file(tmp_path, text, match):
    with pytest.raises(ProbeSpecError, match=match) as e:
        load_spec(_write(tmp_path, text))
    assert "demo.toml" in str(e.value)


def test_missing_descriptor_is_a_clear_error(tmp_path):
    with pytest.raises(ProbeSpecError, match="cannot read probe descriptor"):
        load_spec(tmp_path / "absent.toml")


def test_bcc_type_descriptions_become_c_layouts():
    hist = ctype_from_desc(["log2_hist", [["slots", "unsigned long long", [32]], ["sum_ns", "unsigned long long"]],
                            "struct_packed"])
    assert ctypes.sizeof(hist) == 33 * 8
    h = hist()
    h.slots[3] = 7
    assert hist.from_buffer_copy(bytes(h)).slots[3] == 7
    key = ctype_from_desc(["net_key", [["name", "char", [16]]], "struct_packed"])
    assert ctypes.sizeof(key) == 16 and key(b"eth0").name == b"eth0"
    grid = ctype_from_desc(["g", [["m", "int", [2, 3]]], "struct"])
    assert ctypes.sizeof(grid) == 24 and len(grid().m) == 2 and len(grid().m[0]) == 3
    assert ctype_from_desc("unsigned int") is ctypes.c_uint
    with pytest.raises(DescError, match="unknown scalar"):
        ctype_from_desc("__int256")
    with pytest.raises(DescError):
        ctype_from_desc({"not": "a desc"})
