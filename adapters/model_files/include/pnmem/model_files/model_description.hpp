// pnmem/model_files/model_description.hpp - a model's costs, as read from a file, and where they came from.
//
// What the readers of this adapter return (model_json.hpp: pnmem's own description format;
// hf_config.hpp: a Hugging Face config.json; gguf.hpp: a GGUF file's metadata), and what
// `pnmem model` prints. The costs are a pnmem::model_cost (cost_model.hpp); the shape (its layer
// groups, model_shape.hpp) and the engine rule, when the costs were derived from them, are kept so the
// description can say how: cost == from_shape(*shape, engine).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "pnmem/cost_model.hpp"
#include "pnmem/model_shape.hpp"

namespace pnmem::model_files {

struct model_description {
  model_cost cost = seed_model_cost;
  std::optional<model_shape> shape;  // set when `cost` is from_shape(*shape, engine)
  engine_rule engine{};              // the rule the windows were derived with (exact unless said)
  std::string name;                  // free text ("Llama-3-8B"); may be empty
  std::string source;                // where it was read from ("hf-config", "gguf", "json", "flags")
};

// A reader's answer: the value, or a message that says what was wrong and where.
template <class T>
struct read_result {
  std::optional<T> value;
  std::string error;  // empty when value is set

  static read_result ok(T v) { return {std::move(v), {}}; }
  static read_result fail(std::string why) { return {std::nullopt, std::move(why)}; }
  explicit operator bool() const noexcept { return value.has_value(); }
};

}  // namespace pnmem::model_files
