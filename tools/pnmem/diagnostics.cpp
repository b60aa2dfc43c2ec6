// tools/pnmem/diagnostics.cpp
#include "diagnostics.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <streambuf>
#include <string>

#include "pnmem/detail/printable.hpp"

namespace pnmem_cli {

std::string one_line(std::string_view s) { return pnmem::detail::printable(s); }

void print_error(std::string_view message) { std::cerr << "pnmem: error: " << one_line(message) << std::endl; }

namespace {
// std::cout's buffer, passed through, keeping the errno of the first write to it that failed: by the
// time the command has returned, errno says nothing about it any more.
class errno_keeping_buf final : public std::streambuf {
 public:
  explicit errno_keeping_buf(std::streambuf* to) : to_(to) {}
  int first_errno() const { return first_errno_; }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return sync() == 0 ? traits_type::not_eof(c) : c;
    errno = 0;
    const int_type r = to_->sputc(traits_type::to_char_type(c));
    if (traits_type::eq_int_type(r, traits_type::eof())) keep(errno);
    return r;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    errno = 0;
    const std::streamsize r = to_->sputn(s, n);
    if (r < n) keep(errno);
    return r;
  }
  int sync() override {
    errno = 0;
    const int r = to_->pubsync();
    if (r != 0) keep(errno);
    return r;
  }

 private:
  void keep(int err) {
    if (first_errno_ == 0) first_errno_ = err != 0 ? err : EIO;
  }
  std::streambuf* to_;
  int first_errno_ = 0;
};

errno_keeping_buf* stdout_buf = nullptr;
}  // namespace

void keep_stdout_errors() {
  if (stdout_buf != nullptr) return;
  static errno_keeping_buf buf(std::cout.rdbuf());  // lives as long as std::cout may be written
  stdout_buf = &buf;
  std::cout.rdbuf(&buf);
}

bool stdout_ok() {
  std::cout.flush();
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!failed) return true;
  const int err = stdout_buf != nullptr ? stdout_buf->first_errno() : 0;
  print_error(std::string("writing to standard output failed: ") + (err != 0 ? std::strerror(err) : "an I/O error"));
  return false;
}

void print_warnings(const std::vector<pnmem::config_error>& errors) {
  // The library's own line for each (config_error::log_line), as an engine's log shows it.
  for (const auto& e : errors) std::cerr << one_line(e.log_line()) << '\n';
}

}  // namespace pnmem_cli
