// tools/pnmem/textfile_writer.hpp - a file replaced whole, the way node_exporter's textfile
// collector wants it (`pnmem watch --textfile`).
//
// write() puts the text in a temporary file in the target's own directory,
// ".<name>.tmp.<pid>" (not *.prom, so the collector never reads it), fsyncs it,
// renames it over the target and fsyncs the directory. A reader that opens the
// target gets the previous complete text or the new one, never a part of one. On
// a failure the temporary file is removed and the target keeps its previous text.
// POSIX only (open/fsync/rename), as the commands that read this box are.
#pragma once

#include <string>
#include <string_view>

namespace pnmem_cli {

class textfile_writer {
 public:
  // `target`: the file to replace. Nothing is touched until check() or write().
  explicit textfile_writer(std::string target);

  // Empty when the target can be written: its directory exists, the target is not
  // a directory, and a file can be created there (the temporary file, created and
  // removed at once). Otherwise what is wrong, with the errno text, e.g.
  // `directory "/var/lib/x": No such file or directory`.
  std::string check() const;

  // Replaces the target with `text`. Empty on success, otherwise
  // `<path>: <step>: <errno text>` (the temporary file already removed).
  std::string write(std::string_view text) const;

  const std::string& target() const { return target_; }
  const std::string& directory() const { return dir_; }
  const std::string& temp_path() const { return temp_; }

 private:
  std::string target_;
  std::string dir_;   // the target's directory ("." for a bare name)
  std::string temp_;  // dir_/.<name>.tmp.<pid>
};

}  // namespace pnmem_cli
