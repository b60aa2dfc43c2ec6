// tools/pnmem/subcommand.cpp
#include "subcommand.hpp"

#include <CLI/CLI.hpp>

namespace pnmem_cli {

bool subcommand::selected() const { return app_ != nullptr && app_->parsed(); }

}  // namespace pnmem_cli
