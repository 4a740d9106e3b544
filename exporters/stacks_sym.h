/* exporters/stacks_sym.h — turns captured stack ids (collectors/stacks.h)
 * into text at export: "outermost;...;innermost", each frame
 * "function+0xOFF (module)" (C++ demangled) or "module+0xOFF" when the
 * address has no dynamic symbol, frames inside libstepprof dropped, ';' in a
 * frame replaced by '_' so the list splits back exactly. Python frames
 * ("file.py(42): fn") come first (outermost), in place of the interpreter's
 * own native frames. */
#ifndef SP_STACKS_SYM_H
#define SP_STACKS_SYM_H

#include <stdint.h>

struct sp_jw;
struct sp_rb;

/* One frame: "function+0xOFF (module)", "module+0xOFF", a Python frame's
 * name, or nothing for a frame inside libstepprof. innermost: pc is not a
 * return address. */
void sp_stacks_frame_text(struct sp_rb *b, uintptr_t pc, int innermost);

/* Text of stack id, cached for the life of the process; NULL for id 0, an
 * unknown id, or a stack with no frame left. */
const char *sp_stacks_text(uint32_t id);

/* The trace's `, "Call stack": "..."` API-event argument; nothing for NULL. */
void sp_stacks_write_arg(struct sp_jw *w, uint32_t id);

#endif
