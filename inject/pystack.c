/* inject/pystack.c — the entry point inject/python/_stepprof_torch.py calls
 * (through ctypes.PyDLL, so with the GIL held) to turn the calling thread's
 * Python frame recording on when an operator window opens and off when it
 * closes, and to write its open frames when a step ends (collectors/pystack.h).
 * Only with with_stack, whose stack table (collectors/stacks.h) is then set
 * up: otherwise no profile function is ever installed. */
#include "hook.h"

#include "../collectors/pystack.h"
#include "../collectors/stacks.h"

/* on: 1 on, 0 off, -1 forget, 2 only asks (for tests), 3 a step is about to
 * end, 4 it has ended (sp_pystack_step_end); prefixes: see sp_pystack_set.
 * 1 when on. */
SP_EXPORT int stepprof_pystack(int on, const char *prefixes)
{
    if (on == 2)
        return sp_pystack_on();
    if (on == 3 || on == 4) {
        sp_pystack_step_end(on == 4);
        return sp_pystack_on();
    }
    if (on && !sp_stack_enabled)
        return 0;
    return sp_pystack_set(on, prefixes);
}
