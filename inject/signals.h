/* inject/signals.h — installs the signal step marker's handler. */
#ifndef SP_SIGNALS_H
#define SP_SIGNALS_H

int sp_signal_install(int signo);   /* 0 on success; one stepprof: line on failure */

#endif
