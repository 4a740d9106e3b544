/* inject/exithold.h — the program's other threads held still while the exit
 * waits for stepprof's files (see exithold.c). */
#ifndef SP_EXITHOLD_H
#define SP_EXITHOLD_H

/* Parks every other thread of the process that can take a signal and is not
 * inside stepprof, waiting at most 200 ms for them. */
void sp_exit_hold_others(void);

/* Lets them go. */
void sp_exit_release_others(void);

#endif
