/*
 * fakecuda_graph.c - CUDA graphs, reduced to ordered lists of work items.  Nodes come from stream
 * capture (work submitted to a capturing stream is recorded instead of run) or from the explicit
 * kernel / memset / host / empty node calls; dependencies are accepted but replay is in insertion
 * order, which is one valid topological order for captured graphs.  cudaGraphLaunch replays every node
 * onto the launch stream, so the observer sees one op per node, as CUPTI reports graph kernels, tagged
 * with the graph's and the node's ids.
 * Only single-stream capture is modelled: events do not fork or join captures.
 */
#include <stdlib.h>
#include <string.h>

#include "fakecuda_int.h"

struct CUgraphNode_st {
  struct fc_work w;
  unsigned long long id; /* process-unique, reported as graph_node_id */
};

struct CUgraph_st {
  struct CUgraphNode_st **nodes;
  size_t n, cap;
  unsigned id;           /* process-unique, reported as graph_id */
};

/* Ids count from 1 so that 0 keeps meaning "not launched by a graph", as in CUPTI records. */
static _Atomic unsigned next_graph_id = 1;
static _Atomic unsigned long long next_node_id = 1;

struct CUgraphExec_st {
  struct fc_work *work;
  size_t n;
};

static cudaError_t graph_new(cudaGraph_t *out) {
  if (!out) return cudaErrorInvalidValue;
  *out = calloc(1, sizeof **out);
  if (!*out) return cudaErrorMemoryAllocation;
  (*out)->id = atomic_fetch_add(&next_graph_id, 1);
  return cudaSuccess;
}

static cudaError_t graph_destroy(cudaGraph_t g) {
  if (!g) return cudaErrorInvalidValue;
  for (size_t i = 0; i < g->n; i++) free(g->nodes[i]);
  free(g->nodes);
  free(g);
  return cudaSuccess;
}

static struct CUgraphNode_st *append(cudaGraph_t g, const struct fc_work *w) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    struct CUgraphNode_st **n = realloc(g->nodes, cap * sizeof *n);
    if (!n) return NULL;
    g->nodes = n;
    g->cap = cap;
  }
  struct CUgraphNode_st *node = malloc(sizeof *node);
  if (!node) return NULL;
  node->w = *w;
  node->id = atomic_fetch_add(&next_node_id, 1);
  g->nodes[g->n++] = node;
  return node;
}

cudaError_t fc_capture_append(struct CUgraph_st *g, const struct fc_work *w) {
  return append(g, w) ? cudaSuccess : cudaErrorMemoryAllocation;
}

static cudaError_t add_node(cudaGraphNode_t *out, cudaGraph_t g, const struct fc_work *w) {
  if (!out || !g) return cudaErrorInvalidValue;
  *out = append(g, w);
  return *out ? cudaSuccess : cudaErrorMemoryAllocation;
}

static cudaError_t add_kernel_node(cudaGraphNode_t *out, cudaGraph_t g, const struct cudaKernelNodeParams *p) {
  if (!p) return cudaErrorInvalidValue;
  struct fc_work w = {.kind = FAKECUDA_OP_KERNEL, .kern = fc_kernel(p->func), .grid = p->gridDim,
                      .block = p->blockDim, .shmem = p->sharedMemBytes};
  return w.kern ? add_node(out, g, &w) : cudaErrorInvalidDeviceFunction;
}

static cudaError_t add_memset_node(cudaGraphNode_t *out, cudaGraph_t g, const struct cudaMemsetParams *p) {
  if (!p || !p->dst || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
    return cudaErrorInvalidValue;
  struct fc_work w = {.kind = FAKECUDA_OP_MEMSET, .dst = p->dst, .width = p->width * p->elementSize,
                      .height = p->height ? p->height : 1, .dpitch = p->height > 1 ? p->pitch : p->width * p->elementSize,
                      .value = (int)p->value, .elem = p->elementSize};
  return add_node(out, g, &w);
}

static cudaError_t add_host_node(cudaGraphNode_t *out, cudaGraph_t g, const struct cudaHostNodeParams *p) {
  if (!p || !p->fn) return cudaErrorInvalidValue;
  struct fc_work w = {.kind = FC_WORK_HOSTFN, .fn = p->fn, .user = p->userData};
  return add_node(out, g, &w);
}

static const struct fc_work empty_work = {.kind = FC_WORK_EMPTY};

FC_API(cudaGraphCreate, (cudaGraph_t * pGraph, unsigned int flags FC_UNUSED), graph_new(pGraph))
FC_API(cudaGraphDestroy, (cudaGraph_t graph), graph_destroy(graph))
FC_API(cudaGraphAddKernelNode,
       (cudaGraphNode_t * pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies FC_UNUSED,
        size_t numDependencies FC_UNUSED, const struct cudaKernelNodeParams *pNodeParams),
       add_kernel_node(pGraphNode, graph, pNodeParams))
FC_API(cudaGraphAddMemsetNode,
       (cudaGraphNode_t * pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies FC_UNUSED,
        size_t numDependencies FC_UNUSED, const struct cudaMemsetParams *pMemsetParams),
       add_memset_node(pGraphNode, graph, pMemsetParams))
FC_API(cudaGraphAddHostNode,
       (cudaGraphNode_t * pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies FC_UNUSED,
        size_t numDependencies FC_UNUSED, const struct cudaHostNodeParams *pNodeParams),
       add_host_node(pGraphNode, graph, pNodeParams))
FC_API(cudaGraphAddEmptyNode,
       (cudaGraphNode_t * pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies FC_UNUSED,
        size_t numDependencies FC_UNUSED),
       add_node(pGraphNode, graph, &empty_work))

/* ---- executable graphs ---- */

/* The executable graph copies the nodes: the graph may be changed or destroyed afterwards. */
static cudaError_t instantiate(cudaGraphExec_t *out, cudaGraph_t g) {
  if (!out || !g) return cudaErrorInvalidValue;
  struct CUgraphExec_st *e = calloc(1, sizeof *e);
  if (!e || (g->n && !(e->work = malloc(g->n * sizeof *e->work)))) {
    free(e);
    return cudaErrorMemoryAllocation;
  }
  for (size_t i = 0; i < g->n; i++) {
    if (g->nodes[i]->w.kind == FC_WORK_EMPTY) continue;
    struct fc_work *w = &e->work[e->n++];
    *w = g->nodes[i]->w;
    w->graph_id = g->id;
    w->graph_node_id = g->nodes[i]->id;
  }
  *out = e;
  return cudaSuccess;
}

static cudaError_t exec_destroy(cudaGraphExec_t e) {
  if (!e) return cudaErrorInvalidValue;
  free(e->work);
  free(e);
  return cudaSuccess;
}

static cudaError_t graph_launch(const char *api, cudaGraphExec_t e, cudaStream_t hs, bool pt) {
  if (!e) return cudaErrorInvalidValue;
  struct CUstream_st *s = fc_stream(hs, pt);
  for (size_t i = 0; i < e->n; i++) {
    cudaError_t r = fc_submit(api, hs, s, &e->work[i], NULL);
    if (r != cudaSuccess) return r;
  }
  return cudaSuccess;
}

FC_API(cudaGraphInstantiate, (cudaGraphExec_t * pGraphExec, cudaGraph_t graph, unsigned long long flags FC_UNUSED),
       instantiate(pGraphExec, graph))
FC_API(cudaGraphInstantiateWithFlags,
       (cudaGraphExec_t * pGraphExec, cudaGraph_t graph, unsigned long long flags FC_UNUSED),
       instantiate(pGraphExec, graph))
FC_API(cudaGraphExecDestroy, (cudaGraphExec_t graphExec), exec_destroy(graphExec))
FC_API_TWINS(cudaGraphLaunch, _ptsz, (cudaGraphExec_t graphExec, cudaStream_t stream),
             graph_launch(__func__, graphExec, stream, per_thread))
FC_API_TWINS(cudaGraphUpload, _ptsz, (cudaGraphExec_t graphExec, cudaStream_t stream FC_UNUSED),
             graphExec ? cudaSuccess : cudaErrorInvalidValue)

/* ---- stream capture ---- */

static cudaError_t begin_capture(cudaStream_t hs, bool pt) {
  struct CUstream_st *s = fc_stream(hs, pt);
  if (s->legacy) return cudaErrorStreamCaptureUnsupported;
  if (s->capture) return cudaErrorIllegalState;
  return graph_new(&s->capture);
}

static cudaError_t end_capture(cudaStream_t hs, bool pt, cudaGraph_t *out) {
  struct CUstream_st *s = fc_stream(hs, pt);
  if (!out) return cudaErrorInvalidValue;
  if (!s->capture) return cudaErrorIllegalState;
  *out = s->capture;
  s->capture = NULL;
  return cudaSuccess;
}

static cudaError_t is_capturing(cudaStream_t hs, bool pt, enum cudaStreamCaptureStatus *status) {
  if (!status) return cudaErrorInvalidValue;
  *status = fc_stream(hs, pt)->capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

FC_API_TWINS(cudaStreamBeginCapture, _ptsz, (cudaStream_t stream, enum cudaStreamCaptureMode mode FC_UNUSED),
             begin_capture(stream, per_thread))
FC_API_TWINS(cudaStreamEndCapture, _ptsz, (cudaStream_t stream, cudaGraph_t *pGraph),
             end_capture(stream, per_thread, pGraph))
FC_API_TWINS(cudaStreamIsCapturing, _ptsz, (cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus),
             is_capturing(stream, per_thread, pCaptureStatus))
FC_API(cudaThreadExchangeStreamCaptureMode, (enum cudaStreamCaptureMode * mode),
       mode ? cudaSuccess : cudaErrorInvalidValue)
