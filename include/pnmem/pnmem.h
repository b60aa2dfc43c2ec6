/* pnmem/pnmem.h - the C ABI's former name, kept for one release: include pnmem/pnmem_c.h. */
#include "pnmem/pnmem_c.h"
