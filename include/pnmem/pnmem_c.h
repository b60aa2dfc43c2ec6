/* pnmem/pnmem_c.h - the C ABI, for engines written in C (C11).
 *
 * One process-wide watcher over the platform's sampler (Linux: /proc, PSI,
 * cgroups), configured from the PN_* environment variables, and the engine's
 * questions about it: admit a request, plan the ladder, feed a die, read the
 * snapshot. Link with -lpnmem_c. Every call is thread-safe.
 *
 * Errors: no call throws, crashes on a NULL or out-of-range argument, or hands
 * such a value to the C++ library. A call that fails returns its error value,
 * documented with it (-1, NULL, PNMEM_GATE_ERROR, ...); a call with no result
 * does nothing. A failure inside pnmem (no memory, a thread that cannot be
 * started or joined, an exception from the log sink) also logs one line,
 * "pnmem: <function>: <what>", through the log sink.
 *
 *   if (pnmem_watcher_start() != 0) { ... }          // fail open if it never starts
 *   pnmem_model m = {.kv_q4 = 1, .gpu_resident = 1, .max_window = 16384, .die = -1, .max_slots = 8};
 *   pnmem_admit_answer a;
 *   pnmem_admit(&m, n_prompt_tokens, &a);
 *   if (a.status == PNMEM_DENIED) { ... a.reason ... }
 */
#ifndef PNMEM_PNMEM_C_H
#define PNMEM_PNMEM_C_H

#include <stdbool.h>
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

/* Starts the watcher (idempotent; one synchronous sample first). 0 on success,
 * -1 if it could not start (then pnmem_admit fails open). */
PNMEM_C_API int pnmem_watcher_start(void);
/* Stops the watcher's thread (idempotent); the last snapshot stays readable. */
PNMEM_C_API void pnmem_watcher_stop(void);
/* false also when the state cannot be read. */
PNMEM_C_API bool pnmem_watcher_running(void);
/* Samples now, on the caller's thread (nothing before the first start or set_die). */
PNMEM_C_API void pnmem_watcher_poll_now(void);

/* Copies the latest snapshot. 0 on success, -1 if out is NULL or on failure
 * (*out is then not written). */
PNMEM_C_API int pnmem_read(pnmem_state* out);

/* Feeds one die's numbers (after cudaMemGetInfo). 0 on success, -1 for a die
 * id outside [0, PNMEM_MAX_DIES) or on failure. */
PNMEM_C_API int pnmem_set_die(int die, uint64_t free_bytes, uint64_t budget_bytes, uint64_t used_bytes, uint64_t retiring_bytes);

typedef struct pnmem_model {
  int kv_q4;        /* the model's KV cache is Q4 (else fp32) */
  int gpu_resident; /* weights and KV on the die(s) */
  int max_window;   /* configured context window; <= 0 = none */
  int die;          /* the die bounding the host path; -1 = the tightest measured die */
  int max_slots;    /* configured decode slots */
} pnmem_model;

typedef enum pnmem_admit_status {
  PNMEM_ADMITTED = 0,
  PNMEM_CAPPED = 1,
  PNMEM_DENIED = 2,
  PNMEM_FAIL_OPEN = 3
} pnmem_admit_status;

typedef struct pnmem_admit_answer {
  pnmem_admit_status status;
  int fit_tokens;     /* tokens that may start */
  const char* reason; /* "fits", "window", "psi_stall", "host_reserve", "host_budget", "die_vram", "bad_request" */
  pnmem_level level;  /* the snapshot's level */
  int die;            /* the die checked, -1 for none */
  int window;         /* the window used, after the ladder's clamp */
  uint64_t need_bytes;
  uint64_t limit_bytes;
  uint64_t pending_bytes; /* pnmem_admit_reserved: promised to earlier admissions, not yet sampled */
} pnmem_admit_answer;

/* The seed's pn_admit. 0 on success; -1 if model or out is NULL, model->die is
 * outside [-1, PNMEM_MAX_DIES), or on failure (*out is then not written). A die
 * in range that has not been fed, or a negative n_tokens, is answered
 * (PNMEM_DENIED, "bad_request"), not an error. */
PNMEM_C_API int pnmem_admit(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out);

/* Memory admitted is not free until a sample has seen it (the C++ host_ledger).
 * pnmem_admit_reserved answers as pnmem_admit on MemAvailable minus the bytes
 * promised to earlier reserved admissions that no sample has seen yet, and, when
 * the request may start on the host path, sets *reservation (else 0). After the
 * request's prefill memory is allocated, pnmem_reservation_settle(r); if it never
 * is (shed, failed), pnmem_reservation_cancel(r). Each reservation is settled or
 * cancelled once; 0 and unknown values are ignored. pnmem_admit_reserved returns
 * as pnmem_admit, and -1 if reservation is NULL; on -1 nothing is reserved.
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
PNMEM_C_API void pnmem_reservation_settle(pnmem_reservation reservation);
PNMEM_C_API void pnmem_reservation_cancel(pnmem_reservation reservation);
/* Bytes reserved and not yet seen by a sample (0 on failure). */
PNMEM_C_API uint64_t pnmem_pending_bytes(void);

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
 * (level PNMEM_LEVEL_OK, degraded false), with the note "error: operator config". */
PNMEM_C_API pnmem_ladder_plan pnmem_plan_ladder(pnmem_level level, int max_slots, int prefill_window, bool kv_q4);

/* Where pnmem's log lines go (e.g. the ladder's clamp line, a failure inside pnmem);
 * NULL silences them. A sink that is C++ and throws makes the call that logged
 * return its error value. */
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
 * acquirers (below 0: 0), following the process watcher's level changes (start
 * the watcher first). NULL on failure. */
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

/* Lower-case name of a level ("ok", ...), a static string; "invalid" for a value
 * outside [PNMEM_LEVEL_OK, PNMEM_LEVEL_CRITICAL]. */
PNMEM_C_API const char* pnmem_level_name(pnmem_level level);

#ifdef __cplusplus
}
#endif

#endif /* PNMEM_PNMEM_C_H */
