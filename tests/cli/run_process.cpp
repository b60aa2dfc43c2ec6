// tests/cli/run_process.cpp - posix_spawn with stdout and stderr on separate pipes.
#include "run_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace pnmem::test {

namespace {

// Closes the descriptors it holds when it goes out of scope.
struct fd_pair {
  std::array<int, 2> fd{-1, -1};
  fd_pair() {
    if (pipe2(fd.data(), O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  fd_pair(const fd_pair&) = delete;
  fd_pair& operator=(const fd_pair&) = delete;
  ~fd_pair() {
    close_read();
    close_write();
  }
  void close_read() {
    if (fd[0] >= 0) ::close(fd[0]);
    fd[0] = -1;
  }
  void close_write() {
    if (fd[1] >= 0) ::close(fd[1]);
    fd[1] = -1;
  }
};

}  // namespace

process_result run_process(const std::string& path, const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& env) {
  fd_pair out_pipe;
  fd_pair err_pipe;

  std::vector<std::string> argv_store{path};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_store;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "PN_", 3) != 0) env_store.emplace_back(*e);
  }
  for (const auto& [k, v] : env) env_store.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe.fd[1], 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn " + path + ": " + std::strerror(rc));
  out_pipe.close_write();
  err_pipe.close_write();

  process_result r;
  std::array<pollfd, 2> fds{{{out_pipe.fd[0], POLLIN, 0}, {err_pipe.fd[0], POLLIN, 0}}};
  std::array<std::string*, 2> sinks{&r.out, &r.err};
  int open_fds = 2;
  std::array<char, 4096> buf{};
  while (open_fds > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
      if (n > 0) {
        sinks[i]->append(buf.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // the pipe object still closes it
        --open_fds;
      }
    }
  }

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      out.push_back(text.substr(start));
      break;
    }
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

}  // namespace pnmem::test
