/* Consumer of the installed C ABI (pkg-config pnmem-c, CMake pnmem::c), compiled as C11 by a C compiler. */
#include <pnmem/pnmem_c.h>
#include <stdio.h>

int main(void) {
  pnmem_ladder_plan p = pnmem_plan_ladder(PNMEM_LEVEL_TIGHT, 8, 4096, false);
  printf("c %s %d %d\n", pnmem_level_name(p.level), p.max_slots, p.prefill_window);
  return 0;
}
