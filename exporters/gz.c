/* exporters/gz.c — see gz.h. Only the four zlib entry points needed for a
 * gzip stream are used; z_stream's layout is zlib's stable public ABI. */
#define _GNU_SOURCE
#include "gz.h"

/* Level 1: a trace is mostly repeated keys, which the fastest level already
 * shrinks ~10x; level 6 cost more than the plain export itself. */
#define SP_GZ_LEVEL 1

#include "../collectors/log.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

typedef int (*init2_fn)(z_streamp, int, int, int, int, int, const char *, int);
typedef int (*deflate_fn)(z_streamp, int);
typedef int (*end_fn)(z_streamp);
typedef const char *(*version_fn)(void);

static struct {
    int tried;
    init2_fn init2;
    deflate_fn deflate;
    end_fn end;
    version_fn version;
} z;

struct sp_gz {
    z_stream s;
    int fd;
    unsigned char out[64 * 1024];
};

static int load_zlib(void)
{
    if (!z.tried) {
        z.tried = 1;
        void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h) {
            z.init2 = (init2_fn)dlsym(h, "deflateInit2_");
            z.deflate = (deflate_fn)dlsym(h, "deflate");
            z.end = (end_fn)dlsym(h, "deflateEnd");
            z.version = (version_fn)dlsym(h, "zlibVersion");
        }
    }
    return z.init2 && z.deflate && z.end && z.version;
}

sp_gz_t *sp_gz_open(int fd)
{
    if (!load_zlib()) {
        sp_log(SP_LOG_ERROR, "use_gzip needs zlib (libz.so.1: apt-get install zlib1g); writing this trace uncompressed");
        return NULL;
    }
    sp_gz_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->fd = fd;
    /* windowBits 15 + 16 selects the gzip wrapper. */
    if (z.init2(&g->s, SP_GZ_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, z.version(), (int)sizeof(z_stream)) != Z_OK) {
        free(g);
        return NULL;
    }
    return g;
}

static int pump(sp_gz_t *g, int flush)
{
    int rc;
    do {
        g->s.next_out = g->out;
        g->s.avail_out = sizeof g->out;
        rc = z.deflate(&g->s, flush);
        if (rc == Z_STREAM_ERROR)
            return EIO;
        size_t have = sizeof g->out - g->s.avail_out;
        for (size_t off = 0; off < have;) {
            ssize_t k = write(g->fd, g->out + off, have - off);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return k < 0 ? errno : EIO;
            off += (size_t)k;
        }
    } while (g->s.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    return 0;
}

int sp_gz_write(sp_gz_t *g, const void *buf, size_t len)
{
    g->s.next_in = (unsigned char *)(uintptr_t)buf;
    g->s.avail_in = (uInt)len;
    return pump(g, Z_NO_FLUSH);
}

int sp_gz_close(sp_gz_t *g)
{
    g->s.next_in = NULL;
    g->s.avail_in = 0;
    int err = pump(g, Z_FINISH);
    z.end(&g->s);
    free(g);
    return err;
}
