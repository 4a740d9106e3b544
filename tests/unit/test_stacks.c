/* tests/unit/test_stacks.c — the stack table (collectors/stacks.c): ids from
 * 8 threads interning the same stacks at once, each id back to its own
 * return addresses. The stacks come in 2000 groups of 16 whose probes start
 * at the same slot, and the threads meet at a barrier before each group, so
 * they race to insert into one cluster. Built with SP_STACKS_TEST, which yields after each
 * lock-free lookup that missed: a reader that read the slot its probe ended
 * on a second time (and took whatever stack an insert had put there) gave
 * ~25000 of 32000 ids wrong so, and 3-14 without the yield. */
#include "../../collectors/stacks.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { GROUPS = 2000, PER = 16, THREADS = 8, SLOTS_SEEN = 1 << 17 };

static void *stack_pc[GROUPS * PER];
static _Atomic long wrong, unknown;
static pthread_barrier_t at_group;

static uint64_t rnd_state = 42;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* GROUPS groups of PER one-frame stacks, each group's stacks with one home
 * slot: random candidates counted per home, then drawn again (the same
 * sequence) into the first GROUPS homes that had PER of them. */
static int pick_stacks(void)
{
    enum { CANDIDATES = SLOTS_SEEN * 12 };
    uint16_t *count = calloc(SLOTS_SEEN, sizeof *count);
    int32_t *group = malloc(SLOTS_SEEN * sizeof *group);
    uint8_t *have = calloc(GROUPS, 1);
    if (!count || !group || !have)
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        rnd_state = 42;
        for (size_t k = 0; k < CANDIDATES; k++) {
            void *pc = (void *)(uintptr_t)((rnd() | 1) & 0x7fffffffffffull);
            uint32_t home = sp_stack_home_test(&pc, 1) & (SLOTS_SEEN - 1);
            if (pass == 0) {
                count[home] += count[home] < PER;
            } else if (group[home] >= 0 && have[group[home]] < PER) {
                stack_pc[group[home] * PER + have[group[home]]++] = pc;
            }
        }
        if (pass == 0) {
            int32_t g = 0;
            for (size_t h = 0; h < SLOTS_SEEN; h++)
                group[h] = count[h] == PER && g < GROUPS ? g++ : -1;
            if (g < GROUPS)
                return -1;
        }
    }
    size_t full = 0;
    for (size_t g = 0; g < GROUPS; g++)
        full += have[g] == PER;
    free(count);
    free(group);
    free(have);
    return full == GROUPS ? 0 : -1;
}

static void *racer(void *arg)
{
    size_t me = (size_t)arg;
    for (size_t g = 0; g < GROUPS; g++) {   /* group by group, each thread in its own order inside a group */
        pthread_barrier_wait(&at_group);
        for (size_t j = 0; j < PER; j++) {
            size_t i = g * PER + (j * (2 * me + 1) + me) % PER;
            uint32_t id = sp_stack_intern_test(&stack_pc[i], 1);
            size_t len = 0;
            const uintptr_t *pcs = id ? sp_stack_get(id, &len) : NULL;
            if (!pcs)
                atomic_fetch_add(&unknown, 1);
            else if (len != 1 || pcs[0] != (uintptr_t)stack_pc[i])
                atomic_fetch_add(&wrong, 1);
        }
    }
    return NULL;
}

int main(void)
{
    CHECK(sp_stack_init(8, SP_STACK_UNWIND_AUTO) == 0, "stack table made");
    CHECK(pick_stacks() == 0, "stacks picked: %d groups of %d with one home slot", GROUPS, PER);
    pthread_t th[THREADS];
    pthread_barrier_init(&at_group, NULL, THREADS);
    for (size_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, racer, (void *)t);
    for (size_t t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    CHECK(atomic_load(&wrong) == 0, "%ld of %d lookups from %d threads gave another stack's id", atomic_load(&wrong),
          GROUPS * PER * THREADS, THREADS);
    CHECK(atomic_load(&unknown) == 0, "%ld lookups gave no id", atomic_load(&unknown));
    /* Every stack has one id, whichever thread added it. */
    size_t dup = 0;
    for (size_t i = 0; i < GROUPS * PER; i++) {
        uint32_t a = sp_stack_intern_test(&stack_pc[i], 1), b = sp_stack_intern_test(&stack_pc[i], 1);
        dup += a != b || a == 0;
    }
    CHECK(dup == 0 && sp_stack_overflow_count() == 0, "one id per stack: %zu differ", dup);
    printf("test_stacks: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
