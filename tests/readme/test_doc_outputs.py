"""The matcher readme_blocks compares a page's transcripts with (doc_outputs.py): what it lets through and what not.

Run by `meson test` (suite readme, test doc_outputs_matcher) under pytest."""
import doc_outputs as d


def match(expected, printed, mode="exact"):
    return d.lines_match(expected.split("\n"), printed.split("\n"), mode)


def test_exact_is_exact():
    assert match("level: ok", "level: ok") is None
    assert match("level: ok", "level: ok   \n\n") is None  # trailing spaces and empty lines do not count
    assert match("level: ok", "level: watch") is not None
    assert match("avail 1.20 GiB", "avail 1.21 GiB") is not None
    assert match("a\nb", "a") is not None  # a shown line not printed
    assert match("a", "a\nb") is not None  # a printed line not shown


def test_ellipsis_lines_and_text():
    assert match("a\n...\nz", "a\nb\nc\nz") is None
    assert match("a\n...\nz", "a\nz") is None  # none included
    assert match("a\n...", "a\nb\nc") is None
    assert match("a\n...\nz", "a\nb") is not None
    assert match('{"note": "tight: ...", ...}', '{"note": "tight: rungs 4a 2", "x": 1}') is None
    assert match("x...y", "xy") is None and match("x...y", "yx") is not None


def test_numbers_vary():
    m = "numbers vary"
    assert match("avail 22.65 GiB of 23.54 GiB", "avail 1.5 GiB of 23 GiB", m) is None
    assert match("avail 22.65 GiB", "avail 22.65 MiB", m) is not None  # the unit is a word
    assert match("  slot 0:   8192 -> 14096", "  slot 0: 8 -> 1", m) is None  # columns move with widths
    assert match("Qwen3NextForCausalLM", "Qwen4NextForCausalLM", m) is not None  # a number inside a name stays
    assert match("level ok", "level watch", m) is not None  # levels do not vary here


def test_live_box():
    m = "live box"
    assert match("level ok, avail 21875 MiB: admit", "level watch, avail 123 MiB: admit", m) is None
    assert match("level ok, avail 21875 MiB: admit", "level ok, avail 123 MiB: reject", m) is not None
    assert match("[level] TIGHT -> CRITICAL", "[level] OK -> WATCH", m) is None
    assert match("broken", "brokenness", m) is not None


def test_live_box_any_lines():
    m = "live box, any lines"
    shown = "12:00:00 level ok -> watch: watch  avail 1 GiB\n12:00:00 ok  avail 1 GiB"
    assert match(shown, "13:01:02 watch avail 2 GiB\n13:01:03 watch avail 2 GiB", m) is None
    assert match(shown, "13:01:02 level tight -> critical: critical avail 2 GiB", m) is None
    assert match(shown, "", m) is not None  # at least one line
    assert match(shown, "13:01:02 unknown avail unknown", m) is not None  # a line the page shows none like


def test_steps_and_continuations():
    steps = d.transcript_steps(["$ pnmem a \\", "    --b c", "out 1", "", "$ cat f", "x", ""])
    assert steps == [["pnmem a  --b c", ["out 1"]], ["cat f", ["x"]]]


def test_marker_before():
    lines = ["text", "<!-- output: live box -->", "", "```", "$ x", "```"]
    assert d.marker_before(lines, 4) == ("output", "live box")
    assert d.marker_before(["text", "```"], 2) is None


def fake_box(tmp_path, levels):
    """An Outputs whose `pnmem` prints `level: L` for each L of levels in turn (the last one from then on)."""
    import types
    tool = tmp_path / "pnmem"
    count = tmp_path / "count"
    count.write_text("0")
    tool.write_text("#!/bin/sh\nn=$(cat %s)\necho $((n + 1)) > %s\nset -- %s\nshift $(( n < $# - 1 ? n : $# - 1 ))\n"
                    "echo \"level: $1\"\necho 'psi: (a fake box)'\n" % (count, count, " ".join(levels)))
    tool.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    args = types.SimpleNamespace(source_root=str(src), tool=str(tool), python_lib=None)
    runner = types.SimpleNamespace(a=args, work=str(work))
    return d.Outputs(runner, ok=None, fail=None, skip=None), count


def test_live_box_waits_for_a_quiet_box(tmp_path, monkeypatch):
    monkeypatch.setattr(d.time, "sleep", lambda s: None)
    outputs, count = fake_box(tmp_path, ["tight", "watch", "ok"])
    assert outputs.wait_for_quiet_box() is None
    assert count.read_text().strip() == "3"  # read until it said ok, and no further
    (tmp_path / "quiet").mkdir()
    outputs, count = fake_box(tmp_path / "quiet", ["ok"])
    assert outputs.wait_for_quiet_box() is None
    assert count.read_text().strip() == "1"  # a quiet box: one read


def test_live_box_that_stays_busy_fails_naming_the_level(tmp_path, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(d.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(d.time, "monotonic", lambda: clock[0])
    outputs, _ = fake_box(tmp_path, ["critical"])
    why = outputs.wait_for_quiet_box()
    assert why is not None and "level critical" in why and f"{d.SETTLE_S} s" in why and "a fake box" in why
    assert clock[0] >= d.SETTLE_S
