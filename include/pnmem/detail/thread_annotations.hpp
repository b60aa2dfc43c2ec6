// pnmem/detail/thread_annotations.hpp - Clang thread-safety annotations, no-ops elsewhere.
//
// With clang and -Wthread-safety the compiler checks that every member marked
// PNMEM_GUARDED_BY(mu) is touched only with `mu` held, that a function marked
// PNMEM_REQUIRES(mu) is called only with it held (PNMEM_EXCLUDES: only without),
// and, with -Wthread-safety-beta, that mutexes are taken in the order that
// PNMEM_ACQUIRED_AFTER declares. CI builds with all three as errors (.ci/run).
// The capability type is pnmem::detail::mutex (detail/mutex.hpp): libstdc++'s
// std::mutex carries no annotations, so the analysis cannot see it.
#pragma once

#if defined(__clang__)
#define PNMEM_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PNMEM_THREAD_ANNOTATION(x)
#endif

#define PNMEM_CAPABILITY(name) PNMEM_THREAD_ANNOTATION(capability(name))
#define PNMEM_SCOPED_CAPABILITY PNMEM_THREAD_ANNOTATION(scoped_lockable)
#define PNMEM_GUARDED_BY(mu) PNMEM_THREAD_ANNOTATION(guarded_by(mu))
#define PNMEM_PT_GUARDED_BY(mu) PNMEM_THREAD_ANNOTATION(pt_guarded_by(mu))
#define PNMEM_ACQUIRED_AFTER(...) PNMEM_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define PNMEM_ACQUIRED_BEFORE(...) PNMEM_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define PNMEM_REQUIRES(...) PNMEM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define PNMEM_EXCLUDES(...) PNMEM_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define PNMEM_ACQUIRE(...) PNMEM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define PNMEM_RELEASE(...) PNMEM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define PNMEM_RETURN_CAPABILITY(x) PNMEM_THREAD_ANNOTATION(lock_returned(x))
#define PNMEM_NO_THREAD_SAFETY_ANALYSIS PNMEM_THREAD_ANNOTATION(no_thread_safety_analysis)
