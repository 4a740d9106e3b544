/*
 * marker_dlopen.c — function-marker target whose step function is reached through a plugin
 * loaded after CUDA started: at step 0 it dlopen()s libmarkcaller.so by bare name (found through
 * this program's RUNPATH, $ORIGIN) with lazy binding, and each step calls its markcaller_step,
 * which calls libmarkstep.so's markstep_train_step through the plugin's own PLT. stepprof must patch
 * the GOT of an object that did not exist when it installed its hooks. libmarkstep.so itself is
 * linked (markstep_init), so the marked function is defined from the start.
 *
 * The loop is marker_common.c's. Exit 0; 1 when the plugin cannot be loaded (message on stderr).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int marker_run(int argc, char **argv, void (*step)(int)); /* marker_common.c */
void markstep_init(void);                                  /* libmarkstep.so */

static void (*plugin_step)(int);

static void step(int i)
{
    if (!plugin_step) {
        void *h = dlopen("libmarkcaller.so", RTLD_LAZY);
        *(void **)&plugin_step = h ? dlsym(h, "markcaller_step") : NULL;
        if (!plugin_step) {
            fprintf(stderr, "marker_dlopen: cannot load libmarkcaller.so: %s\n", dlerror());
            exit(1);
        }
    }
    plugin_step(i);
}

int main(int argc, char **argv)
{
    markstep_init();
    return marker_run(argc, argv, step);
}
