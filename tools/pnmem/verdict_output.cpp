// tools/pnmem/verdict_output.cpp - rendering admission verdicts.
#include "verdict_output.hpp"


#include "pnmem/engine/explain.hpp"
#include "pnmem/format.hpp"

namespace pnmem_cli {

nlohmann::ordered_json die_json(int die) {
  if (die == pnmem::no_die) return nullptr;
  return die;
}

nlohmann::ordered_json verdict_json(const pnmem::admit_result& r) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["verdict"] = std::string(pnmem::to_string(r.verdict));
  j["reason"] = std::string(pnmem::to_string(r.reason));
  j["die"] = die_json(r.die);
  j["need_bytes"] = r.need_bytes;
  j["limit_bytes"] = r.limit_bytes;
  return j;
}

namespace {
std::string verdict_line_of(std::string_view label, const pnmem::admit_result& r, const pnmem::admit_answer& a) {
  std::string out(label);
  out += ": ";
  out += pnmem::to_string(r.verdict);
  out += " (";
  out += pnmem::to_string(r.reason);
  out += "): ";
  // pnmem_explain's words for this kind of answer (the level is a line of its own here).
  const std::string words = pnmem::detail::answer_words(a);
  if (!words.empty()) return out + words;
  if (r.die != pnmem::no_die) out += "on die " + std::to_string(r.die) + ": ";
  return out + "need " + pnmem::format_need_bytes(r.need_bytes) + ", limit " + pnmem::format_limit_bytes(r.limit_bytes);
}
}  // namespace

std::string verdict_line(std::string_view label, const pnmem::admit_result& r, pnmem::answer_kind kind) {
  return verdict_line_of(label, r, pnmem::answer_from(r, kind, pnmem::mem_level::ok));
}

std::string verdict_line(std::string_view label, const pnmem::admit_result& r, const pnmem::request_spec& rq) {
  pnmem::admit_answer a = pnmem::answer_from(r, pnmem::answer_kind::request, pnmem::mem_level::ok);
  a.request = rq;
  return verdict_line_of(label, r, a);
}

}  // namespace pnmem_cli
