/* tests/bindings/c_answers.c - the C binding's side of bindings_agree.py.
 *
 *   c_answers defaults                  the C library's defaults (pnmem_model_init, _engine_rule_init,
 *                                       _eviction_limits_default, _watcher_options_init, pnmem_policy_get,
 *                                       pnmem_retry_after_seconds), as one JSON object
 *   c_answers answers ROOT CONFIG...    for each snapshot line on stdin (cxx_answers.cpp says its form),
 *                                       writes ROOT/proc/meminfo and ROOT/proc/pressure/memory, feeds the die
 *                                       (pnmem_set_die), samples (pnmem_watcher_poll_now) with a watcher whose
 *                                       sampler reads ROOT, and prints pnmem_admit_after_eviction's answer
 *                                       for a model from pnmem_model_init and the config.json, every request
 *                                       field at its default, as one JSON line
 */
#define _POSIX_C_SOURCE 200809L /* ftruncate, fileno */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pnmem/pnmem_c.h>

static const char* kv_name(pnmem_kv_format f) {
  static const char* names[] = {"q4", "fp32", "f16", "bf16", "fp8", "q8_0", "q4_0"};
  return (int)f >= 0 && (int)f < PNMEM_KV_FORMATS ? names[f] : NULL;
}

static void print_kv(const char* key, pnmem_kv_format f) {
  const char* n = kv_name(f);
  if (n != NULL) {
    printf("\"%s\": \"%s\"", key, n);
  } else {
    printf("\"%s\": null", key);
  }
}

static const char* status_name(pnmem_admit_status s) {
  switch (s) {
    case PNMEM_ADMITTED: return "admitted";
    case PNMEM_CAPPED: return "capped";
    case PNMEM_DENIED: return "denied";
    case PNMEM_FAIL_OPEN: return "fail_open";
  }
  return "?";
}

static int defaults(void) {
  pnmem_model m;
  pnmem_engine_rule e;
  pnmem_watcher_options w;
  pnmem_policy p;
  if (pnmem_model_init(&m) != 0 || pnmem_engine_rule_init(&e) != 0 || pnmem_watcher_options_init(&w) != 0 ||
      pnmem_policy_get(&p) != 0) {
    fprintf(stderr, "c_answers: an init call failed\n");
    return 1;
  }
  const pnmem_eviction_limits l = pnmem_eviction_limits_default();
  printf("{\"request\": {");
  print_kv("kv", m.kv);
  static const char* zero_cost[] = {"policy", "hold", "admit", "reject"};
  printf(", \"gpu_resident\": %s, \"max_window\": %d, \"die\": %d, \"max_slots\": %d, \"zero_cost\": \"%s\"},\n",
         m.gpu_resident ? "true" : "false", m.max_window, m.die, m.max_slots,
         (int)m.zero_cost >= 0 && (int)m.zero_cost <= 3 ? zero_cost[m.zero_cost] : "?");
  printf(" \"eviction_limits\": {\"min_keep_tokens\": %d, \"min_keep_permille\": %d},\n", (int)l.min_keep_tokens,
         (int)l.min_keep_permille);
  static const char* engines[] = {"exact", "vllm", "llama.cpp"};
  printf(" \"engine_rule\": {\"engine\": \"%s\", \"block_tokens\": %u, \"max_batched_tokens\": %u, \"ubatch_tokens\": %u, "
         "\"seqs\": %u, \"state_copies\": %u, \"ssm_state_fp32\": %s, \"mtp\": %s, "
         "\"hybrid_manager_off\": %s},\n",
         (int)e.engine >= 0 && (int)e.engine < 3 ? engines[e.engine] : "?", (unsigned)e.block_tokens,
         (unsigned)e.max_batched_tokens, (unsigned)e.ubatch_tokens, (unsigned)e.seqs, (unsigned)e.state_copies,
         e.ssm_state_fp32 ? "true" : "false", e.mtp ? "true" : "false",
         e.hybrid_manager_off ? "true" : "false");
  printf(" \"watcher\": {\"poll_interval_ms\": %u, \"pressure_poll_interval_ms\": %u, \"step_down_dwell_ms\": %u},\n",
         (unsigned)w.poll_interval_ms, (unsigned)w.pressure_poll_interval_ms, (unsigned)w.step_down_dwell_ms);
  printf(" \"policy\": {\"host_reserve_min_bytes\": %" PRIu64 ", \"host_reserve_bp\": %u, \"psi_full_reject_bp\": %u, "
         "\"psi_some_tight_bp\": %u, \"psi_full_window_ms\": %u, \"die_reserve_bytes\": %" PRIu64
         ", \"load_spike_bytes\": %" PRIu64 ", \"ladder_disabled\": %s},\n",
         p.host_reserve_min_bytes, (unsigned)p.host_reserve_bp, (unsigned)p.psi_full_reject_bp,
         (unsigned)p.psi_some_tight_bp, (unsigned)p.psi_full_window_ms, p.die_reserve_bytes, p.load_spike_bytes,
         p.ladder_disabled ? "true" : "false");
  printf(" \"retry_after_seconds\": {");
  static const int64_t ms[] = {0, 1, 500, 999, 1000, 1001, 9999, 10000, 60000};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; ++i) {
    printf("%s\"%" PRId64 "\": %" PRId64, i ? ", " : "", ms[i], pnmem_retry_after_seconds(ms[i]));
  }
  printf("}}\n");
  return 0;
}

/* Rewrites `path` in place (the sampler keeps its files open and reads them again). */
static int write_in_place(const char* path, const char* text) {
  FILE* f = fopen(path, "r+");
  if (f == NULL) f = fopen(path, "w");
  if (f == NULL) return -1;
  const size_t n = strlen(text);
  const int ok = fwrite(text, 1, n, f) == n && fflush(f) == 0;
  /* Cut what a longer earlier text left after it. */
  const int cut = ftruncate(fileno(f), (off_t)n);
  fclose(f);
  return ok && cut == 0 ? 0 : -1;
}

static int answers(int argc, char** argv) {
  if (argc < 4) return 2;
  const char* root = argv[2];
  const int n_models = argc - 3;
  pnmem_model* models = calloc((size_t)n_models, sizeof *models);
  if (models == NULL) return 1;
  for (int i = 0; i < n_models; ++i) {
    char err[512];
    pnmem_engine_rule rule;
    pnmem_model_init(&models[i]);
    pnmem_engine_rule_init(&rule);
    if (pnmem_model_cost_from_hf_config_file(argv[3 + i], &rule, &models[i], err, sizeof err) != 0) {
      fprintf(stderr, "c_answers: %s\n", err);
      return 2;
    }
  }
  char meminfo[4096], pressure[4096];
  snprintf(meminfo, sizeof meminfo, "%s/proc/meminfo", root);
  snprintf(pressure, sizeof pressure, "%s/proc/pressure/memory", root);
  pnmem_watcher_options o;
  pnmem_watcher_options_init(&o);
  o.poll_interval_ms = 60000; /* the thread stays asleep: every sample is this program's poll_now */
  o.pressure_poll_interval_ms = 60000;
  o.root = root;
  if (pnmem_watcher_start_with(&o) != 0) {
    fprintf(stderr, "c_answers: the watcher did not start\n");
    return 1;
  }
  char line[4096];
  while (fgets(line, sizeof line, stdin) != NULL) {
    unsigned long long total, avail, die_free, die_budget;
    char some[32], full[32], running_text[2048];
    int prompt;
    int model;
    if (sscanf(line, "%llu %llu %31s %31s %llu %llu %d %d %2047s", &total, &avail, some, full, &die_free, &die_budget,
               &prompt, &model, running_text) != 9 ||
        model < 0 || model >= n_models) {
      fprintf(stderr, "c_answers: bad line: %s", line);
      return 2;
    }
    char text[1024];
    snprintf(text, sizeof text, "MemTotal: %llu kB\nMemFree: %llu kB\nMemAvailable: %llu kB\n", total / 1024, avail / 1024,
             avail / 1024);
    if (write_in_place(meminfo, text) != 0) return 1;
    snprintf(text, sizeof text,
             "some avg10=%s avg60=0.00 avg300=0.00 total=0\nfull avg10=%s avg60=0.00 avg300=0.00 total=0\n", some, full);
    if (write_in_place(pressure, text) != 0) return 1;
    if (pnmem_set_die(0, die_free, die_budget, 0, 0) != 0) return 1;
    pnmem_watcher_poll_now();
    int running[64];
    int n_running = 0;
    for (char* t = strtok(running_text, ","); t != NULL && n_running < 64; t = strtok(NULL, ",")) running[n_running++] = atoi(t);
    pnmem_request rq;
    pnmem_request_init(&rq);
    rq.n_tokens = prompt;
    pnmem_admit_answer a;
    pnmem_eviction ev;
    if (pnmem_admit_after_eviction(&models[model], &rq, running, n_running, NULL, &a, &ev, NULL) != 0) return 1;
    printf("{\"status\": \"%s\", \"reason\": \"%s\", \"fit\": %d, \"need\": %" PRIu64 ", \"limit\": %" PRIu64
           ", \"level\": \"%s\", ",
           status_name(a.status), a.reason, a.fit_tokens, a.need_bytes, a.limit_bytes, pnmem_level_name(a.level));
    print_kv("kv", models[model].kv == PNMEM_KV_UNSET ? models[model].normal_kv : models[model].kv);
    printf(", \"considered\": %s, \"after_eviction\": %s, \"evict_bytes\": %" PRIu64 ", \"cut_to\": %d, \"freed\": %" PRIu64
           "}\n",
           ev.considered ? "true" : "false", ev.after_eviction ? "true" : "false", ev.considered ? ev.evict_bytes : 0,
           ev.considered ? (int)ev.cut_to_tokens : 0, ev.considered ? ev.freed_bytes : 0);
    fflush(stdout);
  }
  pnmem_watcher_stop();
  free(models);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "defaults") == 0) return defaults();
  if (argc > 1 && strcmp(argv[1], "answers") == 0) return answers(argc, argv);
  fprintf(stderr, "usage: c_answers defaults | answers ROOT CONFIG...\n");
  return 2;
}
