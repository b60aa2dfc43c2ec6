// Consumer of the installed Linux adapter (pkg-config pnmem-linux, CMake pnmem::linux): a watcher over
// the real Linux sampler, one synchronous sample, the level and the admission answer for a prompt.
// Prints "linux <level> <verdict>" and exits 0 when the box was read.
#include <cstdio>
#include <string>

#include <pnmem/admission.hpp>
#include <pnmem/linux/linux_sampler.hpp>
#include <pnmem/watcher.hpp>

int main() {
  pnmem::watcher<pnmem::linux_sampler> w{pnmem::linux_sampler{}};
  w.start();
  const pnmem::mem_state s = w.read();
  w.stop();
  if (s.host_total_bytes == 0) {
    std::puts("linux: the sampler read no host memory");
    return 1;
  }
  pnmem::request_spec rq;
  rq.n_prompt = 512;
  const pnmem::admit_result r = pnmem::admit_request(rq, s);
  std::printf("linux %s %s\n", std::string(pnmem::to_string(s.level)).c_str(), std::string(pnmem::to_string(r.verdict)).c_str());
  return 0;
}
