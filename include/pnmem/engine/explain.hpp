// pnmem/engine/explain.hpp - an answer in one line, in the words of what was asked.
//
// Every line starts "<status> (<reason>): " (a log can be grepped for "denied (host_reserve)"), then
// says what the numbers mean for that kind of answer (admit_answer::kind), then the level:
//
//   request     admitted (fits): 8192 tokens need 1.25 GiB (1342177280 B) of the 17.72 GiB (...) there is room for, level ok
//               capped (host_budget): 4962 tokens fit: the prompt needs 7.06 GiB (...), the host has
//                 2.80 GiB (...) above its reserve, level ok
//               denied (host_reserve): nothing may start: the host's available memory, 169.00 MiB (...),
//                 is inside its reserve, level critical
//   host_bytes  capped (host_budget): 94.16 GiB (...) does not fit, 19.52 GiB (...) would (above the host
//                 reserve): nothing was reserved, level ok
//   die_bytes, model_load, load_slice, load_spike, cache_insert: the bytes asked and what the die or
//               host has (cache_insert: above the WATCH floor, host_ledger::make_room).
//
// A fail-open answer says why nothing was checked and has no level; pending bytes (host_ledger's
// answers) follow as ", pending 64.00 MiB (67108864 B)". docs/c-api.md shows one line of every kind
// and reason, and tests/c/test_c_explain.c produces each of them and checks it against that page.
// A status and reason that pnmem never pairs for a kind (an answer edited by hand) read as the
// numbers alone: "capped (fits): need ..., limit ..., fit N tokens, die D, level L".
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>

#include "pnmem/engine/admit.hpp"
#include "pnmem/format.hpp"

namespace pnmem {

namespace detail {

// "1.25 GiB (1342177280 B)"; 2^64-1 as format_need_bytes / format_limit_bytes say it.
inline std::string exact_bytes(std::uint64_t b, bool is_limit = false) {
  if (b == std::numeric_limits<std::uint64_t>::max()) return is_limit ? format_limit_bytes(b) : format_need_bytes(b);
  char exact[32];
  std::snprintf(exact, sizeof exact, "%" PRIu64 " B", b);
  return format_bytes(b) + " (" + exact + ")";
}

// The words after "<status> (<reason>): ", or empty when pnmem never gives this status and reason
// for this kind of answer.
inline std::string answer_words(const admit_answer& a) {
  const std::uint64_t need = a.detail.need_bytes;
  const std::uint64_t limit = a.detail.limit_bytes;
  const std::string needs = exact_bytes(need);
  const std::string room = exact_bytes(limit, true);
  const std::string tokens = format_count(a.fit_tokens, "token");
  const std::string die = "die " + std::to_string(a.die);
  const std::string inside_reserve = "the host's available memory, " + room + ", is inside its reserve";
  const bool unlimited = limit == std::numeric_limits<std::uint64_t>::max();
  const admit_status st = a.status;
  const admit_reason r = a.reason;
  using S = admit_status;
  using R = admit_reason;

  if (st == S::fail_open) {
    if (r == R::not_watching) return "no watcher is running: nothing was checked";
    if (r == R::not_sampled) return "the host's memory could not be read (pnmem probe says which file): nothing was checked";
    return {};
  }
  switch (a.kind) {
    case answer_kind::request: {
      // What the admitted tokens cost the host: nothing for a GPU-resident model or a preallocated cache.
      const std::string cost = need == 0 ? std::string()
                               : unlimited ? "; they need " + needs + ", no limit known"
                                           : "; they need " + needs + " of the " + room + " there is room for";
      if (st == S::admitted && r == R::fits) {
        if (need == 0) return tokens + ", needing no more host memory";
        if (unlimited) return tokens + " need " + needs + ", no limit known";
        return tokens + " need " + needs + " of the " + room + " there is room for";
      }
      if (st == S::capped && r == R::window) {
        // The prompt is longer than the model's window. The tokens that start now are the window, or
        // the ladder's prefill window below it at TIGHT and worse (a.request says which, when it is known).
        const int configured = a.request.max_window;
        if (configured > 0 && a.fit_tokens < configured) {
          return tokens + " now, the ladder's prefill window at this level: the prompt is longer than the model's window, " +
                 format_count(configured, "token") + cost;
        }
        if (configured > 0) return tokens + ", the model's window: the prompt is longer" + cost;
        return tokens + " start now: the prompt is longer than the model's window" + cost;
      }
      if (st == S::capped && r == R::prefill_window) {
        return tokens + " now, the ladder's prefill window at this level: the rest of the prompt in later chunks" + cost;
      }
      if (r == R::host_budget && (st == S::capped || st == S::denied)) {
        return (st == S::capped ? tokens + " fit" : std::string("no tokens fit")) + ": the prompt needs " + needs +
               ", the host has " + room + " above its reserve";
      }
      if (r == R::die_vram && (st == S::capped || st == S::denied)) {
        return (st == S::capped ? tokens + " fit" : std::string("no tokens fit")) + ": the prompt needs " + needs +
               ", " + die + " has " + room + " free";
      }
      if (st == S::denied && r == R::host_reserve) return "nothing may start: " + inside_reserve;
      if (st == S::denied && r == R::psi_stall) {
        return "nothing may start: the box is stalled on memory (PSI full at or over the reject line)";
      }
      if (st == S::denied && r == R::bad_request) {
        return a.die == no_die ? std::string("a negative token or item count")
                               : die + " has not been fed, or a token or item count is negative";
      }
      return {};
    }
    case answer_kind::host_bytes:
      if (st == S::admitted && r == R::fits) return needs + " fits in the " + room + " above the host reserve";
      if (st == S::capped && r == R::host_budget) {
        return needs + " does not fit, " + room + " would (above the host reserve): nothing was reserved";
      }
      if (st == S::denied && r == R::host_reserve) return "none of " + needs + " fits: " + inside_reserve;
      return {};
    case answer_kind::die_bytes:
      if (st == S::admitted && r == R::fits) return needs + " fits in the " + room + " free on " + die + " above its reserve";
      if (st == S::denied && r == R::die_vram) {
        return needs + " does not fit in the " + room + " free on " + die + " above its reserve";
      }
      if (st == S::denied && r == R::bad_request) return die + " has not been fed: no budget is known";
      return {};
    case answer_kind::model_load:
    case answer_kind::load_slice: {
      const bool whole = a.kind == answer_kind::model_load;
      const std::string what = whole ? "the load (weights, KV at the longest context, scratch) needs " + needs
                                     : "the slice (its weights and KV, scratch) needs " + needs;
      const std::string has = room + " free above its reserve";
      if (st == S::admitted && r == R::fits) return what + ", " + die + " has " + has;
      if (st == S::denied && r == R::die_vram) return what + ", " + die + " has only " + has;
      if (st == S::denied && r == R::bad_request) {
        return a.die == no_die ? std::string("no die has been fed: no budget is known")
                               : die + " has not been fed: no budget is known";
      }
      return {};
    }
    case answer_kind::load_spike:
      if (st == S::admitted && r == R::fits) return "the load's host spike, " + needs + ", fits in the " + room + " above the host reserve";
      if (st == S::denied && r == R::host_budget) {
        return "the load's host spike, " + needs + ", needs more than the " + room + " above the host reserve";
      }
      if (st == S::denied && r == R::host_reserve) return "the load's host spike, " + needs + ", cannot start: " + inside_reserve;
      return {};
    case answer_kind::cache_insert:
      if (st == S::admitted && r == R::fits) {
        return "the insert, " + needs + ", fits in the " + room + " the host has above WATCH's floor";
      }
      if (st == S::capped && r == R::host_budget) {
        return "the insert, " + needs + ", does not fit with the host at WATCH or better: it has " + room +
               " above WATCH's floor after what the cache freed: nothing was reserved";
      }
      if (st == S::denied && r == R::host_reserve) return "the insert, " + needs + ", cannot be made: " + inside_reserve;
      return {};
    case answer_kind::host_load: {
      const std::string what = "the load (fixed bytes and KV at the context asked) needs " + needs;
      const std::string has = room + " the host has above WATCH's floor";
      if (st == S::admitted && r == R::fits) return what + ", " + tokens + " of context, and fits in the " + has;
      if (st == S::capped && r == R::host_budget) return what + "; start it with " + tokens + " of context: that fits in the " + has;
      if (st == S::denied && r == R::host_budget) return what + "; not even its least context fits in the " + has;
      if (st == S::denied && r == R::host_reserve) return what + ", and cannot start: " + inside_reserve;
      if (st == S::denied && r == R::bad_request) return "a negative context, or a least context above the one asked";
      return {};
    }
  }
  return {};
}

}  // namespace detail

// One line: "<status> (<reason>): <what it means for this kind of answer>, level <level>[, pending <bytes>]".
// pending_bytes: what host_ledger's answer says was promised before it (its admission::pending_bytes).
inline std::string explain(const admit_answer& a, std::uint64_t pending_bytes = 0) {
  std::string line = std::string(to_string(a.status)) + " (" + std::string(to_string(a.reason)) + "): ";
  std::string words = detail::answer_words(a);
  if (words.empty()) {  // not a pairing pnmem makes: the numbers alone
    words = "need " + detail::exact_bytes(a.detail.need_bytes) + ", limit " +
            detail::exact_bytes(a.detail.limit_bytes, true) + ", fit " + format_count(a.fit_tokens, "token") + ", die " +
            std::to_string(a.die);
  }
  line += words;
  if (a.status != admit_status::fail_open) line += ", level " + std::string(to_string(a.level));
  if (pending_bytes != 0) line += ", pending " + detail::exact_bytes(pending_bytes);
  return line;
}

}  // namespace pnmem
