/*
 * marker_lib.c — function-marker target whose step function lives in a shared library: each step
 * starts with a call of libmarkstep.so's markstep_train_step through this program's PLT
 * (PROF_MARKER=function:markstep_train_step). The loop is marker_common.c's: per step two
 * cudaLaunchKernel and one cudaMemcpy, `step i` on stdout, then `done`; exit 0.
 */
int marker_run(int argc, char **argv, void (*step)(int)); /* marker_common.c */
void markstep_train_step(int i);                           /* libmarkstep.so */

/* A direct call, so it goes through the PLT (a pointer to markstep_train_step taken before
 * stepprof starts would bypass any hook). */
static void step(int i)
{
    markstep_train_step(i);
}

int main(int argc, char **argv)
{
    return marker_run(argc, argv, step);
}
