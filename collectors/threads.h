/* collectors/threads.h — how stepprof starts its own threads (exporter,
 * finisher, prefault helper): detached, named, with every signal blocked so
 * the program's signals are only ever delivered to the program's threads. */
#ifndef SP_THREADS_H
#define SP_THREADS_H

#include <pthread.h>

/* 0 on success, else the pthread_create error (nothing started). */
int sp_thread_spawn(void *(*fn)(void *), void *arg, const char *name, pthread_t *out);

#endif
