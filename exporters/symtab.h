/* exporters/symtab.h — names for addresses inside the main executable that
 * dladdr cannot give: nvcc and most build systems do not export a program's
 * own functions (no -rdynamic), but its .symtab still names them, static
 * functions included. Read once from /proc/self/exe, at export only. */
#ifndef SP_SYMTAB_H
#define SP_SYMTAB_H

#include <stdint.h>

/* The function of the executable containing pc (its load address applied),
 * with pc's offset into it; NULL when pc is outside every sized function or
 * the executable has no symbol table. Thread-safe; the table is kept. */
const char *sp_symtab_exe_lookup(uintptr_t pc, uintptr_t *offset);

#endif
