/*
 * libmarkcaller.c — a plugin marker_dlopen loads with dlopen() after CUDA started (so after
 * stepprof installed its hooks): its markcaller_step(i) calls libmarkstep.so's markstep_train_step
 * through its own PLT, a GOT stepprof only gets to patch when it sees the dlopen.
 */
void markstep_train_step(int i);

void markcaller_step(int i)
{
    markstep_train_step(i);
}
