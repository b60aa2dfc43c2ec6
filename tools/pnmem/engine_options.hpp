// tools/pnmem/engine_options.hpp - which engine's rule turns a model's layer groups into costs.
//
//   --engine exact|vllm|llama.cpp     (default exact: the model's own need; model_shape.hpp)
//   --block-tokens N                  vllm: --block-size (default 16)
//   --max-batched-tokens N            vllm: --max-num-batched-tokens (default 8192)
//   --state-copies N                  vllm: states per recurrent layer and sequence (default 1; 2 with
//                                     prefix caching on a hybrid)
//   --ssm-state-fp32                  vllm: --mamba-ssm-cache-dtype float32
//   --mtp                             vllm, exact: the model's MTP layers keep KV (a speculative drafter)
//   --disable-hybrid-kv-cache-manager vllm: sliding and chunked layers hold the whole context
//   --ubatch N                        llama.cpp: -ub (default 512)
//   --seqs N                          llama.cpp: sequences sharing one unified cache (default 1)
//
// A flag of one engine given with another is an error naming both.
#pragma once

#include <optional>
#include <string>

#include "pnmem/model_shape.hpp"

namespace CLI {
class App;
}

namespace pnmem_cli {

class engine_options {
 public:
  void add_to(CLI::App& app, const std::string& group_name);

  // Whether any of the flags was given.
  bool given() const;

  // The rule the flags describe (the exact rule when none was given); throws usage_error naming the
  // flag on a bad value or a flag of another engine.
  pnmem::engine_rule resolve() const;

 private:
  std::optional<std::string> engine_;
  std::optional<std::string> block_tokens_;
  std::optional<std::string> max_batched_tokens_;
  std::optional<std::string> state_copies_;
  bool ssm_state_fp32_ = false;
  bool mtp_ = false;
  bool hybrid_manager_off_ = false;
  std::optional<std::string> ubatch_;
  std::optional<std::string> seqs_;
};

}  // namespace pnmem_cli
