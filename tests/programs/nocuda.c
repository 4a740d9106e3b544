/*
 * nocuda.c — a program that never touches CUDA and is not even linked to libcudart: stepprof
 * preloaded into it (as into a shell, `make` or a DataLoader worker) must stay inert, write no file,
 * print nothing of its own, and leave the program's output and exit code alone.
 *
 * Stdout: `nocuda: hello from stdout`. Stderr: `nocuda: hello from stderr`. Exit code 3.
 */
#include <stdio.h>

int main(void)
{
    printf("nocuda: hello from stdout\n");
    fprintf(stderr, "nocuda: hello from stderr\n");
    return 3;
}
