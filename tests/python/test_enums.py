"""The package's enums and constants are pnmem_c.h's: every name and value, both ways.

The header is parsed here (typedef enum blocks, #define constants, the documented reason strings),
so a value added to or renumbered in pnmem_c.h fails this test until the package follows."""
import re

import pnmem
import pytest

# C enum type -> (Python enum, the prefix its C names carry)
ENUMS = {
    "pnmem_level": (pnmem.Level, "PNMEM_LEVEL_"),
    "pnmem_admit_status": (pnmem.Status, "PNMEM_"),
    "pnmem_kv_format": (pnmem.KvFormat, "PNMEM_KV_"),
    "pnmem_gate_status": (pnmem.GateStatus, "PNMEM_GATE_"),
    "pnmem_cgroup_mode": (pnmem.CgroupMode, "PNMEM_CGROUP_"),
    "pnmem_psi_mode": (pnmem.PsiMode, "PNMEM_PSI_"),
    "pnmem_engine": (pnmem.Engine, "PNMEM_ENGINE_"),
    "pnmem_layer_kind": (pnmem.LayerKind, "PNMEM_LAYERS_"),
    "pnmem_zero_cost": (pnmem.ZeroCost, "PNMEM_ZERO_COST_"),
}


def strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def c_enums(header: str) -> dict:
    out = {}
    for name, body in re.findall(r"typedef enum (\w+) \{(.*?)\}", strip_comments(header), flags=re.S):
        values = {}
        for item in body.split(","):
            item = item.strip()
            if item:
                k, v = (x.strip() for x in item.split("="))
                values[k] = int(v, 0)
        out[name] = values
    return out


def c_defines(header: str) -> dict:
    out = {}
    for name, expr in re.findall(r"^#define (PNMEM_\w+) +(.+?)\s*(?:/\*.*)?$", header, flags=re.M):
        expr = re.sub(r"(\d+)u\b", r"\1", expr)
        if re.fullmatch(r"[\d\s()<+\-]+", expr):
            out[name] = eval(expr)  # digits, parentheses and shifts only
    return out


def test_every_c_enum_is_mirrored(header_text):
    assert set(c_enums(header_text)) == set(ENUMS), "a C enum with no Python mirror, or one that went away"


@pytest.mark.parametrize("c_name", sorted(ENUMS))
def test_enum_names_and_values_both_ways(header_text, c_name):
    py, prefix = ENUMS[c_name]
    c = c_enums(header_text)[c_name]
    from_c = {k[len(prefix):]: v for k, v in c.items()}
    from_py = {m.name: m.value for m in py}
    assert from_c == from_py


def test_sources_are_the_header_bits(header_text):
    d = c_defines(header_text)
    c = {k[len("PNMEM_SOURCE_"):]: v for k, v in d.items() if k.startswith("PNMEM_SOURCE_")}
    assert c == {m.name: m.value for m in pnmem.Source}
    assert d["PNMEM_SOURCES"] == pnmem.SOURCES == len(pnmem.Source)


def test_constants(header_text):
    d = c_defines(header_text)
    assert d["PNMEM_MAX_DIES"] == pnmem.MAX_DIES
    assert d["PNMEM_KV_FORMATS"] == pnmem.KV_FORMATS == len(pnmem.KvFormat)
    assert d["PNMEM_MAX_ACTIVATION_ANCHORS"] == pnmem.MAX_ACTIVATION_ANCHORS
    assert d["PNMEM_CGROUP_PATH_MAX"] == pnmem.CGROUP_PATH_MAX
    assert d["PNMEM_MAX_KV_WINDOWS"] == pnmem.MAX_KV_WINDOWS
    assert d["PNMEM_MAX_LAYER_GROUPS"] == pnmem.MAX_LAYER_GROUPS


def test_reasons_are_the_documented_strings(header_text):
    m = re.search(r"const char\* reason; /\*(.*?)\*/", header_text, flags=re.S)
    assert m, "pnmem_admit_answer.reason's comment not found"
    documented = re.findall(r'"(\w+)"', m.group(1))
    assert documented, "no reason strings in the comment"
    assert list(dict.fromkeys(documented)) == [r.value for r in pnmem.Reason]


def test_level_names_are_the_c_names():
    for level in pnmem.Level:
        assert pnmem.level_name(level) == level.name.lower() == str(level)
        assert pnmem.level_name(int(level)) == str(level)
        assert f"{level}" == str(level)
    for bad in (-1, 4, 2 ** 31 - 1, -(2 ** 31)):
        assert pnmem.level_name(bad) == "invalid"


def test_level_name_bad_arguments():
    for bad in (None, "ok", 1.0, 2 ** 31, -(2 ** 31) - 1):
        with pytest.raises(pnmem.Error):
            pnmem.level_name(bad)


def test_enum_str_is_the_c_spelling():
    assert str(pnmem.Status.FAIL_OPEN) == "fail_open"
    assert str(pnmem.KvFormat.Q8_0) == "q8_0"
    assert str(pnmem.GateStatus.QUEUE_FULL) == "queue_full"
    assert str(pnmem.Reason.HOST_BUDGET) == "host_budget" == pnmem.Reason.HOST_BUDGET
