/* dlerr_lib.c — the two libraries of dlopen_err.c: -DDLERR_MISSING builds libdlerr_missing.so (removed
 * after linking), the default libdlerr_broken.so, which needs it. */
#ifdef DLERR_MISSING
int dlerr_missing(void) { return 1; }
#else
int dlerr_missing(void);
int dlerr_broken(void) { return dlerr_missing(); }
#endif
