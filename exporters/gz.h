/* exporters/gz.h — gzip output for use_gzip, through a zlib dlopened with
 * RTLD_LOCAL at export time: the non-PIC libz.a cannot be linked into a
 * shared object, and a DT_NEEDED libz would load into every profiled process
 * whether or not it asked for gzip. */
#ifndef SP_GZ_H
#define SP_GZ_H

#include <stddef.h>

typedef struct sp_gz sp_gz_t;

sp_gz_t *sp_gz_open(int fd);   /* NULL (message printed) when zlib is unavailable */
int sp_gz_write(sp_gz_t *g, const void *buf, size_t len);   /* 0 or errno */
int sp_gz_close(sp_gz_t *g);   /* flushes the gzip trailer; 0 or errno; frees g */

#endif
