/* pnmem/pnmem_c.h - the C ABI, for engines written in C (C11).
 *
 * One process-wide watcher over the platform's sampler (Linux: /proc, PSI,
 * cgroups), configured from the PN_* environment variables, and the engine's
 * questions about it: admit a request or a number of host bytes, plan the
 * ladder, feed a die, read the snapshot, the policy and the host budget, and
 * be told when the level changes. Link with -lpnmem_c. Every call is thread-safe.
 *
 * Errors: no call throws, crashes on a NULL or out-of-range argument, or hands
 * such a value to the C++ library. A call that fails returns its error value,
 * documented with it (-1, NULL, PNMEM_GATE_ERROR, ...); a call with no result
 * does nothing. A failure inside pnmem (no memory, a thread that cannot be
 * started or joined, an exception from the log sink) and a struct refused
 * field by field (pnmem_model, pnmem_watcher_options) also log one line,
 * "pnmem: <function>: <what>", through the log sink.
 *
 *   pnmem_set_log_sink(my_log, my_user);              // first: startup errors reach it
 *   pnmem_watcher_options wo;
 *   pnmem_watcher_options_init(&wo);                  // struct_size and the defaults
 *   wo.step_down_dwell_ms = 5000;                     // levels go down only after 5 s
 *   if (pnmem_watcher_start_with(&wo) != 0) { ... }   // fail open if it never starts
 *
 *   pnmem_model m;
 *   pnmem_model_init(&m);                             // struct_size; the cost is the engine's to give
 *   char err[256];
 *   if (pnmem_model_cost_from_json(json, json_len, &m, err, sizeof err) != 0) { ... err ... }
 *   m.kv = PNMEM_KV_F16;                              // the format this engine's KV cache is in
 *   m.max_window = 16384;
 *   m.max_slots = 8;
 *   pnmem_admit_answer a;
 *   pnmem_admit(&m, n_prompt_tokens, &a);
 *   if (a.status == PNMEM_DENIED) {
 *     char line[256];
 *     pnmem_explain(&a, line, sizeof line);           // "denied (host_budget): no tokens fit: ..."
 *   }
 *
 * Locks. The watcher samples on its own thread and publishes each snapshot
 * through a seqlock: reading it takes no lock and never waits for a sample in
 * progress. Each call below says what it locks:
 *   - nothing: the call takes no lock and does not wait for any other call;
 *   - the ledger's mutex: the reservations' book (pnmem_admit_reserved,
 *     pnmem_reserve_bytes, ...), held for a few hundred nanoseconds, never
 *     during a sample or a callback;
 *   - the handles' mutex: the C reservation handles (taken before the ledger's);
 *   - the watcher's write lock: the writers of the snapshot (the poll thread,
 *     pnmem_set_die, pnmem_watcher_poll_now) one at a time; readers never take it;
 *   - the lifecycle mutex: creating, starting and stopping the watcher, and the
 *     first read of the PN_* environment.
 * A call that logs hands the line to the sink on the caller's thread with no lock
 * held (the sink may be called from several threads at once).
 */
#ifndef PNMEM_PNMEM_C_H
#define PNMEM_PNMEM_C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The library exports these functions and nothing else (it is built with hidden visibility). */
#if defined(__GNUC__) || defined(__clang__)
#define PNMEM_C_API __attribute__((visibility("default")))
#else
#define PNMEM_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define PNMEM_MAX_DIES 16

typedef enum pnmem_level {
  PNMEM_LEVEL_OK = 0,
  PNMEM_LEVEL_WATCH = 1,
  PNMEM_LEVEL_TIGHT = 2,
  PNMEM_LEVEL_CRITICAL = 3
} pnmem_level;

/* A copy of the live snapshot (the C++ mem_state's fields). */
typedef struct pnmem_state {
  uint64_t host_total_bytes;
  uint64_t host_avail_bytes;
  double host_psi_some_avg10;
  double host_psi_full_avg10;
  double host_psi_some_rate;
  double host_psi_full_rate;
  uint64_t cgroup_current_bytes;
  uint64_t cgroup_high_bytes;
  uint64_t cgroup_max_bytes;
  int n_dies;
  uint64_t per_die_free[PNMEM_MAX_DIES];
  uint64_t per_die_budget[PNMEM_MAX_DIES];
  uint64_t per_die_used[PNMEM_MAX_DIES];
  uint64_t per_die_retiring[PNMEM_MAX_DIES];
  pnmem_level level;
  pnmem_level raw_level;
  uint64_t seq;
  int64_t sample_time_ns;
} pnmem_state;

/* --- The watcher -------------------------------------------------------------------
 *
 * Created once, by the first pnmem_watcher_start, pnmem_watcher_start_with or
 * pnmem_set_die, with the settings from the PN_* variables (the policy, and the PSI
 * source PN_PSI_SOURCE; read once, by the first pnmem call; a bad value is logged
 * through the sink and its default kept), and never destroyed while the process runs:
 * stopping it stops its thread, and the last snapshot stays readable.
 *
 * After fork() the child's watcher is not running (its poll thread stayed in the parent): admissions
 * fail open there, and the first one logs why, until pnmem_watcher_start starts it in the child. Do
 * not fork from inside a pnmem callback (docs/engine-integration.md, "Forked workers").
 *
 * The options are those it was created with. Defaults (pnmem_watcher_options_init,
 * and what pnmem_watcher_start uses), as the C++ watcher's (pnmem::watcher_options):
 * the PN_* variable's value where it is set, else the seed's:
 *   poll_interval_ms           250  sampling period at OK (PN_MEMWATCH_POLL_MS)
 *   pressure_poll_interval_ms  100  sampling period at WATCH or worse (PN_PRESSURE_POLL_MS)
 *   step_down_dwell_ms           0  a lower level is published at once (the seed;
 *                                   PN_STEP_DOWN_DWELL_MS). An engine whose box sits near
 *                                   a band's edge sees the level flap (e.g. OK <-> WATCH
 *                                   on every request's allocation): a dwell of a few
 *                                   seconds keeps a level until the lower one has held
 *                                   that long (levels still go up at once).
 *   ledger                  NULL  the box ledger (PN_LEDGER; see the field below)
 *   root                    NULL  the directory the Linux sampler reads /proc and /sys under
 *                                   (NULL or "/": the real ones). A container that watches its
 *                                   node through the host's /proc and /sys mounted at /host
 *                                   sets "/host", as `pnmem --root /host` does (and tests give
 *                                   a fixture tree). Copied when the watcher is created; at
 *                                   most 4095 bytes. Ignored where the platform's sampler
 *                                   reads no files (macOS). Added in 0.2: a caller built
 *                                   against the first header has no such field and gets "/".
 * An interval must be at least 1 ms. */
typedef struct pnmem_watcher_options {
  uint32_t struct_size; /* sizeof(pnmem_watcher_options) as the caller compiled it: pnmem_watcher_options_init */
  uint32_t poll_interval_ms;
  uint32_t pressure_poll_interval_ms;
  uint32_t step_down_dwell_ms;
  const char* root; /* the sampler's root directory; NULL = "/" */
  /* Since 0.3: the box ledger the reservations are counted in, shared with every pnmem process that
   * joins it (docs/multi-process.md): NULL = PN_LEDGER's value (unset: "auto", the processes that share
   * /dev/shm and this process's memory cgroup limit), "off" (this process's own), a name, or an
   * absolute path. Joined when the watcher starts (Linux); a segment refused is one log line, and the
   * process counts its own promises. At most 4095 bytes. */
  const char* ledger;
} pnmem_watcher_options;

/* Fills *options with the defaults above and struct_size = `struct_size`. 0 on success;
 * -1 for a NULL options or a struct_size smaller than the first version's (then nothing
 * is written). Call it through pnmem_watcher_options_init, which passes the caller's sizeof.
 * Locks nothing. */
PNMEM_C_API int pnmem_watcher_options_init_sized(pnmem_watcher_options* options, size_t struct_size);
static inline int pnmem_watcher_options_init(pnmem_watcher_options* options) {
  return pnmem_watcher_options_init_sized(options, sizeof *options);
}

/* Creates the watcher with these options if it does not exist yet, and starts it
 * (idempotent; one synchronous sample first). 0 on success. -1 (then pnmem_admit
 * fails open) if options is NULL, options->struct_size is 0 or smaller than the first
 * version's (a larger one, from a newer header, is read up to the fields this library
 * knows), an interval is 0, the watcher already exists with other options (created
 * by an earlier start or pnmem_set_die: call this first), or its thread could not
 * start. Each refusal logs a line naming the field. Locks the lifecycle mutex, and
 * delivers the first sample's level change to subscribers on the caller's thread. */
PNMEM_C_API int pnmem_watcher_start_with(const pnmem_watcher_options* options);
/* pnmem_watcher_start_with the defaults; a watcher that exists already (with any
 * options) is started as it is. 0 on success, -1 if it could not start. */
PNMEM_C_API int pnmem_watcher_start(void);
/* Stops the watcher's thread (idempotent); the last snapshot stays readable. Locks
 * the lifecycle mutex and joins the poll thread (waits for a sample in progress, and
 * for a level callback running on that thread). */
PNMEM_C_API void pnmem_watcher_stop(void);
/* false also when the state cannot be read. Locks nothing. */
PNMEM_C_API bool pnmem_watcher_running(void);
/* Samples now, on the caller's thread (nothing before the first start or set_die).
 * Takes the watcher's sampling and write locks, and delivers a level change to
 * subscribers on this thread. */
PNMEM_C_API void pnmem_watcher_poll_now(void);

/* Copies the latest snapshot (all zero before the watcher exists). 0 on success, -1
 * if out is NULL or on failure (*out is then not written). Locks nothing. */
PNMEM_C_API int pnmem_read(pnmem_state* out);

/* --- The snapshot with its provenance: where the host numbers came from ----------------
 *
 * pnmem_read's numbers, and what the sampler read to get them (pnmem::sample_provenance,
 * provenance.hpp): an operator can tell a box under pressure from a sampler that could
 * not see. Sources are bits, as pnmem::host_source: */
#define PNMEM_SOURCE_MEMINFO (1u << 0)         /* /proc/meminfo MemTotal, MemAvailable */
#define PNMEM_SOURCE_PSI (1u << 1)             /* /proc/pressure/memory */
#define PNMEM_SOURCE_CGROUP_USAGE (1u << 2)    /* memory.current | memory.usage_in_bytes */
#define PNMEM_SOURCE_CGROUP_LIMIT (1u << 3)    /* memory.max/high | memory.limit_in_bytes, over the ancestors */
#define PNMEM_SOURCE_CGROUP_STAT (1u << 4)     /* memory.stat (inactive_file) */
#define PNMEM_SOURCE_CGROUP_PRESSURE (1u << 5) /* the cgroup's memory.pressure (v2) */
#define PNMEM_SOURCE_MACOS_VM (1u << 6)        /* hw.memsize, host_statistics64 */
#define PNMEM_SOURCE_MACOS_PRESSURE (1u << 7)  /* kern.memorystatus_vm_pressure_level */
#define PNMEM_SOURCES 8                        /* sources are bits 0 .. PNMEM_SOURCES - 1 */
#define PNMEM_CGROUP_PATH_MAX 256              /* pnmem_snapshot.limit_cgroup, its NUL included */

/* How the cgroup was reached (pnmem::cgroup_mode). */
typedef enum pnmem_cgroup_mode {
  PNMEM_CGROUP_NONE = 0,
  PNMEM_CGROUP_V1 = 1,
  PNMEM_CGROUP_V2 = 2
} pnmem_cgroup_mode;

/* How PSI was read (pnmem::psi_mode). */
typedef enum pnmem_psi_mode {
  PNMEM_PSI_NONE = 0,
  PNMEM_PSI_POLL = 1,
  PNMEM_PSI_TRIGGER = 2
} pnmem_psi_mode;

typedef struct pnmem_snapshot {
  uint32_t struct_size; /* sizeof(pnmem_snapshot) as the caller compiled it: pnmem_snapshot_init sets it */
  pnmem_state state;    /* what pnmem_read copies, from the same snapshot as the fields below */
  uint32_t sources_read;   /* PNMEM_SOURCE_* bits that gave numbers */
  uint32_t sources_failed; /* PNMEM_SOURCE_* bits that exist but could not be read or parsed */
  pnmem_cgroup_mode cgroup_mode;
  pnmem_psi_mode psi_mode;
  uint64_t meminfo_total_bytes;      /* MemTotal as the kernel reports it (before the container) */
  uint64_t meminfo_avail_bytes;      /* MemAvailable as the kernel reports it */
  uint64_t cgroup_limit_bytes;       /* effective limit over the cgroup and its ancestors; 0 = none */
  uint64_t cgroup_working_set_bytes; /* usage - inactive_file of the limiting cgroup */
  /* Path (relative to the cgroup mount) of the cgroup whose limit is in force, NUL-terminated
   * and truncated to fit; "" when there is no limit. */
  char limit_cgroup[PNMEM_CGROUP_PATH_MAX];
  /* Since 0.2 (a caller built against the first header has none of these; they are not written):
   * which source put the level where it is, each as its own bands read it now (no hysteresis). The
   * ladder's evict rung follows memory_level, not psi_level (pnmem_plan_ladder_now, PN_EVICT_ON_PSI). */
  pnmem_level host_level;   /* the host byte bands (MemAvailable against the reserve) */
  pnmem_level psi_level;    /* PSI: box-wide where the kernel has no per-cgroup PSI (cgroup v1) */
  pnmem_level die_level;    /* the worst fed die */
  pnmem_level os_level;     /* the OS's own verdict (macOS memorystatus; OK elsewhere) */
  pnmem_level memory_level; /* the worst of host_level, die_level and os_level: memory actually short */
} pnmem_snapshot;

/* Zeroes the caller's struct_size bytes of *snapshot and sets struct_size = `struct_size`.
 * 0 on success; -1 for a NULL snapshot or a struct_size smaller than the first version's
 * (nothing is written). Call it through pnmem_snapshot_init, which passes the caller's
 * sizeof. Locks nothing. */
PNMEM_C_API int pnmem_snapshot_init_sized(pnmem_snapshot* snapshot, size_t struct_size);
static inline int pnmem_snapshot_init(pnmem_snapshot* snapshot) {
  return pnmem_snapshot_init_sized(snapshot, sizeof *snapshot);
}

/* Copies the latest snapshot and its provenance (all zero before the watcher exists) into
 * *out, whose struct_size says how large the caller's struct is (pnmem_snapshot_init). 0 on
 * success; -1 if out is NULL, out->struct_size is 0 or smaller than the first version's (a
 * line names the field), or on failure (*out is then not written). A larger struct_size (a
 * newer header) gets the fields this library knows, and the rest is left as it was;
 * struct_size is kept. Locks nothing.
 *
 *   pnmem_snapshot s;
 *   pnmem_snapshot_init(&s);
 *   if (pnmem_read_snapshot(&s) == 0 && !(s.sources_read & PNMEM_SOURCE_PSI)) { ... no PSI ... }
 */
PNMEM_C_API int pnmem_read_snapshot(pnmem_snapshot* out);

/* Feeds one die's numbers (after cudaMemGetInfo); creates the watcher (default options)
 * if none exists. 0 on success, -1 for a die id outside [0, PNMEM_MAX_DIES) or on
 * failure. Takes the watcher's write lock (the lifecycle mutex too, once, if it creates
 * the watcher), and delivers a level change to subscribers on this thread. */
PNMEM_C_API int pnmem_set_die(int die, uint64_t free_bytes, uint64_t budget_bytes, uint64_t used_bytes, uint64_t retiring_bytes);

/* --- The model: what a request runs on and what it costs ----------------------------- */

/* KV cache formats, as pnmem::kv_format (cost_model.hpp). Block formats include their
 * scales: q8_0 34 B per 32 values, q4_0 18 B per 32. PNMEM_KV_Q4 is the seed's own Q4. */
typedef enum pnmem_kv_format {
  PNMEM_KV_Q4 = 0,
  PNMEM_KV_FP32 = 1,
  PNMEM_KV_F16 = 2,
  PNMEM_KV_BF16 = 3,
  PNMEM_KV_FP8 = 4,
  PNMEM_KV_Q8_0 = 5,
  PNMEM_KV_Q4_0 = 6
} pnmem_kv_format;
#define PNMEM_KV_FORMATS 7
/* A format not given. pnmem_model_init leaves a model's kv so (its requests are priced in the model's
 * own format, normal_kv) and its normal_kv so (the cost was never set: see pnmem_model). */
#define PNMEM_KV_UNSET ((pnmem_kv_format)-1)
#define PNMEM_MAX_ACTIVATION_ANCHORS 8
#define PNMEM_MAX_KV_WINDOWS 4

typedef struct pnmem_activation_anchor {
  uint64_t tokens;
  uint64_t peak_bytes;
} pnmem_activation_anchor;

/* Layers that keep at most `window` tokens (pnmem::kv_window): bytes one token adds to them, per format. */
typedef struct pnmem_kv_window {
  uint64_t window;
  uint64_t bytes_per_token[PNMEM_KV_FORMATS];
} pnmem_kv_window;

/* A request's model: the request fields, then its cost (pnmem::model_cost, inline).
 * Initialise it with pnmem_model_init (struct_size and the request defaults) and then give it its
 * cost: pnmem_model_cost_from_json, _from_hf_config or _from_shape, or the cost fields and
 * normal_kv set by hand. pnmem_model_init leaves the cost unset (every cost 0, normal_kv
 * PNMEM_KV_UNSET), and a model whose normal_kv is still PNMEM_KV_UNSET is refused by every call
 * that takes it (-1, and a line saying its cost was never set): an engine that forgets its cost
 * is told so, instead of having its requests priced with another model's. The explicit starts:
 * pnmem_model_init_reference (the seed's model, pnmem::seed_model_cost, as pnmem_model_init
 * gave before 0.2) and pnmem_model_init_preallocated (every cost 0).
 * A model is refused (-1 and a line naming
 * the field) when struct_size is 0 or smaller than the first version's, a format is
 * not a pnmem_kv_format, die is outside [-1, PNMEM_MAX_DIES), n_anchors is above
 * PNMEM_MAX_ACTIVATION_ANCHORS, the anchors' tokens do not increase or their peaks
 * decrease, or both anchors and coefficients are given. A struct_size larger than
 * this header's (a newer header) is read up to the fields this library knows.
 *
 * The host cost of a prompt of n tokens in format f (cost_model.hpp):
 *   full_kv_bytes_per_token[f] x n + sliding_kv_bytes_per_token[f] x min(n, sliding_window)
 *   + more_windows[i].bytes_per_token[f] x min(n, more_windows[i].window), each i < n_more_windows
 *   + kv_bytes_per_encoder_item[f] x the request's encoder items (images; pnmem_admit_items)
 * with n rounded up to kv_block_tokens for the KV terms
 *   + state_bytes_per_seq + the activation peak at n (the anchor table when n_anchors > 0,
 *   interpolated rounding up and growing with n^2 past the last anchor; else
 *   activation_fixed_bytes + activation_per_token_bytes x n + activation_per_token_sq_bytes x n^2).
 * An engine that preallocates its KV and compute buffers at load sets every cost to 0
 * (n_anchors 0, the coefficients 0) and admits later growth with pnmem_reserve_bytes. */
/* What a request that needs no new host bytes (a GPU-resident model's, or one of an engine that allocated its
 * KV at load: pnmem_model_init_preallocated) gets while host memory is inside the reserve, where every other
 * request is refused ("host_reserve"). A PSI stall refuses it whatever the rule ("psi_stall").
 * docs/engine-integration.md argues the default. */
typedef enum pnmem_zero_cost {
  PNMEM_ZERO_COST_POLICY = 0, /* the process's rule: PN_ZERO_COST, hold unless set */
  PNMEM_ZERO_COST_HOLD = 1,   /* refused now (PNMEM_DENIED "host_reserve", need_bytes 0); pnmem_admit_wait waits up
                               * to its patience for the first sample above the reserve, a gate holds it (TIGHT)
                               * instead of shedding it */
  PNMEM_ZERO_COST_ADMIT = 2,  /* admitted now, 0 B needed: the engine vouches that it costs the host nothing */
  PNMEM_ZERO_COST_REJECT = 3  /* refused, and a gate sheds it (PNMEM_GATE_OVERLOADED): the seed's rule */
} pnmem_zero_cost;

typedef struct pnmem_model {
  uint32_t struct_size; /* sizeof(pnmem_model) as the caller compiled it: pnmem_model_init sets it */

  /* The request (defaults: the model's own KV format, not GPU-resident, no window, die -1, 1 slot). */
  pnmem_kv_format kv; /* the format of this model's KV cache (fixed at its allocation); PNMEM_KV_UNSET
                       * (the default): normal_kv, the model's own format (a bf16 model is priced in bf16) */
  int gpu_resident;   /* weights and KV on the die(s): the host pays nothing per token */
  int max_window;     /* configured context window; <= 0 = none */
  int die;            /* the die bounding the host path; -1 = the tightest measured die */
  int max_slots;      /* configured decode slots (below 1: 1) */

  /* The cost (pnmem_model_init: unset; pnmem_model_init_reference: the seed's model). Arrays indexed by
   * pnmem_kv_format. */
  uint64_t full_kv_bytes_per_token[PNMEM_KV_FORMATS];    /* full-attention layers */
  uint64_t sliding_kv_bytes_per_token[PNMEM_KV_FORMATS]; /* sliding-window layers */
  uint64_t sliding_window;      /* tokens a sliding layer keeps; 0 = none (they grow as full ones) */
  uint64_t state_bytes_per_seq; /* fixed per-sequence state (SSM / conv) */
  pnmem_kv_format normal_kv;    /* the model's own KV format */
  pnmem_kv_format compact_kv;   /* the one the ladder's rung 4a forces (model->kv == compact_kv: "Q4") */
  uint32_t n_anchors;           /* 1..8: the anchor table; 0: the coefficients */
  pnmem_activation_anchor anchors[PNMEM_MAX_ACTIVATION_ANCHORS];
  uint64_t activation_fixed_bytes;
  uint64_t activation_per_token_bytes;
  uint64_t activation_per_token_sq_bytes;

  /* Since version 2 (layer groups; a caller compiled against version 1 gets these defaults: none). */
  uint32_t n_more_windows; /* windows besides sliding_window: 0 to PNMEM_MAX_KV_WINDOWS - 1 */
  pnmem_kv_window more_windows[PNMEM_MAX_KV_WINDOWS - 1]; /* each window above sliding_window and
                                                          * the one before (a window is not 0) */
  uint64_t kv_bytes_per_encoder_item[PNMEM_KV_FORMATS];  /* cross-attention KV per image (Mllama) */
  uint32_t kv_block_tokens; /* KV allocated in blocks of this many tokens (vLLM 16, llama.cpp 256):
                             * n tokens are charged as n rounded up to a block; 0 or 1: per token */

  /* Since version 3 (a caller compiled against an earlier one gets PNMEM_ZERO_COST_POLICY). */
  pnmem_zero_cost zero_cost; /* what a request of this model that needs no host bytes gets while host memory
                              * is inside the reserve (pnmem_zero_cost) */
} pnmem_model;

/* Fills *model with the defaults above and struct_size = `struct_size`. 0 on success;
 * -1 for a NULL model or a struct_size smaller than the first version's (nothing is
 * written). Call it through pnmem_model_init, which passes the caller's sizeof.
 * Locks nothing. */
PNMEM_C_API int pnmem_model_init_sized(pnmem_model* model, size_t struct_size);
static inline int pnmem_model_init(pnmem_model* model) { return pnmem_model_init_sized(model, sizeof *model); }
/* As pnmem_model_init, with the seed's model as the cost (pnmem::seed_model_cost): for a caller that
 * means to price requests with the reference model, said in the code. */
PNMEM_C_API int pnmem_model_init_reference_sized(pnmem_model* model, size_t struct_size);
static inline int pnmem_model_init_reference(pnmem_model* model) {
  return pnmem_model_init_reference_sized(model, sizeof *model);
}

/* An engine that allocates its KV cache and compute buffers when the model loads (the
 * llama.cpp server, vLLM and SGLang size theirs at start-up; docs/engine-integration.md
 * lists which engines do) pays no host bytes per request: its requests are admitted on
 * pressure alone (a PSI stall, available memory inside the host reserve, the window,
 * the ladder's clamp), and what grows later (a prompt-cache entry, swapped KV) is asked
 * for with pnmem_reserve_bytes. This fills *model as pnmem_model_init does, but with
 * every cost 0 (pnmem::preallocated_model_cost): no KV, no state, no activation. Check
 * the preallocation itself once, with pnmem_check_bytes (host) or
 * pnmem_admit_model_load (a die). 0 on success; -1 as pnmem_model_init_sized. */
PNMEM_C_API int pnmem_model_init_preallocated_sized(pnmem_model* model, size_t struct_size);
static inline int pnmem_model_init_preallocated(pnmem_model* model) {
  return pnmem_model_init_preallocated_sized(model, sizeof *model);
}

/* Fills model's cost fields from a pnmem model description (JSON, version 1: what
 * `pnmem model` prints; adapters/model_files/.../model_json.hpp documents it), leaving
 * struct_size and the request fields (set model->kv to the format the engine's cache
 * is in). `json` need not be NUL-terminated: `len` bytes are read. 0 on success (err, if
 * given, gets ""); -1 if json or model is NULL, model->struct_size is not valid (as for
 * pnmem_admit), or the description is refused: then err (when not NULL and err_len > 0)
 * gets the message, truncated to err_len - 1 bytes and NUL-terminated, and *model is
 * not touched. Locks nothing. */
PNMEM_C_API int pnmem_model_cost_from_json(const char* json, size_t len, pnmem_model* model, char* err,
                                           size_t err_len);

/* --- Models from the files engines load, and from layer groups (model_shape.hpp) --------- */

/* Whose rule turns layer groups into costs: what the serving engine keeps of windowed layers and
 * recurrent state (model_shape.hpp explains each; pnmem::kv_engine). */
typedef enum pnmem_engine { PNMEM_ENGINE_EXACT = 0, PNMEM_ENGINE_VLLM = 1, PNMEM_ENGINE_LLAMA_CPP = 2 } pnmem_engine;

/* pnmem::engine_rule. Initialise it with pnmem_engine_rule_init (the exact rule and each engine's
 * defaults), then set the engine and what differs. Refused (-1, a line naming the field) when
 * struct_size is not valid, engine is not a pnmem_engine, or block_tokens, seqs or state_copies is 0. */
typedef struct pnmem_engine_rule {
  uint32_t struct_size;
  pnmem_engine engine;
  uint32_t block_tokens;       /* vllm: --block-size (16) */
  uint32_t max_batched_tokens; /* vllm: --max-num-batched-tokens (8192) */
  uint32_t ubatch_tokens;      /* llama.cpp: -ub (512) */
  uint32_t seqs;               /* llama.cpp: sequences sharing one unified cache (1) */
  uint32_t state_copies;       /* vllm: recurrent states per layer and sequence (1; 2 with prefix caching) */
  int ssm_state_fp32;          /* vllm: --mamba-ssm-cache-dtype float32 */
  /* Added after the first version (a caller built against that one is read as 0 here). */
  int mtp; /* vllm, exact: the model's MTP layers run as its speculative drafter and keep KV: the
            * readers (pnmem_model_cost_from_hf_config, ..._from_gguf) add them to the shape; refused
            * (naming the key) for a model with none pnmem can read, and with the llama.cpp rule */
  /* Added after that (version 3). */
  int hybrid_manager_off; /* vllm: --disable-hybrid-kv-cache-manager, or a vLLM that turns it off for chunked
                           * attention by itself (Llama 4; its log says "Disabling it, by default"): sliding
                           * and chunked layers hold the whole context; refused with another rule */
} pnmem_engine_rule;

PNMEM_C_API int pnmem_engine_rule_init_sized(pnmem_engine_rule* rule, size_t struct_size);
static inline int pnmem_engine_rule_init(pnmem_engine_rule* rule) {
  return pnmem_engine_rule_init_sized(rule, sizeof *rule);
}

typedef enum pnmem_layer_kind {
  PNMEM_LAYERS_FULL = 0,     /* attention over every token */
  PNMEM_LAYERS_SLIDING = 1,  /* the last `span` tokens */
  PNMEM_LAYERS_CHUNKED = 2,  /* the current chunk of `span` tokens */
  PNMEM_LAYERS_CROSS = 3,    /* an encoder's `span` tokens per item (image) */
  PNMEM_LAYERS_RECURRENT = 4 /* no KV: conv + SSM state per sequence */
} pnmem_layer_kind;
#define PNMEM_MAX_LAYER_GROUPS 8

/* pnmem::layer_group: `layers` layers that hold memory alike. */
typedef struct pnmem_layer_group {
  pnmem_layer_kind kind;
  uint32_t layers;
  uint32_t kv_heads;
  uint32_t key_dim;             /* values per head of a K row */
  uint32_t value_dim;           /* of a V row; 0: key_dim */
  int k_only;                   /* one row per token (MLA's latent), no V row */
  uint32_t span;                /* sliding: window; chunked: chunk; cross: encoder tokens per item */
  uint64_t conv_state_values;   /* recurrent: per layer and sequence */
  uint64_t ssm_state_values;    /* recurrent: per layer and sequence */
} pnmem_layer_group;

/* pnmem::model_shape. Initialise it with pnmem_model_shape_init (no groups, f16 KV and state, q4_0
 * compact, 256 MiB fixed activation, no side caches), then add groups. */
typedef struct pnmem_model_shape {
  uint32_t struct_size;
  uint32_t n_groups; /* 0 to PNMEM_MAX_LAYER_GROUPS */
  pnmem_layer_group groups[PNMEM_MAX_LAYER_GROUPS];
  uint32_t query_heads;            /* the activation formula's (cost_model.hpp) */
  uint32_t hidden_size;
  uint64_t fixed_activation_bytes;
  pnmem_kv_format normal_kv;        /* the KV cache's format */
  pnmem_kv_format compact_kv;       /* rung 4a's */
  pnmem_kv_format state_format;     /* the recurrent conv state's */
  pnmem_kv_format ssm_state_format; /* the recurrent SSM state's */

  /* Since version 2 (a caller compiled against version 1 gets none; pnmem_model_shape_from_hf_config
   * refuses to write a shape that has some into a version-1 struct). */
  uint32_t side_bytes[PNMEM_MAX_LAYER_GROUPS]; /* groups[i]'s caches beside the KV: bytes per token and
                                                * layer in their own format, the same whatever the KV's
                                                * (DeepSeek Sparse Attention's indexer keys: 132); 0: none */
} pnmem_model_shape;

PNMEM_C_API int pnmem_model_shape_init_sized(pnmem_model_shape* shape, size_t struct_size);
static inline int pnmem_model_shape_init(pnmem_model_shape* shape) {
  return pnmem_model_shape_init_sized(shape, sizeof *shape);
}

/* Each fills model's cost fields (as pnmem_model_cost_from_json: struct_size and the request
 * fields are left) from layer groups, a Hugging Face config.json (`len` bytes; Python's json:
 * NaN and Infinity read), the config.json at `path` (a file, or a model's directory holding one,
 * as a downloaded snapshot does; the message then starts with the file read), or a GGUF file's
 * metadata (only the metadata is read), under `engine`'s rule (NULL: the exact rule). 0 on
 * success; -1 if a pointer is NULL, a struct is not valid, or
 * the input is refused: then err (when not NULL and err_len > 0) gets the message naming the key
 * or field, truncated to err_len - 1 bytes and NUL-terminated, and *model is not touched.
 * Locks nothing. */
PNMEM_C_API int pnmem_model_cost_from_shape(const pnmem_model_shape* shape, const pnmem_engine_rule* engine,
                                            pnmem_model* model, char* err, size_t err_len);
PNMEM_C_API int pnmem_model_cost_from_hf_config(const char* json, size_t len, const pnmem_engine_rule* engine,
                                                pnmem_model* model, char* err, size_t err_len);
PNMEM_C_API int pnmem_model_cost_from_hf_config_file(const char* path, const pnmem_engine_rule* engine,
                                                     pnmem_model* model, char* err, size_t err_len);
PNMEM_C_API int pnmem_model_cost_from_gguf_file(const char* path, const pnmem_engine_rule* engine,
                                                pnmem_model* model, char* err, size_t err_len);
/* The layer groups a config.json holds (what pnmem_model_cost_from_hf_config derives the costs from). */
PNMEM_C_API int pnmem_model_shape_from_hf_config(const char* json, size_t len, pnmem_model_shape* shape, char* err,
                                                 size_t err_len);

typedef enum pnmem_admit_status {
  PNMEM_ADMITTED = 0,
  PNMEM_CAPPED = 1,
  PNMEM_DENIED = 2,
  PNMEM_FAIL_OPEN = 3
} pnmem_admit_status;

typedef struct pnmem_admit_answer {
  pnmem_admit_status status;
  int fit_tokens;     /* tokens that may start (0 for pnmem_reserve_bytes) */
  const char* reason; /* "fits", "window", "psi_stall", "host_reserve", "host_budget", "die_vram", "bad_request",
                       * "prefill_window", "not_watching", "not_sampled": "window" caps a prompt longer than
                       * the model's configured max_window (at any level), "prefill_window" one within it but
                       * longer than the ladder's clamped prefill window at TIGHT or worse (it fits once the
                       * box recovers); a PNMEM_FAIL_OPEN answer says why nothing was checked:
                       * "not_watching" (no watcher running: never started, stopped, or a fork's child),
                       * "not_sampled" (the host's memory could not be read: pnmem probe says which file).
                       * A string of pnmem's, recognised by its address (which also says what kind of answer
                       * this is, for pnmem_explain's words): copy the struct freely, never replace the pointer. */
  pnmem_level level;  /* the snapshot's level */
  int die;            /* the die checked, -1 for none */
  int window;         /* the window used, after the ladder's clamp */
  uint64_t need_bytes;
  uint64_t limit_bytes;
  uint64_t pending_bytes; /* reserved calls: promised to earlier reservations, not yet sampled */
} pnmem_admit_answer;

/* The seed's pn_admit, for the model's cost. 0 on success; -1 if model or out is NULL,
 * the model is refused (see pnmem_model: a line names the field), or on failure (*out
 * is then not written). A die in range that has not been fed, or a negative n_tokens,
 * is answered (PNMEM_DENIED, "bad_request"), not an error. Locks nothing (the ladder's
 * clamp line, at TIGHT or worse, goes to the sink on this thread). */
PNMEM_C_API int pnmem_admit(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out);

/* pnmem_admit, except that a refusal of a request that needs no host bytes while host memory is inside the
 * reserve (reason "host_reserve", need_bytes 0) under the zero-cost rule hold (model->zero_cost, or
 * PN_ZERO_COST: hold by default) waits, up to timeout_ms (below 0: 0; longer than 100 years: 100 years), for the
 * first watcher sample that lets it start, then answers on that sample; past the patience, the refusal as it
 * then stands (pnmem_retry_after_ms says when to ask again). Every other answer returns at once, as pnmem_admit's.
 * The calling thread blocks: call it where a request may wait (a request handler), not in a decode loop.
 * Counted in pnmem_metrics_text (pnmem_held_served_total, pnmem_held_timed_out_total). 0 on success; -1 as
 * pnmem_admit. */
PNMEM_C_API int pnmem_admit_wait(const pnmem_model* model, int n_tokens, int64_t timeout_ms, pnmem_admit_answer* out);

/* One line describing an answer in the words of what was asked (a request's tokens, host bytes, die
 * bytes, a model load, one die's slice of one, a load's host spike: docs/c-api.md shows every kind), e.g.
 *   capped (host_budget): 4962 tokens fit: the prompt needs 7.06 GiB (7583301632 B), the host has 2.80 GiB
 *   (3006477108 B) above its reserve, level ok
 * (", pending N (... B)" follows when pending_bytes is not 0), written to buf as snprintf
 * does: at most len - 1 characters and a NUL when len > 0. Returns the length of the whole
 * line (without the NUL), so a return >= len means it was truncated; buf may be NULL when
 * len is 0. -1 if a is NULL, or buf is NULL with len > 0. Fields outside their range
 * print as "invalid" (a reason not from pnmem as "?"), and such an answer is written field by field
 * ("need ..., limit ..., fit N tokens, level L, die D"). Locks nothing. */
PNMEM_C_API int pnmem_explain(const pnmem_admit_answer* a, char* buf, size_t len);

/* When asking again may get more: a suggested wait, in milliseconds, for an answer that was denied
 * or capped for memory, e.g. for an HTTP 503's Retry-After (seconds: pnmem_retry_after_seconds). Derived
 * from what pnmem sees now (include/pnmem/retry_hint.hpp):
 *   psi_stall       the time the full stall's avg10 and the policy's window need to fall below the
 *                   reject line if no new stall comes ("psi_decay");
 *   host_budget,    the bytes short at the rate MemAvailable has been rising ("host_recovery"), or
 *   host_reserve    the time reservations with a ttl_ms need to expire enough ("pending_expiry");
 *   die_vram        the next sample, when the die's retiring bytes cover it ("die_retiring");
 *   prefill_window  what is left of the step-down dwell once the raw level is below TIGHT ("level_dwell");
 * and otherwise a guess from how long the level has held (pnmem_retry_basis_is_guess says 1): with
 * memory flat, as long again, at least 1000 ("no_recovery"); with memory still falling (something
 * growing), as long, at least 10000 ("memory_falling"); 10000 when the level's age is unknown. Always from the watcher's
 * poll interval at pressure (the next sample) to 60000; never negative. 0 ("none") for an answer a
 * wait does not improve: admitted, fail open, capped to the request's own window, bad_request;
 * 0 ("never_fits") for a need larger than the box (host total less the reserve) or the die (its
 * budget) could give with all of it free: refuse it for good (HTTP 413 or 507, not 503).
 * A hint, not a promise: the retry is a new decision.
 * basis, when not NULL, gets the name above (a static string). -1 if a is NULL, or its status or
 * reason is not one pnmem wrote (a line names the field; pass the answer as pnmem returned it).
 * Locks the ledger's mutex for a host_budget or host_reserve answer (to read the reservations'
 * expiries); otherwise nothing. */
PNMEM_C_API int64_t pnmem_retry_after_ms(const pnmem_admit_answer* a, const char** basis);
/* A hint in milliseconds as an HTTP Retry-After's whole seconds: rounded up (500 -> 1, 1000 -> 1,
 * 1001 -> 2), so any wait is at least 1 s; 0 and negative values are 0. Locks nothing. */
PNMEM_C_API int64_t pnmem_retry_after_seconds(int64_t after_ms);
/* 1 when a hint with this basis (pnmem_retry_after_ms's) is only a guess ("no_recovery", "memory_falling":
 * nothing pnmem sees is coming back, so it rests on how long the pressure has held), 0 otherwise (an
 * estimate from a rate, a deadline or the next sample; "none"; NULL; a name that is not a basis). A server
 * may say so (a log line, a header of its own). Locks nothing. */
PNMEM_C_API int pnmem_retry_basis_is_guess(const char* basis);

/* --- Model loads: before weights go onto a die, before an upload starts ----------------
 *
 * The seed's pn_admit_model_load, pn_admit_model_load_die and pn_admit_load_spike on the
 * live snapshot (the dies fed with pnmem_set_die), with the environment's policy (die
 * reserve, die scratch and load spike: pnmem_policy_get), answered as pnmem_admit answers
 * (pnmem_explain prints them):
 *   PNMEM_ADMITTED   "fits": need_bytes <= limit_bytes;
 *   PNMEM_DENIED     "die_vram": need_bytes > limit_bytes (the die's free VRAM, less the
 *                    die reserve for a whole model); "bad_request": no die to load onto
 *                    (none fed, or one in range that was not fed); for the load spike,
 *                    "host_reserve" (available memory already inside the host reserve) or
 *                    "host_budget" (the burst does not fit whole above it);
 *   PNMEM_FAIL_OPEN  no watcher runs: nothing is known, nothing is refused (as pnmem_admit).
 * fit_tokens and window are 0; level is the snapshot's; die is the die checked (-1: none).
 * Since 0.3 a die's free VRAM is counted less what is promised on it and not yet in a
 * sample of it (pending_bytes): this process's die reservations (pnmem_reserve_die_bytes,
 * the _reserved loads), and, for a die named by its GPU's UUID (pnmem_set_die_uuid), every
 * process's of the box ledger on the same GPU.
 *
 *   pnmem_model_load l;
 *   pnmem_model_load_init(&l);                        // struct_size, die -1: the roomiest die
 *   l.weights_bytes = weights;
 *   l.kv_bytes = kv_at_max_context;                   // pnmem_kv_allocation_for x sequences
 *   pnmem_admit_answer a;
 *   pnmem_admit_model_load(&l, &a);
 *   if (a.status == PNMEM_DENIED) { ... pnmem_explain(&a, line, sizeof line) ... }
 *   pnmem_admit_load_spike(&a);                       // the host staging burst, before the upload
 *
 * A model load is refused (-1 and a line naming the field) when struct_size is 0 or smaller
 * than the first version's, or die is outside [-1, PNMEM_MAX_DIES); a larger struct_size
 * (a newer header) is read up to the fields this library knows. */
typedef struct pnmem_model_load {
  uint32_t struct_size;   /* sizeof(pnmem_model_load) as the caller compiled it: pnmem_model_load_init sets it */
  uint64_t weights_bytes; /* the weights (pnmem_admit_model_load_die: this die's slice of them) */
  uint64_t kv_bytes;      /* the KV cache at its maximum context, every sequence (or this die's slice) */
  int die;                /* the die; -1 (default): pnmem_admit_model_load picks the measured die with
                           * the most free VRAM, pnmem_admit_model_load_die answers "bad_request" */
} pnmem_model_load;

/* Fills *load with the defaults (0 bytes, die -1) and struct_size = `struct_size`. 0 on
 * success; -1 for a NULL load or a struct_size smaller than the first version's (nothing is
 * written). Call it through pnmem_model_load_init, which passes the caller's sizeof.
 * Locks nothing. */
PNMEM_C_API int pnmem_model_load_init_sized(pnmem_model_load* load, size_t struct_size);
static inline int pnmem_model_load_init(pnmem_model_load* load) {
  return pnmem_model_load_init_sized(load, sizeof *load);
}

/* A whole model onto one die: weights + KV + the die scratch (pnmem_policy's die_scratch_bytes,
 * 1.5 GiB) must fit in the die's free VRAM less the die reserve (PN_DIE_RESERVE_BYTES). 0 on success; -1 if
 * load or out is NULL, the load is refused, or on failure (*out is then not written).
 * Locks the ledger's mutex. */
PNMEM_C_API int pnmem_admit_model_load(const pnmem_model_load* load, pnmem_admit_answer* out);
/* One die's slice of a model split over several dies: the slice (weights + KV) + the die
 * scratch must fit in load->die's free VRAM less the die reserve, as a whole load's must (the
 * seed's slice kept no reserve: docs/design.md). Returns as
 * pnmem_admit_model_load. Locks the ledger's mutex. */
PNMEM_C_API int pnmem_admit_model_load_die(const pnmem_model_load* load, pnmem_admit_answer* out);
/* The host dequant/staging burst of a weight upload (PN_LOAD_SPIKE_BYTES, 2.4 GiB by
 * default) must fit whole in host memory above the reserve before the upload starts:
 * need_bytes is the burst, limit_bytes the bytes above the reserve (the available bytes
 * on "host_reserve"). 0 on success; -1 if out is NULL or on failure (*out is then not
 * written). Locks nothing. */
PNMEM_C_API int pnmem_admit_load_spike(pnmem_admit_answer* out);

/* --- Reservations: memory admitted is not free until a sample has seen it ---------------
 *
 * pnmem_admit_reserved answers as pnmem_admit on MemAvailable minus the bytes promised
 * to earlier reservations that no sample has seen yet, and, when the request may start
 * on the host path, sets *reservation (else 0). After the request's prefill memory is
 * allocated, pnmem_reservation_settle(r); if it never is (shed, failed),
 * pnmem_reservation_cancel(r). Each reservation is settled or cancelled once; 0 and
 * unknown values are ignored. pnmem_admit_reserved returns as pnmem_admit, and -1 if
 * reservation is NULL; on -1 nothing is reserved. Locks the ledger's mutex, then the
 * handles' mutex.
 *
 *   pnmem_reservation r;
 *   pnmem_admit_reserved(&m, n, &a, &r);
 *   if (a.status == PNMEM_ADMITTED || a.status == PNMEM_CAPPED) {
 *     allocate_kv_and_activations(a.fit_tokens);
 *     pnmem_reservation_settle(r);
 *   }
 */
typedef uint64_t pnmem_reservation;
PNMEM_C_API int pnmem_admit_reserved(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out,
                         pnmem_reservation* reservation);

/* One request, for pnmem_admit_request: its prompt tokens and the encoder items (images) it carries,
 * whose cross-attention KV it holds (pnmem_model's kv_bytes_per_encoder_item each). Initialise it with
 * pnmem_request_init (0 tokens, no items). */
typedef struct pnmem_request {
  uint32_t struct_size;
  int n_tokens;
  int encoder_items; /* a negative count is answered (PNMEM_DENIED, "bad_request") */
} pnmem_request;

PNMEM_C_API int pnmem_request_init_sized(pnmem_request* request, size_t struct_size);
static inline int pnmem_request_init(pnmem_request* request) { return pnmem_request_init_sized(request, sizeof *request); }

/* pnmem_admit (reservation NULL) or pnmem_admit_reserved (reservation not NULL) for a request that may
 * carry encoder items. The same returns and locks as those. */
PNMEM_C_API int pnmem_admit_request(const pnmem_model* model, const pnmem_request* request, pnmem_admit_answer* out,
                                    pnmem_reservation* reservation);

/* Host bytes the engine is about to allocate besides a request's own KV and activations
 * (a prompt-cache entry, swapped KV, a staging buffer), on the same budget:
 *   PNMEM_ADMITTED   reserved (*reservation != 0; 0 for bytes 0): allocate, then settle
 *                    (or cancel if the allocation does not happen);
 *   PNMEM_CAPPED     nothing reserved: out->limit_bytes is how many bytes fit now
 *                    ("host_budget");
 *   PNMEM_DENIED     nothing reserved: available memory is inside the host reserve
 *                    ("host_reserve");
 *   PNMEM_FAIL_OPEN  no watcher runs: nothing is known and nothing is reserved.
 * out->need_bytes = bytes, out->pending_bytes = the bytes promised before this call.
 * ttl_ms > 0: a reservation neither settled nor cancelled within ttl_ms stops counting
 * (and its handle is forgotten: settling or cancelling it later is ignored), so one
 * taken on an HTTP thread and lost cannot leak; ttl_ms <= 0: it never expires. 0 on
 * success; -1 if out or reservation is NULL, or on failure (nothing is reserved, *out is
 * not written, *reservation is 0). Locks the ledger's mutex, then the handles' mutex.
 *
 *   pnmem_reservation r;
 *   pnmem_reserve_bytes(entry_bytes, 30000, &a, &r);
 *   if (a.status == PNMEM_ADMITTED || a.status == PNMEM_FAIL_OPEN) { cache_insert(); pnmem_reservation_settle(r); }
 */
PNMEM_C_API int pnmem_reserve_bytes(uint64_t bytes, int64_t ttl_ms, pnmem_admit_answer* out,
                                    pnmem_reservation* reservation);
/* May `bytes` be allocated now? The same answer pnmem_reserve_bytes (die -1) or
 * pnmem_admit_model_load (a die) would give, explained, with nothing reserved: for a
 * check whose refusal the engine reports with pnmem's reason (a model load, a buffer
 * that is not worth a reservation). die -1, the host: MemAvailable less the host
 * reserve and the bytes already promised to reservations (out->pending_bytes), as
 * pnmem_reserve_bytes: PNMEM_ADMITTED ("fits"), PNMEM_CAPPED ("host_budget":
 * out->limit_bytes fit now) or PNMEM_DENIED ("host_reserve"). die 0..PNMEM_MAX_DIES-1:
 * that die's free VRAM less the policy's die reserve: PNMEM_ADMITTED or PNMEM_DENIED
 * ("die_vram", out->limit_bytes fit; "bad_request" for a die not fed). No watcher
 * running: PNMEM_FAIL_OPEN. out->need_bytes = bytes. 0 on success; -1 if out is NULL,
 * die is below -1 or not below PNMEM_MAX_DIES, or on failure (*out not written).
 * A die's free VRAM is counted less what is promised on it (out->pending_bytes), as a model
 * load's is. Locks the ledger's mutex. */
PNMEM_C_API int pnmem_check_bytes(uint64_t bytes, int die, pnmem_admit_answer* out);

/* Since 0.3: pnmem_check_bytes on die `die` (0..PNMEM_MAX_DIES-1), and on PNMEM_ADMITTED the bytes
 * reserved on that die (a KV pool, a buffer the engine allocates there) until settled or
 * cancelled, with ttl_ms as pnmem_reserve_bytes has it. 0 on success; -1 if out or reservation
 * is NULL, die is out of range (logged), or on failure (nothing is reserved, *out is not
 * written, *reservation is 0). Locks the ledger's mutex, then the handles' mutex. */
PNMEM_C_API int pnmem_reserve_die_bytes(int die, uint64_t bytes, int64_t ttl_ms, pnmem_admit_answer* out,
                                        pnmem_reservation* reservation);

/* Since 0.3: pnmem_admit_model_load and pnmem_admit_model_load_die, and on PNMEM_ADMITTED the
 * need (out->need_bytes) reserved on the die they chose (out->die) until settled (the weights
 * are on the die: pnmem_reservation_settle; counted until a sample of the die that began after
 * it) or cancelled (the load failed or was dropped: pnmem_reservation_cancel). Two loads at once,
 * in one process or in two of the box ledger on one GPU, are never both told the same VRAM is
 * theirs. *reservation is 0 when nothing was reserved. 0 on success; -1 if load, out or
 * reservation is NULL, the load is refused, or on failure (nothing is reserved, *out is not
 * written, *reservation is 0). Locks the ledger's mutex, then the handles' mutex.
 *
 *   pnmem_reservation r;
 *   pnmem_admit_model_load_reserved(&l, &a, &r);
 *   if (a.status == PNMEM_ADMITTED) { load_weights_onto(a.die); pnmem_reservation_settle(r); }
 */
PNMEM_C_API int pnmem_admit_model_load_reserved(const pnmem_model_load* load, pnmem_admit_answer* out,
                                                pnmem_reservation* reservation);
PNMEM_C_API int pnmem_admit_model_load_die_reserved(const pnmem_model_load* load, pnmem_admit_answer* out,
                                                    pnmem_reservation* reservation);

/* Since 0.3: names this process's die `die` by its GPU's UUID, as `nvidia-smi -L` prints it
 * ("GPU-" and 8-4-4-4-12 hex digits; the same without "GPU-", or 32 hex digits, are taken too;
 * the CUDA runtime's cudaDeviceProp::uuid). A die's index is the process's own (its
 * CUDA_VISIBLE_DEVICES); its UUID is the box's: with it, the die's reservations are counted in
 * the box ledger (pnmem_watcher_options.ledger) with every process's on the same GPU, and theirs
 * in this process's answers, and the die's retiring bytes (pnmem_set_die) are every process's.
 * A die not named counts only this process's reservations. 0 on success; -1 for a die outside
 * [0, PNMEM_MAX_DIES), a NULL or unreadable uuid, or a die that holds unsettled reservations
 * under another UUID (each logged with the value). Locks the ledger's mutex. */
PNMEM_C_API int pnmem_set_die_uuid(int die, const char* uuid);

/* Locks the handles' mutex, then the ledger's. */
PNMEM_C_API void pnmem_reservation_settle(pnmem_reservation reservation);
PNMEM_C_API void pnmem_reservation_cancel(pnmem_reservation reservation);
/* Bytes reserved and not yet seen by a sample, expired ones left out (0 on failure).
 * Locks the ledger's mutex. */
PNMEM_C_API uint64_t pnmem_pending_bytes(void);

/* --- The policy in force, and the host budget it implies --------------------------- */

/* pnmem::policy (policy.hpp), as the PN_* environment set it, and the host reserve it
 * implies for the latest snapshot. Percentages are in basis points (1500 = 15.00 %). */
typedef struct pnmem_policy {
  uint64_t host_reserve_min_bytes; /* reserve = max(min, host_reserve_bp of MemTotal); in a container
                                    * whose limit is the total, min is at most a quarter of it */
  uint32_t host_reserve_bp;        /* PN_HOST_RESERVE_BYTES=X: min X, bp 0 */
  uint32_t psi_full_reject_bp;     /* PSI full at or above: CRITICAL, requests rejected */
  uint32_t psi_some_tight_bp;      /* PSI some at or above: at least TIGHT */
  uint32_t psi_full_window_ms;     /* a fresh full stall must hold this long to be CRITICAL (>= 2000) */
  uint32_t die_tight_divisor;      /* die free below budget / this: TIGHT */
  uint32_t die_watch_divisor;      /* die free below budget / this: WATCH */
  uint64_t die_reserve_bytes;      /* die budget = VRAM at boot - this */
  uint64_t die_scratch_bytes;      /* GPU-path scratch a model load needs beside weights and KV */
  uint64_t load_spike_bytes;       /* host burst of a weight upload */
  bool ladder_disabled;            /* PN_LADDER_DISABLE */
  uint64_t host_total_bytes;       /* the latest snapshot's MemTotal (or its container's limit); 0: not sampled */
  uint64_t host_reserve_bytes;     /* the reserve for that snapshot (the minimum when 0), as every
                                    * answer uses it: 256 MiB in a 1 GiB container (docs/operators.md, Configuration) */
} pnmem_policy;

/* 0 on success; -1 if out is NULL or on failure (*out not written). The first call
 * that needs the policy reads the PN_* variables (and logs a bad one through the sink)
 * under the lifecycle mutex; after that it locks nothing. */
PNMEM_C_API int pnmem_policy_get(pnmem_policy* out);

/* The host's budget now, as admission sees it. */
typedef struct pnmem_budget {
  uint64_t total_bytes;      /* MemTotal (or the cgroup's limit); 0: not sampled (no watcher): reservations fail open */
  uint64_t avail_bytes;      /* MemAvailable */
  uint64_t reserve_bytes;    /* the host reserve for total_bytes */
  uint64_t headroom_bytes;   /* avail - reserve; 0 when avail is inside the reserve */
  uint64_t pending_bytes;    /* promised to reservations not yet in a sample (expired ones left out) */
  uint64_t unpromised_bytes; /* headroom - pending, 0 below: what pnmem_reserve_bytes would admit now */
  pnmem_level level;         /* the snapshot's level */
  uint64_t seq;              /* the snapshot's sequence number */
} pnmem_budget;

/* 0 on success; -1 if out is NULL or on failure (*out not written). Reads the snapshot
 * with no lock; locks the ledger's mutex to total the pending bytes. */
PNMEM_C_API int pnmem_host_budget(pnmem_budget* out);

/* --- Room: what to free, or what may be taken, for the host to sit at a level ----------
 *
 * The host byte bands (OK from 2 x the reserve available, WATCH from 1.25 x, TIGHT above it)
 * measured on what every answer uses: MemAvailable less the bytes promised to reservations plus
 * the bytes credited as freed. For each level, free_bytes[level] is what to free to bring the
 * bands back to it (0 when there already) and take_bytes[level] what may be taken with them
 * staying at it or better (0 when not there): size a cache by take_bytes[PNMEM_LEVEL_OK], not by
 * the headroom above the reserve, which leaves the box TIGHT. Host bytes only: a PSI stall or a
 * die holds the level up on its own (pnmem_read_snapshot's per-source levels say which).
 *
 * Shedding a cache, one call per decision, no forced sample:
 *
 *   pnmem_room room;
 *   pnmem_room_init(&room);
 *   pnmem_host_room(&room);                                  // level TIGHT: free_bytes[WATCH] = X
 *   uint64_t freed = cache_evict_at_least(room.free_bytes[PNMEM_LEVEL_WATCH]);
 *   pnmem_credit_freed(freed);                               // the next answer counts it: WATCH
 */
typedef struct pnmem_room {
  uint32_t struct_size;     /* sizeof(pnmem_room) as the caller compiled it: pnmem_room_init sets it */
  int sampled;              /* 0: no watcher running, or no host numbers: every figure below is 0 */
  pnmem_level level;        /* the host bands' level on avail_bytes */
  uint64_t avail_bytes;     /* MemAvailable - pending_bytes + credited_bytes, within [0, total] */
  uint64_t reserve_bytes;   /* the host reserve for the snapshot's total */
  uint64_t pending_bytes;   /* promised to reservations, not yet in a sample */
  uint64_t credited_bytes;  /* credited by pnmem_credit_freed, not yet in a sample */
  uint64_t take_bytes[4];   /* by pnmem_level: bytes that may be taken with the bands at that level or better */
  uint64_t free_bytes[4];   /* by pnmem_level: bytes to free to bring the bands back to that level */
  uint64_t seq;             /* the snapshot measured on */
} pnmem_room;

/* Zeroes the caller's struct_size bytes of *room and sets struct_size. 0 on success; -1 for a NULL
 * room or a struct_size smaller than the first version's. Locks nothing. */
PNMEM_C_API int pnmem_room_init_sized(pnmem_room* room, size_t struct_size);
static inline int pnmem_room_init(pnmem_room* room) { return pnmem_room_init_sized(room, sizeof *room); }

/* The room now, into *out (struct_size as pnmem_room_init set it). 0 on success; -1 if out is NULL,
 * its struct_size is not valid (a line names it), or on failure (*out not written). Reads the
 * snapshot with no lock; locks the ledger's mutex. */
PNMEM_C_API int pnmem_host_room(pnmem_room* out);

/* Bytes the engine has just freed (a cache entry dropped, a buffer unmapped): every answer counts
 * them as available from now until a sample that began after this call has them in its numbers, so
 * a shed is seen at once, without pnmem_watcher_poll_now. Credit what went back to the kernel
 * (munmap, madvise(MADV_DONTNEED), malloc_trim): memory kept by the allocator never reaches
 * MemAvailable, and the next sample shows it. 0 on success, -1 on failure. Locks the ledger's mutex. */
PNMEM_C_API int pnmem_credit_freed(uint64_t bytes);

/* Since 0.3: the engine's way to drop its oldest cache entries: free at least bytes_wanted (oldest
 * first, which ones is the engine's choice) and return the bytes given back to the kernel; 0 when it
 * dropped nothing (a cache that cannot free bytes_wanted should free nothing). Called on the thread
 * that called pnmem_make_room, with no lock of pnmem's held (it may call pnmem, but must not credit
 * what it returns: pnmem does). */
typedef uint64_t (*pnmem_free_fn)(uint64_t bytes_wanted, void* user);

/* Since 0.3: makes room for a cache insert: a cache that keeps its newest entries (a prompt cache,
 * offloaded KV) is about to grow by `bytes`. If the insert fits with the host bands at WATCH or better
 * (on the budget less what is promised), it is reserved at once. Else free_older(shortfall, user) is
 * called with the bytes to free first; what it returns is credited (pnmem_credit_freed) and the
 * insert asked again:
 *   PNMEM_ADMITTED   reserved (*reservation != 0; 0 for bytes 0): insert, then settle;
 *   PNMEM_CAPPED     nothing reserved ("host_budget"): the insert does not fit at WATCH even after what
 *                    was freed; out->limit_bytes would;
 *   PNMEM_DENIED     nothing reserved ("host_reserve"): available memory is still inside the reserve;
 *   PNMEM_FAIL_OPEN  no watcher runs: nothing freed or reserved.
 * free_older may be NULL: the answer alone (pnmem_reserve_bytes at WATCH's floor). out->need_bytes =
 * bytes; pnmem_explain says "the insert, ... fits in the ... the host has above WATCH's floor". ttl_ms
 * as pnmem_reserve_bytes. 0 on success; -1 if out or reservation is NULL, or on failure (nothing is
 * reserved, *out is not written, *reservation is 0). Locks the ledger's mutex (twice, not while
 * free_older runs), then the handles' mutex.
 *
 *   uint64_t drop_oldest(uint64_t want, void* cache);   // the engine's
 *   pnmem_make_room(entry_bytes, 0, drop_oldest, &cache, &a, &r);
 *   if (a.status == PNMEM_ADMITTED || a.status == PNMEM_FAIL_OPEN) { cache_insert(); pnmem_reservation_settle(r); }
 */
PNMEM_C_API int pnmem_make_room(uint64_t bytes, int64_t ttl_ms, pnmem_free_fn free_older, void* user,
                                pnmem_admit_answer* out, pnmem_reservation* reservation);

/* Since 0.3: a model load on the host whose cost grows with its context (a CPU engine's weights and KV,
 * a runner loading a model into host memory): fixed_bytes (weights, compute buffers) plus
 * bytes_per_token of KV per context token, wanted_tokens asked for, least_tokens the smallest context
 * worth starting. May it start, and with how much context, the host at WATCH or better after it:
 *   PNMEM_ADMITTED   "fits": out->fit_tokens = wanted_tokens;
 *   PNMEM_CAPPED     "host_budget": start it with out->fit_tokens of context (the largest that fits,
 *                    at least least_tokens): llama.cpp's -c, vLLM's max_model_len;
 *   PNMEM_DENIED     "host_budget": not even least_tokens fit; "host_reserve": available memory is
 *                    inside the host reserve;
 *   PNMEM_FAIL_OPEN  no watcher runs: nothing is known.
 * out->need_bytes is the load at wanted_tokens, out->limit_bytes what the host has above WATCH's
 * floor, less what is promised; pnmem_explain says "the load (fixed bytes and KV at the context asked)
 * needs ...; start it with N tokens of context: that fits in ...". With `reservation` not NULL, the
 * load's bytes at fit_tokens are reserved when admitted or capped, until pnmem_reservation_settle
 * (loaded) or _cancel, ttl_ms as pnmem_reserve_bytes; NULL: the answer alone. 0 on success; -1 if
 * out is NULL, a context is negative or least_tokens > wanted_tokens (logged), or on failure (nothing
 * is reserved, *out is not written). Locks the ledger's mutex (then the handles' mutex). */
PNMEM_C_API int pnmem_admit_host_load(uint64_t fixed_bytes, uint64_t bytes_per_token, int wanted_tokens,
                                      int least_tokens, int64_t ttl_ms, pnmem_admit_answer* out,
                                      pnmem_reservation* reservation);

/* Since 0.3: the bytes to free now for the host bands to be back at WATCH (pnmem_room's
 * free_bytes[PNMEM_LEVEL_WATCH], on the ledger's budget: what is promised and credited counted): 0 at
 * WATCH or better, when the host was not sampled, or with no watcher running. Into *out. 0 on
 * success; -1 if out is NULL or on failure. Locks the ledger's mutex. */
PNMEM_C_API int pnmem_shed_bytes(uint64_t* out);

/* Since 0.3: the shed hook: pnmem calls fn(pnmem_shed_bytes(), user) on the watcher's poll thread
 * after every sample on which there is something to shed (the host bands at TIGHT or worse, on the
 * ledger's budget), so a cache is shed while the engine's own loop is busy (a long prefill, a
 * blocked scheduler), within one poll interval of the pressure. fn frees its oldest entries (at
 * least bytes_wanted if it can) and returns the bytes it gave back to the kernel; pnmem credits them
 * (pnmem_credit_freed: do not credit them again), so the next answers count them at once. fn runs
 * with no lock of pnmem's held, one call at a time; it must not block for long (it holds up the next
 * sample) and may take the engine's own cache lock. One hook per process: a second call replaces the
 * first (a model reloaded registers again without a second hook), fn NULL removes it; the call
 * returns once a running call of the previous hook on another thread has returned, so the engine may
 * then free what `user` points at. The calls that freed something and their bytes are counted in
 * pnmem_metrics_text (pnmem_shed_calls_total, pnmem_shed_freed_bytes_total). Returns 0. Locks the
 * hook's mutex (a leaf). */
PNMEM_C_API int pnmem_set_shed_hook(pnmem_free_fn fn, void* user);

/* --- Level changes --------------------------------------------------------------------- */

typedef struct pnmem_level_change {
  pnmem_level from;
  pnmem_level to;
  uint64_t seq;             /* the snapshot that carried the change */
  int64_t sample_time_ns;
  const pnmem_state* state; /* that snapshot; valid only during the call */
} pnmem_level_change;

typedef void (*pnmem_level_fn)(void* user, const pnmem_level_change* change);
typedef uint64_t pnmem_subscription;

/* Calls fn(user, change) for every change of the published level from now on, whether
 * or not the watcher exists or runs yet (a subscription made before the start sees the
 * first sample's change from OK).
 *
 * Thread: the one that published the change: the watcher's poll thread, or the caller
 * of pnmem_set_die, pnmem_watcher_poll_now, pnmem_watcher_start or
 * pnmem_watcher_start_with (its first sample); if another of these threads is
 * delivering a change at that moment, that thread delivers this one too, after it.
 * Order: one change at a time, in publication order, across all subscribers: a callback
 * never runs beside or inside another (a change published from inside a callback is
 * delivered after it returns, by the same thread).
 * It may call any pnmem function except pnmem_watcher_start, pnmem_watcher_start_with
 * and pnmem_watcher_stop (deadlock: it may run under the lifecycle mutex, or on the poll
 * thread that stop joins), and pnmem_unsubscribe of itself is fine. It should return
 * quickly: while it runs, that thread's sample is done but the next poll waits.
 * A callback that throws (C++) is logged, "pnmem: pnmem_subscribe: <what>", and the
 * others still run.
 * Returns the subscription's id, or 0 if fn is NULL or on failure. Locks the
 * subscriptions' mutex (never held while a callback runs). */
PNMEM_C_API pnmem_subscription pnmem_subscribe(pnmem_level_fn fn, void* user);
/* After this returns, fn is not running (unless this is called from fn itself) and is
 * not called again, so `user` may be freed. Do not call it while holding a lock the
 * callback takes. 0 and unknown ids are ignored. Locks the subscriptions' mutex, and
 * waits for a call of this subscription in progress on another thread. */
PNMEM_C_API void pnmem_unsubscribe(pnmem_subscription id);

/* --- The ladder, the log sink, the gate ----------------------------------------------- */

typedef struct pnmem_ladder_plan {
  pnmem_level level;
  int max_slots;
  bool force_kv_q4;
  bool kv_evict;
  int prefill_window;
  bool degraded;
  const char* note; /* a static string */
} pnmem_ladder_plan;

/* The ladder plan for a level and an operator config (the environment's PN_LADDER_DISABLE applies).
 * max_slots below 1 is taken as 1, a negative prefill_window as 0 (no clamp). A level outside
 * [PNMEM_LEVEL_OK, PNMEM_LEVEL_CRITICAL], or a failure, gives the operator config, as at OK
 * (level PNMEM_LEVEL_OK, degraded false), with the note "error: operator config".
 * Locks nothing once the policy is read (see pnmem_policy_get). */
PNMEM_C_API pnmem_ladder_plan pnmem_plan_ladder(pnmem_level level, int max_slots, int prefill_window, bool kv_q4);
/* The plan for the latest snapshot (pnmem::ladder_plan_from_state): as pnmem_plan_ladder at its level,
 * except that the evict rung (kv_evict) follows the memory levels (host bytes, dies, the OS), not
 * PSI: a box-wide stall that raised the level to TIGHT halves slots and the window and forces Q4,
 * but does not tell the engine to drop KV (its note says "no KV eviction"), unless PN_EVICT_ON_PSI=1.
 * pnmem_plan_ladder, given a level alone, cannot tell what raised it and keeps the seed's rule. Before
 * the watcher's first sample: the plan at OK. Reads the snapshot with no lock. */
PNMEM_C_API pnmem_ladder_plan pnmem_plan_ladder_now(int max_slots, int prefill_window, bool kv_q4);

/* --- Rung 4a at KV-cache init: the format and bytes of a cache allocated now ------------ */

typedef struct pnmem_kv_allocation {
  pnmem_kv_format format; /* the format the cache must be in, for its whole life */
  uint64_t bytes;         /* its KV bytes for the tokens asked */
} pnmem_kv_allocation;

/* Which format a KV cache allocated now must be in, and its bytes for `tokens` tokens of one
 * sequence (pnmem::kv_allocation_for, ladder.hpp): model->compact_kv while plan->force_kv_q4
 * (rung 4a: WATCH or worse, or kv_q4 configured), else model->normal_kv; the bytes from the
 * model's cost fields in that format (sliding layers stop at sliding_window;
 * state_bytes_per_seq is not KV and not included). A live cache is never converted: it keeps
 * the format it was allocated in. Only plan->force_kv_q4 is read (any non-zero byte is true).
 * 0 on success; -1 if plan, model or out is NULL, or the model is refused (as for
 * pnmem_admit: a line names the field); *out is then not written. Locks nothing.
 *
 *   pnmem_ladder_plan p = pnmem_plan_ladder(state.level, slots, window, false);
 *   pnmem_kv_allocation kv;
 *   if (pnmem_kv_allocation_for(&p, &m, max_ctx, &kv) == 0) cache = kv_alloc(kv.format, kv.bytes);
 */
PNMEM_C_API int pnmem_kv_allocation_for(const pnmem_ladder_plan* plan, const pnmem_model* model, uint64_t tokens,
                                        pnmem_kv_allocation* out);

/* Where pnmem's log lines go (e.g. the ladder's clamp line, a bad PN_* value, a refused
 * struct, a failure inside pnmem, PN_PSI_SOURCE=cgroup falling back to the host's PSI: that
 * one from the watcher's thread); NULL silences them. Until a sink is set they go to standard
 * error, one line each (as the C++ library reports a bad PN_* value): set it before the watcher
 * starts (or before pnmem_set_die / pnmem_plan_ladder / pnmem_policy_get first read the
 * environment) for the startup errors to reach it rather than stderr.
 * The sink may be called from several threads at once. A sink that is C++ and throws
 * makes the call that logged return its error value. Locks the sink's mutex (readers of
 * the sink take none). */
typedef void (*pnmem_log_fn)(void* user, const char* line);
PNMEM_C_API void pnmem_set_log_sink(pnmem_log_fn fn, void* user);

/* The back-pressure gate (the seed's D3) in front of decode-slot acquisition. */
typedef struct pnmem_gate pnmem_gate;

typedef enum pnmem_gate_status {
  PNMEM_GATE_ACQUIRED = 0,
  PNMEM_GATE_OVERLOADED = 1, /* CRITICAL: fail the request now ("overloaded, retry", the seed's 503) */
  PNMEM_GATE_TIMED_OUT = 2,
  PNMEM_GATE_QUEUE_FULL = 3,
  PNMEM_GATE_ERROR = 4       /* NULL gate, or no memory */
} pnmem_gate_status;

/* A gate with `max_slots` slots (below 1: 1) and at most `max_waiters` waiting
 * acquirers (below 0: 0), following the process watcher's samples (start the
 * watcher first): rung 2 applied at once and on every sample (the ladder's
 * slots for the watcher's level: max_slots at OK, half at TIGHT, 1 at CRITICAL). A hold pushed by a denial
 * ends when a re-check passes (pnmem_gate_create_for) or the level falls below
 * TIGHT; CRITICAL fails waiters only while the watcher still reads CRITICAL.
 * NULL on failure. */
PNMEM_C_API pnmem_gate* pnmem_gate_create(int max_slots, int max_waiters);
/* NULL is ignored. */
PNMEM_C_API void pnmem_gate_destroy(pnmem_gate* gate);
/* Waits up to timeout_ms for a slot (below 0: no wait; longer than 100 years: 100
 * years); each ACQUIRED needs one pnmem_gate_release. PNMEM_GATE_ERROR for a NULL
 * gate or on failure. */
PNMEM_C_API pnmem_gate_status pnmem_gate_acquire(pnmem_gate* gate, int64_t timeout_ms);
/* NULL is ignored. */
PNMEM_C_API void pnmem_gate_release(pnmem_gate* gate);
/* A denied admission pushes its level (the seed's bs_notify_pressure). A NULL
 * gate or a level outside [PNMEM_LEVEL_OK, PNMEM_LEVEL_CRITICAL] is ignored. */
PNMEM_C_API void pnmem_gate_notify_pressure(pnmem_gate* gate, pnmem_level level);
/* The ladder's rung 2: the slot ceiling now (below 1: 1). NULL is ignored. */
PNMEM_C_API void pnmem_gate_set_capacity(pnmem_gate* gate, int max_slots);

/* A gate for `model`'s requests: model->max_slots slots (the ceiling rung 2 works under) and at most
 * `max_waiters` waiting acquirers (below 0: 0), following the process watcher's samples (start the watcher
 * first). A hold's release re-checks admission of a request of this model (its cost, KV format,
 * gpu_resident, window and die) on every sample: pnmem_gate_acquire_tokens and pnmem_gate_notify_denied
 * say how many tokens. pnmem_gate_create's gate is this with pnmem_model_init_reference's model (the
 * seed's). NULL when model is NULL or refused (a line names the field), or on failure. */
PNMEM_C_API pnmem_gate* pnmem_gate_create_for(const pnmem_model* model, int max_waiters);
/* pnmem_gate_acquire for a request of n_tokens tokens of the gate's model: while it waits at the head
 * of the queue, a hold (a denial's TIGHT or worse) ends on the first sample on which that request would
 * be admitted or capped, without waiting for the level to fall. PNMEM_GATE_ERROR for a NULL gate or a
 * negative n_tokens (a line says so). */
PNMEM_C_API pnmem_gate_status pnmem_gate_acquire_tokens(pnmem_gate* gate, int n_tokens, int64_t timeout_ms);
/* A denied admission of n_tokens tokens of the gate's model (answer from pnmem_admit; an answer that is
 * not PNMEM_DENIED, a NULL gate or answer, or a negative n_tokens is ignored): pushes answer->level as
 * pnmem_gate_notify_pressure does, and remembers the request: with no waiter saying what it will run,
 * the hold ends on the first sample on which this one would be admitted or capped (on answer->die). With
 * pnmem_gate_notify_pressure alone, a hold ends when the watcher's level falls below TIGHT. */
PNMEM_C_API void pnmem_gate_notify_denied(pnmem_gate* gate, const pnmem_admit_answer* answer, int n_tokens);

/* --- Rung 4b: KV eviction (keep_set.hpp, eviction_budget.hpp, eviction_admission.hpp) --------------
 *
 * At TIGHT and worse the ladder turns KV eviction on (pnmem_ladder_plan's kv_evict). These say which
 * tokens of a slot to keep (a CPU reference; the CUDA adapter's kernels do the same on the die), how
 * many tokens each running slot keeps for the bytes wanted, and whether a request host memory refuses
 * or caps is admitted once those bytes are evicted. All lock nothing and allocate nothing. */

/* Which tokens of one row (a layer, or a KV head) of n_tokens to keep within `budget`: the first `sinks`,
 * the last `recent`, and of the rest the highest `scores` (equal scores: the earlier token; NaN ranks
 * below every number). scores NULL: the most recent (StreamingLLM). Writes the kept positions,
 * increasing, to keep[0 .. k) (room for min(budget, n_tokens)); scratch: n_tokens floats (may be NULL
 * when scores is). Returns k = min(budget, n_tokens) (0 for a negative budget or length), or -1 for a
 * NULL keep, or a NULL scratch with scores. */
PNMEM_C_API int pnmem_select_keep(const float* scores, int n_tokens, int budget, int sinks, int recent, int* keep,
                                  float* scratch);
/* SnapKV's scores: attn is rows x n_tokens row-major (the observation window's queries' attention
 * weights, every head sharing the KV head); scores[t] = max over |u - t| <= kernel/2 of the column sums.
 * scratch: n_tokens floats. 0, or -1 for a NULL pointer or a negative count. */
PNMEM_C_API int pnmem_observation_scores(const float* attn, int rows, int n_tokens, int kernel, float* scores,
                                         float* scratch);
/* The key-norm scores: keys is n_tokens x dim row-major; scores[t] = -(squared L2 norm of key t).
 * 0, or -1 for a NULL pointer or a negative count. */
PNMEM_C_API int pnmem_key_norm_scores(const float* keys, int n_tokens, int dim, float* scores);

/* The least a slot keeps: at least min_keep_tokens and min_keep_permille / 1000 of its tokens.
 * pnmem_eviction_limits_default: 36 (4 sinks + 32 recent) and 100 (10 %). */
typedef struct pnmem_eviction_limits {
  int32_t min_keep_tokens;
  int32_t min_keep_permille;
} pnmem_eviction_limits;
PNMEM_C_API pnmem_eviction_limits pnmem_eviction_limits_default(void);

/* One slot's part of an eviction. */
typedef struct pnmem_keep_answer {
  int32_t tokens;       /* what the slot held */
  int32_t keep_tokens;  /* what it keeps */
  uint64_t freed_bytes; /* KV bytes evicting the rest gives back */
} pnmem_keep_answer;

/* An eviction over the running slots, and (pnmem_admit_after_eviction) what it does for a request. */
typedef struct pnmem_eviction {
  int considered;          /* pnmem_admit_after_eviction: eviction could help this request (rung 4b on,
                            * a host-path request refused or capped for host memory); 1 for a plan */
  int after_eviction;      /* the request is admitted in full once evict_bytes are evicted */
  int enough;              /* freed_bytes >= the bytes asked for */
  int32_t cut_to_tokens;   /* every slot longer keeps max(this, its floor) tokens */
  int32_t slots_cut;       /* slots that give anything */
  uint64_t evict_bytes;    /* the bytes asked for (for a request: what it is short of) */
  uint64_t freed_bytes;    /* what the slots give, in all */
} pnmem_eviction;

/* Which of the running slots (slot_tokens[0 .. n_slots): the tokens each holds, their KV in model->kv)
 * give how much for bytes_to_free: every slot longer than one length L cut to L, none below its floor,
 * L the longest that frees the bytes (or every slot at its floor, enough = 0). The bytes per token are
 * the model's full-attention layers' (windowed layers hold no evictable surplus); in blocks when
 * kv_block_tokens > 1. limits NULL: the defaults. per_slot: n_slots answers, or NULL. 0, or -1 for a
 * NULL model, out or slot_tokens (with n_slots > 0), a negative n_slots, or a refused model. */
PNMEM_C_API int pnmem_plan_eviction(const pnmem_model* model, const int* slot_tokens, int n_slots,
                                    uint64_t bytes_to_free, const pnmem_eviction_limits* limits,
                                    pnmem_keep_answer* per_slot, pnmem_eviction* out);

/* pnmem_admit_request (no reservation) on the watcher's newest snapshot, and when it does not admit the
 * request in full: whether evicting from the running slots admits it (at TIGHT and worse, for a
 * host-path request that host memory refuses or caps; eviction->evict_bytes is what it is short of,
 * including the way out of the host reserve). The answer in *out is the admission as it is (a CAP
 * stays a CAP): eviction->after_eviction says the whole request fits once the plan is carried out.
 * No watcher running: fail open, nothing considered. 0, or -1 for a NULL model, request, out or eviction, NULL slot_tokens with
 * n_slots > 0, a negative n_slots, or a refused model or request. Locks nothing. */
PNMEM_C_API int pnmem_admit_after_eviction(const pnmem_model* model, const pnmem_request* request,
                                           const int* slot_tokens, int n_slots, const pnmem_eviction_limits* limits,
                                           pnmem_admit_answer* out, pnmem_eviction* eviction,
                                           pnmem_keep_answer* per_slot);

/* --- Metrics: pnmem's Prometheus families on the engine's own /metrics ----------------- */

#define PNMEM_METRICS_BOX 1u      /* the snapshot's families: exactly what `pnmem metrics` prints */
#define PNMEM_METRICS_COUNTERS 2u /* what this library's C calls counted: request admissions by
                                   * verdict and reason, fail-open ones, the ladder's clamps, level
                                   * changes, the C gates' slots (pnmem_admissions_total, ...); the
                                   * fleet gauges (pnmem_set_fleet_load) and the box ledger's */
#define PNMEM_METRICS_ALL 3u
/* The Content-Type to serve the text with. */
#define PNMEM_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* pnmem's text exposition (format 0.0.4: one # HELP and one # TYPE line per family, the
 * names docs/operators.md lists) of the watcher's latest snapshot and/or the counters,
 * as `what` selects; PNMEM_METRICS_BOX gives byte for byte what `pnmem metrics` prints
 * for the same snapshot and policy (the snapshot's age is measured when the text is
 * made). Written to buf as snprintf does: at most len - 1 bytes and a NUL when len > 0;
 * returns the length of the whole text (without the NUL), so a return >= len means it
 * was cut: call again with a buffer of at least the return + 1 (a size query: buf NULL,
 * len 0). Each call renders anew, and a later snapshot may be longer: loop until it
 * fits. To append to the engine's own exposition, pass the end of its text. -1 if buf is
 * NULL with len > 0, `what` is 0 or has another bit, or on failure. Locks nothing
 * (allocates: not for the decision path). */
PNMEM_C_API int pnmem_metrics_text(char* buf, size_t len, unsigned what);

/* Since 0.3: the engine's own numbers for the model-server protocol's gauges an inference gateway's
 * endpoint picker routes by (docs/fleet.md): requests waiting in its own queue, requests being served,
 * the requests it may run at once now (0: unknown), and its KV cache's bytes in use and held for
 * requests (0: unknown). Every C gate alive (pnmem_gate_create, _create_for; until pnmem_gate_destroy)
 * adds its waiting acquirers, held slots and capacity. From the first call, or the first gate,
 * pnmem_metrics_text's PNMEM_METRICS_COUNTERS carries pnmem_queued_requests, pnmem_running_requests,
 * pnmem_kv_cache_usage_ratio (KV bytes used over held when known, else running over the slot
 * capacity; at most 1) and pnmem_slot_capacity. Each call replaces the numbers of the one before; call
 * it when they change (a request queued, started or finished). Returns 0. Locks the fleet mutex. */
PNMEM_C_API int pnmem_set_fleet_load(uint64_t queued_requests, uint64_t running_requests, uint64_t slot_capacity,
                                     uint64_t kv_used_bytes, uint64_t kv_capacity_bytes);

/* Lower-case name of a level ("ok", ...), a static string; "invalid" for a value
 * outside [PNMEM_LEVEL_OK, PNMEM_LEVEL_CRITICAL]. Locks nothing. */
PNMEM_C_API const char* pnmem_level_name(pnmem_level level);

#ifdef __cplusplus
}
#endif

#endif /* PNMEM_PNMEM_C_H */
