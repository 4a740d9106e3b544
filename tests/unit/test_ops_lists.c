/* tests/unit/test_ops_lists.c — exporters/ops_lists.c on the flattened
 * sizes texts torch's NVTX mode writes (the rules in that file's header),
 * with the overload tables of torch 2.15's schemas for the operators used:
 * a list of more than 30 tensors, an empty list, an out= overload, lists
 * told apart by the next op's list, and a choice made from evidence that
 * must not be remembered for another event with the same text. The
 * operator table (collectors/ops.c) is stood in for; events live in one
 * chunk of a pool owned by one thread, as sp_ev_owner reads them. */
#include "../../exporters/ops_trace.h"
#include "../../collectors/ops.h"
#include "../../collectors/ranges.h"
#include "../../collectors/strings.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

unsigned char *sp_ev_pool_base;   /* collectors/events.c's, not linked */
static sp_thread_t thread = {.tid = 7};

static uint32_t ADD, ADDCDIV, STACK, FUSED, NORM;

const char *sp_ops_list_kinds(uint32_t name)
{
    if (name == ADD)   /* Scalar, List, ScalarList, Tensor */
        return "L.\tLL.\tL.\tLT.";
    if (name == ADDCDIV)
        return "LLL.\tLLLT\tLLL.";
    if (name == STACK)
        return "L.\t!L.T";
    if (name == FUSED)   /* _fused_adamw_, _fused_adamw_.tensor_lr */
        return "LLLLLL.......TT\tLLLLLLT......TT";
    if (name == NORM)
        return "L..";
    return NULL;
}

/* Regroups the texts as one cycle's operator events, in this order; out[i]: the Input Dims read back. */
static void regroup(size_t n, const uint32_t *names, const char *const *texts, const char **out)
{
    sp_chunk_t *c = (sp_chunk_t *)(void *)sp_ev_pool_base;
    atomic_store(&c->owner, &thread);
    sp_event_ref_t ev[16];
    for (size_t i = 0; i < n; i++) {
        sp_event_t *e = &c->ev[i];
        memset(e, 0, sizeof *e);
        e->kind = SP_EV_RANGE;
        e->flags = SP_RANGE_OP;
        e->name = names[i];
        e->a[2] = sp_str_intern(texts[i]);
        ev[i].ev = e;
    }
    sp_ops_regroup(ev, n);
    for (size_t i = 0; i < n; i++)
        out[i] = sp_str_get((uint32_t)ev[i].ev->a[2]);
}

#define EXPECT(got, want) CHECK(strcmp((got), (want)) == 0, "got %s, want %s", (got), (want))

/* A list of n tensors of `size`, flattened, and its Kineto form. */
static char *repeat(const char *size, int n)
{
    char *s = malloc((strlen(size) + 2) * (size_t)n + 1);
    s[0] = 0;
    for (int i = 0; i < n; i++)
        strcat(strcat(s, i ? ", " : ""), size);
    return s;
}

static void check_long_and_out(void)
{
    /* clip_grad_norm_'s _foreach_norm over 31 gradients: Kineto writes the list as []; 30 are written. */
    char *g31 = repeat("[4, 4]", 31), *g30 = repeat("[4, 4]", 30), t31[512], t30[512], k30[512];
    snprintf(t31, sizeof t31, "[%s, [], []]", g31);
    snprintf(t30, sizeof t30, "[%s, [], []]", g30);
    snprintf(k30, sizeof k30, "[[%s], [], []]", g30);
    const char *out[3];
    regroup(2, (uint32_t[]){NORM, NORM}, (const char *[]){t31, t30}, out);
    EXPECT(out[0], "[[], [], []]");
    EXPECT(out[1], k30);
    /* stack of four 0-dim losses: stack(list of 4, dim), not stack.out(list of 3, dim, out). */
    regroup(1, (uint32_t[]){STACK}, (const char *[]){"[[], [], [], [], []]"}, out);
    EXPECT(out[0], "[[[], [], [], []], []]");
    free(g31), free(g30);
}

static void check_fused_groups(void)
{
    /* Fused AdamW without amsgrad over a group of 2: params, grads, exp_avgs, exp_avg_sqs, the empty
     * max_exp_avg_sqs (one []), 2 step counts, 7 numbers and 2 absent tensors. Before it, the step
     * counts' _foreach_add_(steps, 1): 3 [] read as the Scalar overload on 2 or the Tensor one on 1;
     * the fused op after it on the thread says 2. */
    const char *adam = "[[3, 2], [2], [3, 2], [2], [3, 2], [2], [3, 2], [2], [], [], [], "
                       "[], [], [], [], [], [], [], [], []]";
    const char *out[2];
    regroup(2, (uint32_t[]){ADD, FUSED}, (const char *[]){"[[], [], []]", adam}, out);
    EXPECT(out[0], "[[[], []], []]");
    EXPECT(out[1], "[[[3, 2], [2]], [[3, 2], [2]], [[3, 2], [2]], [[3, 2], [2]], [], [[], []], "
                   "[], [], [], [], [], [], [], [], []]");
}

static void check_evidence_is_the_events_own(void)
{
    /* Two optimizers, one text: _foreach_add_ on [A, B, A, B] with a number is the List overload on
     * [A, B] twice before an op on [A, B] lists (SGD's grads + bufs), and the Scalar overload on four
     * before one on [A, B, A, B] (Adam's denom + eps). Twice: a choice evidence made is not remembered
     * for the next event, nor for the next cycle. */
    const char *text = "[[5, 5], [5], [5, 5], [5], []]";
    const uint32_t names[] = {ADD, ADDCDIV, ADD, ADDCDIV};
    const char *texts[] = {text, "[[5, 5], [5], [5, 5], [5], [5, 5], [5], []]", text,
                           "[[5, 5], [5], [5, 5], [5], [5, 5], [5], [5, 5], [5], [5, 5], [5], [5, 5], [5], []]"};
    for (int cycle = 0; cycle < 2; cycle++) {
        const char *out[4];
        regroup(4, names, texts, out);
        EXPECT(out[0], "[[[5, 5], [5]], [[5, 5], [5]], []]");
        EXPECT(out[2], "[[[5, 5], [5], [5, 5], [5]], []]");
    }
}

int main(void)
{
    sp_ev_pool_base = aligned_alloc(SP_CHUNK_BYTES, SP_CHUNK_BYTES);
    memset(sp_ev_pool_base, 0, SP_CHUNK_BYTES);
    ADD = sp_str_intern("aten::_foreach_add_");
    ADDCDIV = sp_str_intern("aten::_foreach_addcdiv_");
    STACK = sp_str_intern("aten::stack");
    FUSED = sp_str_intern("aten::_fused_adamw_");
    NORM = sp_str_intern("aten::_foreach_norm");
    check_long_and_out();
    check_fused_groups();
    check_evidence_is_the_events_own();
    free(sp_ev_pool_base);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
