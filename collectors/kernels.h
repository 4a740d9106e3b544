/* collectors/kernels.h — kernel-name registry. nvcc-generated constructors
 * register each kernel's host stub with its mangled device name
 * (__cudaRegisterFunction) and CUDA 13 launch sites map a cudaKernel_t handle
 * to the stub (__cudaGetKernel). Records keep only the pointer; names are
 * looked up and demangled at export. */
#ifndef SP_KERNELS_H
#define SP_KERNELS_H

#include <stddef.h>

/* host_fun (a stub, or a driver CUfunction) named mangled; 1 when that
 * changed its name (it had none, or another: a CUfunction whose address an
 * unloaded module's function had), 0 when it already had this one. Records
 * keep only the pointer, so a window's records of the old function that are
 * exported after a rename show the new name. */
int sp_kern_register(const void *host_fun, const char *mangled);
void sp_kern_map_handle(const void *handle, const void *host_fun);

/* Demangled name for a stub (is_handle = 0) or a launch handle (1), NULL
 * when unknown. Resolved and demangled once per stub; the string stays valid
 * for the life of the process. */
const char *sp_kern_name(const void *ptr, int is_handle);

/* Demangled form of a mangled name, NULL if it is not a mangled C++ name.
 * Demangled once per distinct name; valid for the life of the process. */
const char *sp_kern_demangle(const char *mangled);

/* Raw (mangled) name, for matching by the kernel marker; NULL when unknown. */
const char *sp_kern_mangled(const void *ptr, int is_handle);

void sp_kern_after_fork_child(void);

#endif
