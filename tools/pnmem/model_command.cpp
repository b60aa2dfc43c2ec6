// tools/pnmem/model_command.cpp - `pnmem model`.

#include "cli11_warnings.hpp"  // first: see there

#include "model_command.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "arg_parsers.hpp"
#include "diagnostics.hpp"
#include "model_options.hpp"
#include "pnmem/format.hpp"
#include "pnmem/model_files/gguf.hpp"
#include "pnmem/model_files/hf_config.hpp"
#include "pnmem/model_files/model_json.hpp"
#include "text_option.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

namespace {

namespace mf = pnmem::model_files;

// The prompt lengths the summary prices.
constexpr int summary_prompts[] = {1024, 8192, 32768, 131072};

// "131072 (128.00 KiB)", or "512 B" below a KiB.
std::string bytes_cell(std::uint64_t b) {
  return b < pnmem::KiB ? std::to_string(b) + " B" : std::to_string(b) + " (" + pnmem::format_bytes(b) + ")";
}

// The readable block --summary writes on stderr.
std::string summary(const mf::model_description& d) {
  const pnmem::model_cost& m = d.cost;
  std::ostringstream t;
  t << "model: " << model_label(d) << '\n';
  const bool vllm = d.engine.engine == pnmem::kv_engine::vllm;
  // How the rule lays the shape out (each kind's block, a padded page), when there is one.
  const std::optional<pnmem::engine_layout> layout =
      d.shape ? std::optional<pnmem::engine_layout>(pnmem::layout_of(*d.shape, d.engine)) : std::nullopt;
  bool chunked = false;  // a kind of layer vLLM may hold for the whole context (the note below)
  if (d.shape) {
    const pnmem::model_shape& s = *d.shape;
    t << "shape (" << s.query_heads << " query heads, hidden " << s.hidden_size << "), engine rule "
      << pnmem::to_string(d.engine.engine) << ":\n";
    for (std::size_t g = 0; g < s.n_groups && g < pnmem::max_layer_groups; ++g) {
      const pnmem::layer_group& x = s.groups[g];
      t << "  " << x.layers << " x " << pnmem::to_string(x.kind);
      if (x.kind == pnmem::layer_kind::recurrent) {
        t << ": state " << x.conv_state_values << " conv + " << x.ssm_state_values << " SSM values per layer";
      } else {
        t << ": " << x.kv_heads << " KV heads x ";
        if (x.k_only) {
          t << x.key_dim << " dims, one row (K only: a latent)";
        } else {
          t << x.key_dim << '/' << (x.value_dim == 0 ? x.key_dim : x.value_dim) << " K/V dims";
        }
        if (x.side_bytes != 0) t << ", + " << x.side_bytes << " B a token beside the KV (e.g. an indexer's keys)";
        if (vllm && pnmem::vllm_fp8_ds_mla(x, pnmem::kv_format::fp8)) {
          t << "; fp8 as vLLM's fp8_ds_mla rows of " << pnmem::vllm_fp8_ds_mla_row_bytes << " B";
        }
        if (x.kind == pnmem::layer_kind::sliding) t << ", window " << x.span;
        if (x.kind == pnmem::layer_kind::chunked) t << ", chunk " << x.span;
        if (x.kind == pnmem::layer_kind::cross) t << ", " << x.span << " encoder tokens per item";
        chunked = chunked || x.kind == pnmem::layer_kind::chunked;
        if (x.kind == pnmem::layer_kind::sliding || x.kind == pnmem::layer_kind::chunked) {
          if (vllm && d.engine.hybrid_manager_off) {
            t << " (kept: the whole context, vLLM's hybrid KV-cache manager off)";
          } else {
            t << " (kept: " << pnmem::kept_tokens(d.engine, x.kind, x.span, layout->group_block[g]) << " tokens)";
          }
        }
        // vLLM's one page size: this kind's own block, or its page padded to the largest.
        if (x.kind != pnmem::layer_kind::cross && layout->group_block[g] != layout->block) {
          t << "; vLLM's one page size: blocks of " << layout->group_block[g] << " tokens";
        }
        if (x.kind != pnmem::layer_kind::cross && layout->page_pad[g] != 0) {
          t << "; vLLM's one page size: its page padded to " << layout->page_pad[g] << " B a token";
        }
      }
      t << '\n';
    }
  }
  if (chunked && vllm && !d.engine.hybrid_manager_off) {
    t << "note: a vLLM that turns its hybrid KV-cache manager off for chunked attention (its log says "
         "\"Disabling it, by default\") holds the chunked layers for the whole context: give "
         "--disable-hybrid-kv-cache-manager then\n";
  }
  t << "KV bytes per token";
  if (m.n_windows == 0 && m.kv_block_tokens <= 1) t << " (no window: every layer grows with the prompt)";
  if (m.n_windows == 0 && m.kv_block_tokens > 1) {
    t << " (no window: every layer grows with the prompt, in blocks of " << m.kv_block_tokens << " tokens)";
  }
  if (m.n_windows != 0 && m.kv_block_tokens > 1) {
    t << " (in blocks of " << m.kv_block_tokens << " tokens"
      << (layout && layout->block != m.kv_block_tokens ? ", the largest any kind gets" : "")
      << ")";
  }
  t << ":\n";
  t << "  " << std::left << std::setw(8) << "format" << std::setw(24) << "every token";
  for (std::size_t w = 0; w < m.n_windows && w < pnmem::max_kv_windows; ++w) {
    t << std::setw(24) << ("up to " + std::to_string(m.windows[w].window));
  }
  t << '\n';
  for (pnmem::kv_format f : pnmem::all_kv_formats) {
    const auto i = static_cast<std::size_t>(f);
    t << "  " << std::setw(8) << pnmem::to_string(f) << std::setw(24) << bytes_cell(m.full_kv_bytes_per_token[i]);
    for (std::size_t w = 0; w < m.n_windows && w < pnmem::max_kv_windows; ++w) {
      t << std::setw(24) << bytes_cell(m.windows[w].bytes_per_token[i]);
    }
    if (f == m.normal_kv) t << "normal";
    if (f == m.compact_kv) t << (f == m.normal_kv ? ", compact" : "compact");
    t << '\n';
  }
  t << std::right;
  t << "normal KV format: " << pnmem::to_string(m.normal_kv) << ", compact (forced by rung 4a): "
    << pnmem::to_string(m.compact_kv) << '\n';
  t << "state per sequence: " << bytes_cell(m.state_bytes_per_seq) << '\n';
  const std::uint64_t per_item = m.kv_bytes_per_encoder_item[static_cast<std::size_t>(m.normal_kv)];
  if (per_item != 0) t << "cross-attention KV per encoder item (image), " << pnmem::to_string(m.normal_kv) << ": " << bytes_cell(per_item) << '\n';
  const pnmem::activation_model& a = m.activation;
  t << "activation peak (CPU path): ";
  if (a.n_anchors > 0) {
    t << "anchors (tokens: peak; interpolated rounding up, growing with N^2 past the last)\n";
    for (std::size_t i = 0; i < a.n_anchors && i < pnmem::max_activation_anchors; ++i) {
      t << "  " << std::setw(8) << a.anchors[i].tokens << ": " << bytes_cell(a.anchors[i].peak_bytes) << '\n';
    }
  } else {
    t << bytes_cell(a.fixed_bytes) << " + " << a.per_token_bytes << " B x N + " << a.per_token_sq_bytes
      << " B x N^2\n";
  }
  t << "host cost of one prompt in " << pnmem::to_string(m.normal_kv) << " (KV + state + activation peak):\n";
  for (const int n : summary_prompts) {
    const std::uint64_t kv = pnmem::kv_bytes(m, m.normal_kv, static_cast<std::uint64_t>(n));
    const std::uint64_t act = pnmem::activation_peak_bytes(m.activation, static_cast<std::uint64_t>(n));
    t << "  " << std::setw(6) << n << " tokens: " << pnmem::format_bytes(pnmem::host_cost_bytes(m, n, m.normal_kv))
      << " (KV " << pnmem::format_bytes(kv) << ", activation " << pnmem::format_bytes(act) << ")\n";
  }
  return t.str();
}

class model_command final : public subcommand {
 public:
  model_command()
      : subcommand("model",
                   "Print a model description (pnmem's model JSON) from a config.json, a GGUF file, a "
                   "description or a shape") {}

  int run(const pnmem::env_settings_config& env, bool json) const override;

 private:
  void add_options(CLI::App& app) override;
  mf::model_description describe() const;

  // --check PATH: one line saying whether pnmem can price every layer's cache of the model at PATH.
  int check(bool json) const;

  std::optional<std::string> name_;
  std::optional<std::string> check_;
  bool summary_ = false;
  model_options model_;
};

void model_command::add_options(CLI::App& app) {
  add_text_option(app, "--name", name_, "The description's name (free text, e.g. Llama-3-8B)")->type_name("TEXT");
  app.add_flag("--summary", summary_,
               "Also write a readable summary on stderr (stdout stays the JSON): KV bytes per token per format, "
               "state, activation model, host cost at 1k/8k/32k/128k tokens in the normal format");
  add_text_option(app, "--check", check_,
                  "Say in one line whether pnmem can price every layer's cache of the model at PATH (a snapshot "
                  "directory or its config.json, or a GGUF file), and which key it cannot read: exit 0 known, 1 "
                  "refused. Takes the engine flags, no other model flag")
      ->type_name("PATH");
  model_.add_to(app, "Model source (one of --from-hf-config, --from-gguf, --model or the shape) and overrides");
  app.footer(
      "Give one source: --from-hf-config, --from-gguf, --model, or the shape (--layers, --kv-heads,\n"
      "--head-dim [--kv-dtype]); --kv-bytes-per-token, --state-bytes-per-seq and --activation-* apply on\n"
      "top of it (alone: on top of the seed's model). --engine says whose rule prices windowed layers and\n"
      "state (exact, vllm, llama.cpp). stdout is the description as pnmem's model JSON (format\n"
      "\"pnmem-model\", version 2), with or without --json. admit, load and plan take the same flags, or\n"
      "read the description back with --model FILE:\n"
      "  pnmem admit --from-hf-config config.json --engine vllm --host-total 16GiB --host-avail 8GiB --prompt 8192\n"
      "  pnmem model --from-hf-config config.json --engine vllm > m.json\n"
      "  pnmem admit --model m.json --host-total 16GiB --host-avail 8GiB --prompt 8192");
}

mf::model_description model_command::describe() const {
  std::optional<mf::model_description> d = model_.resolve();
  if (!d) {
    throw usage_error(std::string("no model given: use ") + model_options::sources_words + "; see pnmem model --help");
  }
  if (name_) d->name = *name_;
  return std::move(*d);
}

// A GGUF file (its first bytes are the magic), or else a config.json or a directory holding one.
bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

int model_command::check(bool json) const {
  if (model_.given()) {
    throw usage_error("--check reads the model at its PATH: give no other model flag (" + model_.first_given() + ")");
  }
  if (name_ || summary_) throw usage_error(std::string(name_ ? "--name" : "--summary") + " with --check: it prints one line");
  const pnmem::engine_rule engine = model_.engine();
  const std::string& path = *check_;
  const bool gguf = is_gguf_file(path);
  const mf::read_result<mf::model_description> r = gguf ? mf::read_gguf_file(path, engine) : mf::read_hf_config_file(path, engine);
  std::ostringstream out;
  if (json) {
    nlohmann::ordered_json j;
    j["path"] = path;
    j["known"] = r.value.has_value();
    if (r.value) {
      const pnmem::model_cost& m = r.value->cost;
      j["name"] = r.value->name;
      j["engine"] = std::string(pnmem::to_string(engine.engine));
      j["normal_kv"] = std::string(pnmem::to_string(m.normal_kv));
      j["kv_bytes_per_token"] = pnmem::kv_bytes_per_token(m, m.normal_kv);
      j["state_bytes_per_seq"] = m.state_bytes_per_seq;
    } else {
      j["error"] = r.error;
    }
    out << j.dump() << '\n';
  } else if (r.value) {
    const pnmem::model_cost& m = r.value->cost;
    out << "known: " << r.value->name << " (" << path << "): every layer's cache is known: "
        << pnmem::kv_bytes_per_token(m, m.normal_kv) << " B per token in " << pnmem::to_string(m.normal_kv)
        << (m.kv_block_tokens > 1 ? " (in blocks of " + std::to_string(m.kv_block_tokens) + " tokens)" : std::string()) << ", "
        << m.state_bytes_per_seq << " B of state per sequence, under the " << pnmem::to_string(engine.engine)
        << " rule\n";
  } else {
    out << "refused: " << r.error << '\n';
  }
  std::cout << out.str();
  std::cout.flush();
  if (!std::cout) return exit_failure;
  return r.value ? 0 : exit_failure;
}

int model_command::run(const pnmem::env_settings_config& env, bool json) const {
  if (check_) {
    print_warnings(env.errors);
    return check(json);
  }
  // Everything that can go wrong does so before anything is printed.
  const mf::model_description d = describe();
  const std::string text = mf::write_model_json(d, 2) + '\n';
  print_warnings(env.errors);
  if (summary_) std::cerr << summary(d) << std::flush;
  // The description is JSON either way: --json changes nothing.
  std::cout << text;
  std::cout.flush();
  return std::cout ? 0 : exit_failure;
}

}  // namespace

std::unique_ptr<subcommand> make_model_command() { return std::make_unique<model_command>(); }

}  // namespace pnmem_cli
