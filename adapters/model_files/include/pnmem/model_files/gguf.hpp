// pnmem/model_files/gguf.hpp - a model's costs from a GGUF file's metadata (what llama.cpp loads).
//
// Reads the header and the key/value section only, never the tensors: <arch>.block_count,
// <arch>.attention.head_count, .head_count_kv, .key_length, .value_length, .sliding_window,
// <arch>.embedding_length, <arch>.context_length, and derives the costs with from_shape.
// (Implementation, the format and the full key list: gguf.cpp.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pnmem/model_files/model_description.hpp"

namespace pnmem::model_files {

// From the first bytes of a GGUF file (the header and metadata; a prefix that stops inside the
// metadata is an error naming where it stopped).
read_result<model_description> read_gguf(std::string_view bytes);

// From a file: reads only as far as the end of the metadata.
read_result<model_description> read_gguf_file(const std::string& path);

}  // namespace pnmem::model_files
