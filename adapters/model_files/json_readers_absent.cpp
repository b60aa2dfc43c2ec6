// adapters/model_files/json_readers_absent.cpp - the JSON readers of a build without nlohmann-json.
//
// Built in their place when nlohmann-json is not found (or -Djson=disabled): the C library, the GGUF
// reader and everything else build without it, and a JSON model description is refused with a line
// that says why and what reads a model instead, never parsed some other way or priced as another.
// write_model_json (the pnmem tool's) is not built: the tool needs nlohmann-json.
#include "pnmem/model_files/hf_config.hpp"
#include "pnmem/model_files/model_json.hpp"

namespace pnmem::model_files {

namespace {
constexpr const char* without_json =
    "this pnmem was built without nlohmann-json (-Djson=disabled, or not found): it reads no JSON model "
    "description; read a GGUF file's metadata, give the model's layer groups (a shape), or set the cost";
}

read_result<model_description> read_model_json(std::string_view) {
  return read_result<model_description>::fail(std::string("model JSON: ") + without_json);
}

read_result<model_description> read_hf_config(std::string_view, const engine_rule&) {
  return read_result<model_description>::fail(std::string("config.json: ") + without_json);
}

read_result<model_description> read_hf_config_file(const std::string& path, const engine_rule&) {
  return read_result<model_description>::fail(path + ": " + without_json);
}

}  // namespace pnmem::model_files
