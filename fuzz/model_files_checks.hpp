// fuzz/model_files_checks.hpp - properties the model-files readers (pnmem/model_files/*.hpp) owe
// whatever they are given.
#pragma once

#include "fuzz_support.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/model_files/model_description.hpp"

namespace pnmem_fuzz {

// Two descriptions say the same thing (source included).
inline bool same_description(const pnmem::model_files::model_description& a,
                             const pnmem::model_files::model_description& b) {
  return a.cost == b.cost && a.name == b.name && a.source == b.source && a.shape == b.shape;
}

// Two reads gave the same answer: both the same description, or both the same error.
inline bool same_read(const pnmem::model_files::read_result<pnmem::model_files::model_description>& a,
                      const pnmem::model_files::read_result<pnmem::model_files::model_description>& b) {
  if (a.value.has_value() != b.value.has_value()) return false;
  return a.value ? same_description(*a.value, *b.value) : a.error == b.error;
}

// A description a reader derived from a model's shape (HF config, GGUF): its costs are from_shape's,
// valid, and the shape is within the readers' limits and self-consistent.
inline void check_derived_from_shape(const pnmem::model_files::model_description& d) {
  FUZZ_CHECK(d.shape.has_value());
  const pnmem::model_shape& s = *d.shape;
  FUZZ_CHECK(d.cost == pnmem::from_shape(s));
  FUZZ_CHECK(pnmem::validate(d.cost).empty());
  FUZZ_CHECK(s.layers >= 1 && s.layers <= (1u << 20));
  FUZZ_CHECK(s.sliding_layers <= s.layers);
  FUZZ_CHECK((s.sliding_layers == 0) == (s.sliding_window == 0));
}

}  // namespace pnmem_fuzz
