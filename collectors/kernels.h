/* collectors/kernels.h — kernel-name registry. nvcc-generated constructors
 * register each kernel's host stub with its mangled device name
 * (__cudaRegisterFunction) and CUDA 13 launch sites map a cudaKernel_t handle
 * to the stub (__cudaGetKernel). Records keep only the pointer; names are
 * looked up and demangled at export. */
#ifndef SP_KERNELS_H
#define SP_KERNELS_H

#include <stddef.h>

void sp_kern_register(const void *host_fun, const char *mangled);
void sp_kern_map_handle(const void *handle, const void *host_fun);

/* Demangled name for a stub (is_handle = 0) or a launch handle (1), in a
 * static buffer valid until the next call; NULL when unknown. Export only. */
const char *sp_kern_name(const void *ptr, int is_handle);

/* Demangled form of a mangled name in a static buffer, NULL if it is not a
 * mangled C++ name. Export only. */
const char *sp_kern_demangle(const char *mangled);
/* Reentrant forms: the name goes to the caller's buf (any thread, any time). */
const char *sp_kern_demangle_r(const char *mangled, char *buf, size_t size);
const char *sp_kern_name_r(const void *ptr, int is_handle, char *buf, size_t size);

/* Raw (mangled) name, for matching by the kernel marker; NULL when unknown. */
const char *sp_kern_mangled(const void *ptr, int is_handle);

void sp_kern_after_fork_child(void);

#endif
