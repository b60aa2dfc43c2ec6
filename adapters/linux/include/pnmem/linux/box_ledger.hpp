// pnmem/linux/box_ledger.hpp - the box book (engine/box_book.hpp) in a file every process of a box maps.
//
// Where. A file on a tmpfs the processes share, by default /dev/shm/pnmem-ledger-<uid>-<scope>: the
// processes that share /dev/shm (one IPC namespace: a container, a pod whose containers mount one
// memory-backed volume there, a bare host) and the same memory cgroup limit (<scope> is the limiting
// cgroup's, or "box" where none limits) share one. PN_LEDGER says otherwise:
//
//   PN_LEDGER unset, "" or "auto"   the default scope above
//   PN_LEDGER=off                   no box book: each process's ledger counts only its own promises
//   PN_LEDGER=NAME                  /dev/shm/pnmem-ledger-NAME (letters, digits, '-', '_', '.'; up to 64)
//   PN_LEDGER=/an/absolute/path     that file (a volume the processes share, e.g. in a pod)
//
// Who. The file is made 0600 by its first user; PN_LEDGER_GROUP=GROUP makes it 0660 and that group's, so
// the group's members may join (a box whose engines run as several users). A file that is not this
// user's (or, with a group, that group's), is a link, has world access, is of another size or
// version, or holds impossible figures is refused: one line says why, and the process counts in its own
// ledger, as with PN_LEDGER=off. One exception: a ledger of another pnmem version (its magic, another
// size, version or layout) that no process holds (no lock on any byte of it: an upgrade's leftover in a
// /dev/shm that outlived its engines) is replaced by a fresh one, quietly, under a lock on the whole
// file; while a process of that version holds it, it is refused (two versions cannot share one book).
//
// Liveness. Each holder (one joined ledger) holds an open-file-description lock on one byte of the
// file (F_OFD_SETLK): the kernel drops it when the process dies, however it dies (SIGKILL, the OOM
// killer) and whatever its pid namespace, and keeps it while the process is stopped (SIGSTOP). Any
// ledger's answers look for dead holders (F_OFD_GETLK on their bytes) at most every 100 ms of sample
// time and free them: their unsettled bytes stop counting. The segment's lock is a process-shared,
// robust mutex: a process that dies holding it hands it on (the next owner frees the dead and counts the
// totals again), and a lock that cannot be had within a second (a holder stopped while holding it, or
// bytes that are no lock) makes the ledger leave the box, saying so, rather than wait.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pnmem/engine/box_book.hpp"

namespace pnmem::linux_os {

struct box_options {
  std::string ledger;              // PN_LEDGER's value ("" = auto)
  std::string group;               // PN_LEDGER_GROUP's value ("" = none: the file is 0600)
  std::string dir = "/dev/shm";    // where the default and named scopes' files are
  std::string limit_cgroup;        // the memory cgroup that limits this process ("" = none): the default scope
  std::uint64_t box_total_bytes = 0;  // the host's memory (0 = unknown): bounds what a segment may promise
  std::chrono::milliseconds lock_timeout{1000};  // the most the segment's lock is waited for
  std::function<void(std::string_view)> log;     // where a line goes (empty: stderr)
};

// The options from PN_LEDGER and PN_LEDGER_GROUP (read now), with the rest as given.
box_options box_options_from_env(box_options base = {});

// The file a scope names ("" when PN_LEDGER=off), or a problem with the value.
struct box_path {
  std::string path;
  std::string problem;  // PN_LEDGER's value is not a scope: empty, or what is wrong with it
  bool off = false;
};
box_path box_path_for(const box_options& o);

// Joins the box book: opens (or makes) the scope's file, checks it, takes a holder slot. `link` is null
// when PN_LEDGER=off (off) or the file was refused or could not be used (`problem` says why, in a line
// that names the file). The link's lock, unlock and reap are this adapter's; it leaves the book (frees
// its slot) when the last copy of the pointer goes.
struct box_join {
  std::shared_ptr<box_link> link;
  std::string path;
  std::string problem;
  bool off = false;
};
box_join join_box(const box_options& o);

// What `pnmem ledger` shows: the segment as it is (dead holders freed first), read under its lock by a
// process that does not join it.
struct box_holder_view {
  std::uint32_t index = 0;
  box_holder holder{};
  std::uint64_t settled_unseen_bytes = 0;   // its settles the box's newest sample has not seen
  std::uint64_t credited_unseen_bytes = 0;  // its credits likewise
};
// One GPU of the book: what every holder reserved on it and settled that its newest read has not seen,
// their retiring bytes there, and each holder's reservations on it.
struct box_die_view {
  die_uuid uuid;
  std::uint64_t reserved_bytes = 0;
  std::uint32_t reservations = 0;
  std::uint64_t settled_unseen_bytes = 0;
  std::uint64_t retiring_bytes = 0;
  struct holding {
    std::int32_t pid = 0;
    std::uint64_t reserved_bytes = 0;
    std::uint32_t reservations = 0;
    std::uint64_t retiring_bytes = 0;
  };
  std::vector<holding> holders;  // those with something on it
};
struct box_view {
  std::string path;
  std::string scope;
  std::int64_t now_ns = 0;
  std::int64_t last_sample_ns = 0;
  std::uint64_t unsettled_bytes = 0;
  std::uint64_t settled_unseen_bytes = 0;
  std::uint64_t credited_unseen_bytes = 0;
  std::uint32_t owner_uid = 0;
  std::vector<box_holder_view> holders;
  std::vector<box_die_view> dies;
};
struct box_read {
  std::optional<box_view> view;
  std::string problem;  // why there is no view: no such file (the scope has no holder yet), or refused
  bool missing = false;
};
box_read read_box(const box_options& o);

}  // namespace pnmem::linux_os
