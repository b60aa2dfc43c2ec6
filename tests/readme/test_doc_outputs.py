"""The matcher readme_blocks compares a page's transcripts with (doc_outputs.py): what it lets through and what not.

Run by `meson test` (suite readme, test doc_outputs_matcher) under pytest."""
import sys
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


def fake_box(tmp_path, levels, okf=None, failf=None):
    """An Outputs whose `pnmem watch` prints d.WATCH_COUNT polls per call, as the real tool's lines: the
    levels of call k are levels[k] (the last entry from then on), one word for all polls or a
    comma-separated list, one per poll."""
    import types
    tool = tmp_path / "pnmem"
    count = tmp_path / "count"
    count.write_text("0")
    tool.write_text(f"#!{sys.executable}\n"
                    f"n = int(open({str(count)!r}).read())\n"
                    f"open({str(count)!r}, 'w').write(str(n + 1))\n"
                    f"levels = {levels!r}\n"
                    "polls = levels[min(n, len(levels) - 1)].split(',')\n"
                    f"for i in range({d.WATCH_COUNT}):\n"
                    "    print(f'12:00:0{i} {polls[min(i, len(polls) - 1)]:<8} avail 1.00 GiB / 8.00 GiB  (a fake box)')\n")
    tool.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    args = types.SimpleNamespace(source_root=str(src), tool=str(tool), python_lib=None)
    runner = types.SimpleNamespace(a=args, work=str(work))
    return d.Outputs(runner, ok=okf, fail=failf, skip=None), count


def test_fake_box_prints_what_it_is_told(tmp_path):
    outputs, _ = fake_box(tmp_path, ["ok", "ok,ok,ok,ok,ok,tight"])
    assert outputs.box_level()[0] == "ok"
    level, printed = outputs.box_level()
    assert level == "tight"  # the worst of the polls: one stalled poll is a busy box
    assert len(printed.split("\n")) == d.WATCH_COUNT


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


def test_a_tool_that_prints_no_level_fails_rather_than_running_unchecked(tmp_path):
    # What the checker once asked for (`pnmem level` with no numbers): an error, no level. Reading that as
    # "cannot tell" ran every live-box block unchecked for the box's level.
    outputs, _ = fake_box(tmp_path, ["ok"])
    tool = tmp_path / "pnmem"
    tool.write_text("#!/bin/sh\necho 'pnmem: error: --host-total is required' >&2\nexit 1\n")
    why = outputs.wait_for_quiet_box()
    assert why is not None and "could not read the box's level" in why and "--host-total is required" in why


def test_live_box_block_runs_again_once_the_box_is_quiet(tmp_path, monkeypatch):
    monkeypatch.setattr(d.time, "sleep", lambda s: None)
    oks, fails = [], []
    outputs, count = fake_box(tmp_path, ["ok", "tight", "ok"], okf=lambda w, m: oks.append(w),
                              failf=lambda w, m: fails.append((w, m)))
    # A program that prints the ladder's line on its first run (a stall while it ran), not on its second.
    prog = tmp_path / "work" / "hello"
    runs = tmp_path / "runs"
    prog.write_text("#!/bin/sh\nif [ ! -e %s ]; then touch %s; echo '[ladder] TIGHT -> prefill window clamped'; fi\n"
                    "echo 'level ok: 8192 tokens may start'\n" % (runs, runs))
    prog.chmod(0o755)
    outputs.check_transcript("page.md:1", "live box", [("./hello", ["level ok: 8192 tokens may start"])])
    assert fails == []
    assert oks == ["page.md:1 $ ./hello"]
    assert count.read_text().strip() == "3"  # quiet before; tight after the first run; quiet again
    # Lines that differ on a quiet box still fail, after the second run.
    oks.clear()
    outputs.check_transcript("page.md:2", "live box", [("./hello", ["level ok: 8192 tokens are capped"])])
    assert oks == [] and len(fails) == 1 and fails[0][0] == "page.md:2 $ ./hello"
