// pnmem/pnmem.hpp - the whole policy library.
//
// Header-only, standard library only. The decision headers (level, ladder,
// cost_model, model_shape, admission, parse, eviction_budget, eviction_admission) have no heap, no locks and no
// exceptions, and every decision is usable in a constant expression; keep_set (rung 4b's token
// selection) allocates nothing either and works on the caller's buffers. config.hpp and format.hpp
// allocate and are meant for start-up and logging.
#pragma once

#include "pnmem/admission.hpp"
#include "pnmem/config.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/eviction_admission.hpp"
#include "pnmem/eviction_budget.hpp"
#include "pnmem/format.hpp"
#include "pnmem/host_sample.hpp"
#include "pnmem/keep_set.hpp"
#include "pnmem/kv_format.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/level.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/model_shape.hpp"
#include "pnmem/parse.hpp"
#include "pnmem/policy.hpp"
#include "pnmem/provenance.hpp"
#include "pnmem/units.hpp"
#include "pnmem/version.hpp"
