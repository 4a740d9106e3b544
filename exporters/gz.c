/* exporters/gz.c — see gz.h. Two deflate engines, each dlopened on first
 * use: ISA-L's igzip (libisal.so.2; level 1 deflates a trace at several
 * times zlib's speed, with a crc32 that uses carry-less multiply) and zlib
 * (libz.so.1), the fallback when ISA-L is absent. Both write one gzip member
 * (header, one deflate stream, crc32 + size trailer), which every gzip
 * reader takes, Perfetto UI's included. Only the few entry points a
 * streaming deflate needs are used; z_stream's and isal_zstream's layouts
 * are their libraries' public ABI (zlib 1.x, ISA-L soname 2). */
#define _GNU_SOURCE
#include "gz.h"

#include "../collectors/log.h"
#include "export.h"
#include "writeback.h"

#include <dlfcn.h>
#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Level 1 in both: a trace is mostly repeated keys, which the fastest level
 * already shrinks ~10x; zlib's level 6 cost more than the plain export. */
#define SP_GZ_ZLIB_LEVEL 1
#define SP_GZ_ISAL_LEVEL 1

typedef int (*z_init2_fn)(z_streamp, int, int, int, int, int, const char *, int);
typedef int (*z_deflate_fn)(z_streamp, int);
typedef int (*z_end_fn)(z_streamp);
typedef const char *(*z_version_fn)(void);
typedef void (*i_init_fn)(struct isal_zstream *);
typedef int (*i_deflate_fn)(struct isal_zstream *);

static struct {
    pthread_once_t once;
    z_init2_fn init2;
    z_deflate_fn deflate;
    z_end_fn end;
    z_version_fn version;
    i_init_fn i_init;
    i_deflate_fn i_deflate;
    int said;           /* the engine line was printed (once per process) */
} lib = {.once = PTHREAD_ONCE_INIT};

struct sp_gz {
    int fd;
    uint64_t written, synced;   /* compressed bytes written; where the writeback was last started */
    int isal;           /* 1: ISA-L's stream below, 0: zlib's */
    z_stream z;
    struct isal_zstream *i;
    uint8_t *level_buf;
    unsigned char out[256 * 1024];
};

static void load(void)
{
    void *h = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        lib.i_init = (i_init_fn)dlsym(h, "isal_deflate_init");
        lib.i_deflate = (i_deflate_fn)dlsym(h, "isal_deflate");
    }
    h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        lib.init2 = (z_init2_fn)dlsym(h, "deflateInit2_");
        lib.deflate = (z_deflate_fn)dlsym(h, "deflate");
        lib.end = (z_end_fn)dlsym(h, "deflateEnd");
        lib.version = (z_version_fn)dlsym(h, "zlibVersion");
    }
}

static int have_isal(void)
{
    return lib.i_init && lib.i_deflate;
}

static int have_zlib(void)
{
    return lib.init2 && lib.deflate && lib.end && lib.version;
}

/* The engine for this file: ISA-L unless zlib was asked for or ISA-L is
 * missing; -1 when neither loads. */
static int pick(int want)
{
    pthread_once(&lib.once, load);
    int isal = want != SP_JOB_GZIP_ZLIB && have_isal();
    if (!isal && !have_zlib()) {
        sp_log(SP_LOG_ERROR, "use_gzip needs ISA-L or zlib (libisal.so.2 / libz.so.1: apt-get install libisal2 "
                             "zlib1g); writing this trace uncompressed");
        return -1;
    }
    if (!__atomic_exchange_n(&lib.said, 1, __ATOMIC_RELAXED)) {
        if (want == SP_JOB_GZIP_ISAL && !isal)
            sp_log(SP_LOG_WARN, "gzip_lib: isal: libisal.so.2 not found (apt-get install libisal2); "
                                "compressing with zlib");
        else if (isal)
            sp_log(SP_LOG_DEBUG, "gzip: ISA-L igzip level %d (libisal.so.2)", SP_GZ_ISAL_LEVEL);
        else
            sp_log(SP_LOG_DEBUG, "gzip: zlib %s level %d (libz.so.1)", lib.version(), SP_GZ_ZLIB_LEVEL);
    }
    return isal;
}

static int open_isal(sp_gz_t *g)
{
    g->i = calloc(1, sizeof *g->i);
    g->level_buf = malloc(ISAL_DEF_LVL1_DEFAULT);
    if (!g->i || !g->level_buf)
        return -1;
    lib.i_init(g->i);
    g->i->level = SP_GZ_ISAL_LEVEL;
    g->i->level_buf = g->level_buf;
    g->i->level_buf_size = ISAL_DEF_LVL1_DEFAULT;
    g->i->gzip_flag = IGZIP_GZIP;   /* default 10-byte gzip header, crc32 + isize trailer */
    g->i->flush = NO_FLUSH;
    return 0;
}

sp_gz_t *sp_gz_open(int fd, int want)
{
    int isal = pick(want);
    if (isal < 0)
        return NULL;
    sp_gz_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->fd = fd;
    g->isal = isal;
    int rc = isal ? open_isal(g)
                  /* windowBits 15 + 16 selects the gzip wrapper. */
                  : lib.init2(&g->z, SP_GZ_ZLIB_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, lib.version(),
                              (int)sizeof(z_stream)) != Z_OK;
    if (rc) {
        free(g->i);
        free(g->level_buf);
        free(g);
        return NULL;
    }
    return g;
}

static int put(sp_gz_t *g, size_t have)
{
    for (size_t off = 0; off < have;) {
        ssize_t k = write(g->fd, g->out + off, have - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        off += (size_t)k;
    }
    g->written += have;
    sp_writeback(g->fd, g->written, &g->synced);
    return 0;
}

/* Deflates what is pending; with finish, through the trailer. */
static int pump(sp_gz_t *g, int finish)
{
    for (;;) {
        int done, err;
        size_t have;
        if (g->isal) {
            struct isal_zstream *s = g->i;
            s->end_of_stream = (uint16_t)finish;
            s->next_out = g->out;
            s->avail_out = sizeof g->out;
            if (lib.i_deflate(s) != COMP_OK)
                return EIO;
            have = sizeof g->out - s->avail_out;
            done = finish ? s->internal_state.state == ZSTATE_END : s->avail_in == 0 && s->avail_out != 0;
        } else {
            g->z.next_out = g->out;
            g->z.avail_out = sizeof g->out;
            int rc = lib.deflate(&g->z, finish ? Z_FINISH : Z_NO_FLUSH);
            if (rc == Z_STREAM_ERROR)
                return EIO;
            have = sizeof g->out - g->z.avail_out;
            done = finish ? rc == Z_STREAM_END : g->z.avail_out != 0;
        }
        if ((err = put(g, have)) != 0)
            return err;
        if (done)
            return 0;
    }
}

int sp_gz_write(sp_gz_t *g, const void *buf, size_t len)
{
    while (len) {
        /* Both engines count input in 32 bits. */
        uint32_t n = len > (1u << 30) ? 1u << 30 : (uint32_t)len;
        if (g->isal) {
            g->i->next_in = (uint8_t *)(uintptr_t)buf;
            g->i->avail_in = n;
        } else {
            g->z.next_in = (unsigned char *)(uintptr_t)buf;
            g->z.avail_in = n;
        }
        int err = pump(g, 0);
        if (err)
            return err;
        buf = (const char *)buf + n;
        len -= n;
    }
    return 0;
}

int sp_gz_close(sp_gz_t *g)
{
    if (g->isal) {
        g->i->next_in = NULL;
        g->i->avail_in = 0;
    } else {
        g->z.next_in = NULL;
        g->z.avail_in = 0;
    }
    int err = pump(g, 1);
    if (!g->isal)
        lib.end(&g->z);
    free(g->i);
    free(g->level_buf);
    free(g);
    return err;
}
