/* tests/unit/test_radix.c — the radix sort orders by key and keeps equal keys
 * in their input order, whatever bits the keys span (all 64, a few, none),
 * and for empty and one-element input. */
#include "../../exporters/radix.h"
#include "check.h"

#include <stdlib.h>

static int cmp_stable(const void *a, const void *b)
{
    const sp_kv_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->val > y->val) - (x->val < y->val);
}

/* n keys masked to `mask` (few distinct values give long runs of equal keys). */
static void check_sort(size_t n, uint64_t mask, uint64_t offset)
{
    sp_kv_t *a = malloc((n + 1) * sizeof *a), *tmp = malloc((n + 1) * sizeof *tmp);
    sp_kv_t *want = malloc((n + 1) * sizeof *want);
    for (size_t i = 0; i < n; i++)
        want[i] = a[i] = (sp_kv_t){offset + (check_rnd() & mask), i};
    qsort(want, n, sizeof *want, cmp_stable);
    sp_kv_t *got = sp_radix_sort(a, tmp, n);
    CHECK(got == a || got == tmp, "n %zu: the result is in one of the two arrays", n);
    size_t bad = 0;
    for (size_t i = 0; got && i < n; i++)
        bad += got[i].key != want[i].key || got[i].val != want[i].val;
    CHECK(bad == 0, "n %zu mask %llx: %zu pairs out of place", n, (unsigned long long)mask, bad);
    free(a);
    free(tmp);
    free(want);
}

int main(void)
{
    check_sort(0, ~0ull, 0);
    check_sort(1, ~0ull, 0);
    check_sort(100000, ~0ull, 0);                    /* every digit differs */
    check_sort(100000, 0xfffffffull, 1ull << 60);    /* times in one window: a shared high part */
    check_sort(100000, 0x7, 0);                      /* long runs of equal keys */
    check_sort(1000, 0, 42);                         /* all equal: input order kept */
    check_sort(100000, 0xff00000000ff00ull, 0);      /* digits with gaps between them */
    printf("test_radix: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
