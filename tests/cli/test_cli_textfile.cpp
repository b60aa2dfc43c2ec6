// `pnmem watch --textfile`: node_exporter's textfile-collector convention. The file is
// replaced whole (a reader polling it meanwhile parses every read completely), it holds
// the latest written sample, --textfile-interval spaces the writes, bad flags exit 2 with
// one line, a failed write later is a warning and sampling goes on, and no temporary
// file is left behind, after --count or after SIGTERM.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "../exposition_check.hpp"
#include "cli_support.hpp"
#include "temp_dir.hpp"

extern char** environ;

using nlohmann::json;

namespace {

using pnmem::test::env_or_fail;
using pnmem::test::fixture;
using pnmem::test::run;

// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The names in `dir`.
std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// The seq of the JSON "sample" lines of `watch --json`, in order.
std::vector<std::uint64_t> sample_seqs(const std::string& out) {
  std::vector<std::uint64_t> seqs;
  for (const auto& line : pnmem::test::lines_of(out)) {
    const json j = json::parse(line, nullptr, false);
    REQUIRE(j.is_object());
    if (j.at("event") == "sample") seqs.push_back(j.at("state").at("seq").get<std::uint64_t>());
  }
  return seqs;
}

// The textfile parsed: valid exposition text with the pnmem_level gauge; its pnmem_snapshot_seq.
std::uint64_t check_textfile(const std::string& path) {
  const auto text = read_file(path);
  REQUIRE(text.has_value());
  const auto e = pnmem::test::check_exposition(*text);
  INFO("textfile:\n", *text);
  CHECK(e.errors.empty());
  CHECK(e.value("pnmem_level").has_value());
  const auto seq = e.value("pnmem_snapshot_seq");
  REQUIRE(seq.has_value());
  return static_cast<std::uint64_t>(*seq);
}

// `pnmem ARGS` started in the background, stdout and stderr to files; killed and reaped
// at scope exit if still running.
class background_pnmem {
 public:
  background_pnmem(const std::vector<std::string>& args, std::string out_path, std::string err_path)
      : err_path_(std::move(err_path)) {
    const std::string exe = env_or_fail("PNMEM_EXE");
    std::vector<std::string> argv_text{exe};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    REQUIRE(posix_spawn_file_actions_init(&fa) == 0);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
  }
  background_pnmem(const background_pnmem&) = delete;
  background_pnmem& operator=(const background_pnmem&) = delete;
  ~background_pnmem() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // Sends `sig` and waits: the exit status, or -1 when it did not exit normally.
  int stop(int sig) {
    REQUIRE(pid_ > 0);
    REQUIRE(::kill(pid_, sig) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid_, &status, 0) == pid_);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string err() const { return read_file(err_path_).value_or(""); }

 private:
  pid_t pid_ = -1;
  std::string err_path_;
};

// Waits up to 10 s for `pred`.
template <class Pred>
bool wait_for(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

}  // namespace

TEST_CASE("pnmem watch --textfile: the last sample's exposition, nothing else left in the directory") {
  const pnmem::test::temp_dir dir;
  const std::string target = dir.path("pnmem.prom");
  const auto r = run(
      {"--json", "watch", "--root", fixture("v2_nested"), "--interval", "5", "--count", "3", "--textfile", target});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const auto seqs = sample_seqs(r.out);
  REQUIRE(seqs.size() == 3);  // stdout is what it is without --textfile
  CHECK(check_textfile(target) == seqs.back());
  CHECK(names_in(dir.path("")) == std::set<std::string>{"pnmem.prom"});
  // The same numbers as `pnmem metrics` for the fixture (the sampler's; the age and seq aside).
  const auto m = run({"metrics", "--root", fixture("v2_nested")});
  REQUIRE(m.exit_code == 0);
  const auto file = pnmem::test::check_exposition(*read_file(target));
  const auto one = pnmem::test::check_exposition(m.out);
  for (const char* name :
       {"pnmem_level", "pnmem_host_total_bytes", "pnmem_host_avail_bytes", "pnmem_cgroup_limit_bytes"}) {
    CAPTURE(name);
    CHECK(file.value(name) == one.value(name));
  }
  // Text mode too, and a bare name in the working directory's sense: a relative path.
  const auto t =
      run({"watch", "--root", fixture("v2_unlimited"), "--interval", "5", "--count", "2", "--textfile", target});
  REQUIRE(t.exit_code == 0);
  CHECK(pnmem::test::lines_of(t.out).size() == 2);
  check_textfile(target);
  CHECK(names_in(dir.path("")) == std::set<std::string>{"pnmem.prom"});
}

TEST_CASE("the textfile holds the series pnmem metrics prints: the same names and labels, psi_mode aside (issue 39 item 10)") {
  // On this box (real /proc): watch may arm a PSI trigger and say psi_mode="trigger", a one-shot metrics
  // polls and says "poll"; docs/operators.md says so. Every other series and label is the same.
  const pnmem::test::temp_dir dir;
  const std::string target = dir.path("pnmem.prom");
  const auto w = run({"watch", "--count", "1", "--textfile", target});
  REQUIRE(w.exit_code == 0);
  const auto m = run({"metrics"});
  REQUIRE(m.exit_code == 0);
  const auto file = pnmem::test::check_exposition(*read_file(target));
  const auto one = pnmem::test::check_exposition(m.out);
  auto series = [](const pnmem::test::exposition& ex, std::string& psi_mode) {
    std::set<std::string> out;
    for (const auto& sample : ex.samples) {
      std::string key = sample.name;
      for (const auto& [k, v] : sample.labels) {
        if (sample.name == "pnmem_provenance_info" && k == "psi_mode") {
          psi_mode = v;
          continue;
        }
        key += " " + k + "=" + v;
      }
      out.insert(key);
    }
    return out;
  };
  std::string file_mode;
  std::string one_mode;
  CHECK(series(file, file_mode) == series(one, one_mode));
  CHECK(one_mode != "trigger");  // one sample has nothing to wait on
  CHECK((file_mode == "trigger" || file_mode == one_mode));
  CHECK(file.types == one.types);
  CHECK(file.helps == one.helps);
}

TEST_CASE("pnmem watch --textfile-interval: written at the first sample, then not before the interval") {
  const pnmem::test::temp_dir dir;
  const std::string target = dir.path("pnmem.prom");
  // 60 s apart: the five samples (5 ms apart) leave the first one in the file.
  const auto r = run({"--json", "watch", "--root", fixture("v2_unlimited"), "--interval", "5", "--count", "5",
                            "--textfile", target, "--textfile-interval", "60000"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const auto seqs = sample_seqs(r.out);
  REQUIRE(seqs.size() == 5);
  CHECK(check_textfile(target) == seqs.front());
  // 0: after every sample, as without the flag.
  const auto every = run({"--json", "watch", "--root", fixture("v2_unlimited"), "--interval", "5", "--count", "5",
                                "--textfile", target, "--textfile-interval", "0"});
  REQUIRE(every.exit_code == 0);
  CHECK(check_textfile(target) == sample_seqs(every.out).back());
  CHECK(names_in(dir.path("")) == std::set<std::string>{"pnmem.prom"});
}

TEST_CASE("bad --textfile / --textfile-interval: exit 2, one line naming the flag and the value") {
  const pnmem::test::temp_dir dir;
  const std::string missing = dir.path("no-such-dir") + "/pnmem.prom";
  const auto r = run({"watch", "--root", fixture("v2_unlimited"), "--count", "1", "--textfile", missing});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "pnmem: error: --textfile: \"" + missing + "\": directory \"" + dir.path("no-such-dir") +
                     "\": No such file or directory\n");

  const std::string target = dir.path("pnmem.prom");
  for (const auto& args : {
           std::vector<std::string>{"--textfile", dir.path("")},                            // a directory
           std::vector<std::string>{"--textfile", dir.write("file", "x") + "/pnmem.prom"},  // not a directory
           std::vector<std::string>{"--textfile", ""},                                      // empty
           std::vector<std::string>{"--textfile", "/proc/pnmem.prom"},                      // cannot create
           std::vector<std::string>{"--textfile", target, "--textfile-interval", "abc"},
           std::vector<std::string>{"--textfile", target, "--textfile-interval", "-1"},
           std::vector<std::string>{"--textfile", target, "--textfile-interval", "5s"},
           std::vector<std::string>{"--textfile", target, "--textfile-interval", "99999999999"},
           std::vector<std::string>{"--textfile-interval", "1000"},  // without --textfile
       }) {
    std::vector<std::string> full{"watch", "--root", fixture("v2_unlimited"), "--count", "1"};
    full.insert(full.end(), args.begin(), args.end());
    const auto bad = run(full);
    CAPTURE(args.back());
    CHECK(bad.exit_code == 2);
    CHECK(bad.out.empty());
    CHECK(pnmem::test::lines_of(bad.err).size() == 1);
    const std::string flag = args.size() == 2 && args[0] == "--textfile" ? "--textfile" : "--textfile-interval";
    CHECK(bad.err.find("pnmem: error: " + flag + ": \"") == 0);
  }
  CHECK(names_in(dir.path("")) == std::set<std::string>{"file"});

  // Not *.prom: node_exporter would not read it; a warning, and it is written all the same.
  const auto txt =
      run({"watch", "--root", fixture("v2_unlimited"), "--count", "1", "--textfile", dir.path("pnmem.txt")});
  CHECK(txt.exit_code == 0);
  CHECK(txt.err.find("pnmem: warning: --textfile: ") == 0);
  CHECK(txt.err.find("reads only *.prom files") != std::string::npos);
  check_textfile(dir.path("pnmem.txt"));
}

TEST_CASE("pnmem watch --textfile is atomic: a reader polling it meanwhile parses every read completely") {
  const pnmem::test::temp_dir dir;
  const std::string target = dir.path("pnmem.prom");
  // 40 samples 1 ms apart; each write waits for its fsync (~5-100 ms on a disk): a few seconds.
  std::atomic<bool> done{false};
  pnmem::test::process_result r;
  std::thread writer([&] {
    r = run({"watch", "--root", fixture("v2_nested"), "--interval", "1", "--count", "40", "--textfile", target});
    done = true;
  });
  int reads = 0;
  int bad_reads = 0;
  std::set<std::uint64_t> seqs;
  std::set<std::size_t> sizes;  // samples per read: one number, a whole file's
  std::string first_bad;
  while (!done) {
    const auto text = read_file(target);
    if (!text) continue;  // not written yet
    ++reads;
    const auto e = pnmem::test::check_exposition(*text);
    const auto seq = e.value("pnmem_snapshot_seq");
    if (!e.errors.empty() || !seq || !e.value("pnmem_level") ||
        !e.value("pnmem_source_read", {{"source", "meminfo"}})) {
      if (bad_reads++ == 0) first_bad = *text;
      continue;
    }
    seqs.insert(static_cast<std::uint64_t>(*seq));
    sizes.insert(e.samples.size());
  }
  writer.join();
  REQUIRE(r.exit_code == 0);
  INFO("first incomplete read:\n", first_bad);
  CHECK(bad_reads == 0);
  MESSAGE(reads, " reads of ", seqs.size(), " different samples");
  CHECK(reads > 20);
  CHECK(seqs.size() > 5);  // the reader really overlapped the rewrites
  check_textfile(target);
  CHECK(sizes == std::set<std::size_t>{pnmem::test::check_exposition(*read_file(target)).samples.size()});
  CHECK(names_in(dir.path("")) == std::set<std::string>{"pnmem.prom"});
}

TEST_CASE("SIGTERM/SIGINT while writing: exit 0, the last complete file stays, no temporary file") {
  const pnmem::test::temp_dir dir;
  const std::string target = dir.path("out") + "/pnmem.prom";
  std::filesystem::create_directory(dir.path("out"));
  int round = 0;
  for (const int sig : {SIGTERM, SIGINT, SIGTERM, SIGINT, SIGTERM, SIGTERM}) {
    CAPTURE(round);
    background_pnmem p({"watch", "--root", fixture("v2_nested"), "--interval", "1", "--textfile", target},
                       dir.path("stdout"), dir.path("stderr"));
    REQUIRE(wait_for([&] { return std::filesystem::exists(target); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * round++));
    CHECK(p.stop(sig) == 0);
    CHECK(p.err().empty());
    check_textfile(target);
    CHECK(names_in(dir.path("out")) == std::set<std::string>{"pnmem.prom"});
    std::filesystem::remove(target);
  }
}

TEST_CASE("a write that fails after the start: a warning on stderr, sampling goes on, then it writes again") {
  const pnmem::test::temp_dir dir;
  const std::string out_dir = dir.path("out");
  const std::string target = out_dir + "/pnmem.prom";
  std::filesystem::create_directory(out_dir);
  background_pnmem p({"watch", "--root", fixture("v2_unlimited"), "--interval", "5", "--textfile", target},
                     dir.path("stdout"), dir.path("stderr"));
  REQUIRE(wait_for([&] { return std::filesystem::exists(target); }));
  // The directory goes away (an operator's mistake, a volume unmounted): the writes fail.
  REQUIRE(wait_for([&] {
    std::error_code ec;  // ENOTEMPTY when a temporary file appeared meanwhile: again
    std::filesystem::remove_all(out_dir, ec);
    return !std::filesystem::exists(out_dir);
  }));
  REQUIRE(wait_for([&] { return p.err().find("No such file or directory") != std::string::npos; }));
  // It comes back: the next sample is written, and one line says so.
  std::filesystem::create_directory(out_dir);
  REQUIRE(wait_for([&] { return std::filesystem::exists(target); }));
  REQUIRE(wait_for([&] { return p.err().find("again") != std::string::npos; }));
  CHECK(p.stop(SIGTERM) == 0);
  // A warning when the failure starts (another only if it changes: the directory went while a
  // write was under way), one line when it works again.
  const auto lines = pnmem::test::lines_of(p.err());
  REQUIRE(lines.size() >= 2);
  CHECK(lines.size() <= 3);
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    CAPTURE(lines[i]);
    CHECK(lines[i].find("pnmem: warning: --textfile: " + out_dir) == 0);
    CHECK(lines[i].find(": No such file or directory (still sampling; " + target +
                        " keeps its last complete sample)") != std::string::npos);
  }
  CHECK(lines.back() == "pnmem: --textfile: writing " + target + " again");
  check_textfile(target);
  CHECK(names_in(out_dir) == std::set<std::string>{"pnmem.prom"});
  // stdout went on meanwhile: a line per sample.
  CHECK(pnmem::test::lines_of(read_file(dir.path("stdout")).value_or("")).size() > 2);
}

TEST_CASE("a rename that fails (the target replaced by a directory) leaves no temporary file behind (issue 42 item 16)") {
  const pnmem::test::temp_dir dir;
  const std::string out_dir = dir.path("out");
  const std::string target = out_dir + "/pnmem.prom";
  std::filesystem::create_directory(out_dir);
  background_pnmem p({"watch", "--root", fixture("v2_unlimited"), "--interval", "5", "--textfile", target},
                     dir.path("stdout"), dir.path("stderr"));
  REQUIRE(wait_for([&] { return std::filesystem::exists(target); }));
  // An operator's mistake: the target becomes a directory (not empty): every rename onto it fails.
  REQUIRE(wait_for([&] {
    std::error_code ec;
    std::filesystem::remove(target, ec);
    std::filesystem::create_directory(target, ec);
    return std::filesystem::is_directory(target);
  }));
  { std::ofstream(target + "/keep") << "x"; }
  REQUIRE(wait_for([&] { return p.err().find("rename") != std::string::npos; }));
  // Several samples fail meanwhile (5 ms apart): none leaves its temporary file in the collector's directory.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(p.stop(SIGTERM) == 0);
  CHECK(names_in(out_dir) == std::set<std::string>{"pnmem.prom"});
  CHECK(std::filesystem::is_directory(target));
}
