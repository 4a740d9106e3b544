/* collectors/rank.h — this process's rank in a multi-process job (from the
 * launcher's environment, or told by torch.distributed), the `ranks` list
 * syntax and the backend. */
#ifndef SP_RANK_H
#define SP_RANK_H

#include <stddef.h>

typedef struct sp_rank {
    long rank;           /* -1: not launched as one rank of a job */
    long world;          /* -1: unknown */
    long local;          /* -1: unknown */
    const char *source;  /* launcher that said so ("torchrun", "Open MPI", ...), "" if none */
} sp_rank_t;

void sp_rank_init(void);            /* reads the environment; call once before sp_rank() */
void sp_rank_warn(void);            /* one warning per launcher variable that is set but not a number */
const sp_rank_t *sp_rank(void);
/* The rank a process learned itself (torch.distributed's) when none was
 * known: a launcher variable the program has set since wins; 1 if taken. It
 * then outlives sp_rank_init. */
int sp_rank_learn(long rank, long world, const char *source);

/* 1 if rank is in spec ("0,8-15"), 0 if not, -1 with why filled if spec is malformed. */
int sp_rank_in_list(const char *spec, long rank, char *why, size_t n);

/* The backend a process told (torch.distributed's "gloo", "nccl", ...), else
 * "nccl" when an NCCL (or RCCL) library is loaded in the process (PyTorch
 * always loads it), else NULL. */
const char *sp_rank_backend(void);
void sp_rank_tell_backend(const char *backend);

#endif
