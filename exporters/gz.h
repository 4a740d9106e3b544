/* exporters/gz.h — gzip output for use_gzip, through ISA-L's igzip or zlib,
 * dlopened with RTLD_LOCAL at export time: the non-PIC static libraries
 * cannot be linked into a shared object, and a DT_NEEDED library would load
 * into every profiled process whether or not it asked for gzip. The engine
 * is gzip_lib (schedule/config_keys.h): auto = ISA-L when libisal.so.2
 * loads, else zlib. Either way the file is one gzip member. */
#ifndef SP_GZ_H
#define SP_GZ_H

#include <stddef.h>

typedef struct sp_gz sp_gz_t;

/* want: SP_JOB_GZIP_* (export.h). NULL (message printed) when no engine is
 * available. The first open of the process says which engine it uses at
 * log: debug. */
sp_gz_t *sp_gz_open(int fd, int want);
int sp_gz_write(sp_gz_t *g, const void *buf, size_t len);   /* 0 or errno */
int sp_gz_close(sp_gz_t *g);   /* flushes the gzip trailer; 0 or errno; frees g */

#endif
