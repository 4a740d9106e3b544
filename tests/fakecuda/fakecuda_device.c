/*
 * fakecuda_device.c - device management entry points: count, selection (per thread, as in CUDA),
 * properties of an H100-like device, attributes, limits, flags, peer access and reset.  The property
 * struct is the single source of truth: cudaDeviceGetAttribute reads the same values through a table of
 * field offsets, so the two can never disagree.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "fakecuda_int.h"

#define FC_SMS 132

static unsigned device_flags[FAKECUDA_MAX_DEVICES];
static enum cudaFuncCache cache_config[FAKECUDA_MAX_DEVICES];
static size_t limits[FAKECUDA_MAX_DEVICES][cudaLimitPersistingL2CacheSize + 1];
static const size_t limit_defaults[cudaLimitPersistingL2CacheSize + 1] = {
    [cudaLimitStackSize] = 1024,          [cudaLimitPrintfFifoSize] = 1 << 20,
    [cudaLimitMallocHeapSize] = 8 << 20,  [cudaLimitDevRuntimeSyncDepth] = 2,
    [cudaLimitDevRuntimePendingLaunchCount] = 2048, [cudaLimitMaxL2FetchGranularity] = 64,
};

static bool valid_device(int d) {
  return d >= 0 && d < fc_cfg.ndev;
}

static void fill_props(struct cudaDeviceProp *p, int dev) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "FakeCUDA H100 (CPU stand-in)");
  memcpy(p->uuid.bytes, "fakecuda-gpu-00", 15);
  p->uuid.bytes[15] = (char)dev;
  p->totalGlobalMem = fc_cfg.mem_limit;
  p->sharedMemPerBlock = 48 << 10;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->memPitch = 2147483647;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
  p->totalConstMem = 64 << 10;
  p->major = 9;
  p->minor = 0;
  p->textureAlignment = 512;
  p->texturePitchAlignment = 32;
  p->multiProcessorCount = FC_SMS;
  p->canMapHostMemory = 1;
  p->maxTexture1D = 131072;
  p->maxTexture2D[0] = 131072, p->maxTexture2D[1] = 65536;
  p->maxTexture3D[0] = p->maxTexture3D[1] = p->maxTexture3D[2] = 16384;
  p->surfaceAlignment = 512;
  p->concurrentKernels = 1;
  p->ECCEnabled = 1;
  p->pciBusID = 0x18 + dev;
  p->asyncEngineCount = 3;
  p->unifiedAddressing = 1;
  p->memoryBusWidth = 5120;
  p->l2CacheSize = 50 << 20;
  p->persistingL2CacheMaxSize = 30 << 20;
  p->maxThreadsPerMultiProcessor = 2048;
  p->streamPrioritiesSupported = 1;
  p->globalL1CacheSupported = 1;
  p->localL1CacheSupported = 1;
  p->sharedMemPerMultiprocessor = 228 << 10;
  p->regsPerMultiprocessor = 65536;
  p->managedMemory = 1;
  p->multiGpuBoardGroupID = dev;
  p->concurrentManagedAccess = 1;
  p->computePreemptionSupported = 1;
  p->canUseHostPointerForRegisteredMem = 1;
  p->cooperativeLaunch = 1;
  p->sharedMemPerBlockOptin = 227 << 10;
  p->maxBlocksPerMultiProcessor = 32;
  p->accessPolicyMaxWindowSize = 134213632;
  p->reservedSharedMemPerBlock = 1 << 10;
  p->hostRegisterSupported = 1;
  p->sparseCudaArraySupported = 1;
  p->hostRegisterReadOnlySupported = 1;
  p->timelineSemaphoreInteropSupported = 1;
  p->memoryPoolsSupported = 1;
  p->gpuDirectRDMASupported = 1;
  p->memoryPoolSupportedHandleTypes = 1;
  p->deferredMappingCudaArraySupported = 1;
  p->ipcEventSupported = 1;
  p->clusterLaunch = 1;
  p->unifiedFunctionPointers = 1;
  p->deviceNumaId = -1;
  p->hostNumaId = -1;
  p->gpuPciDeviceID = 0x233010de; /* H100 SXM5 device id, NVIDIA vendor id */
}

/* Attribute -> property field; fields marked `wide` are size_t.  Attributes without a field use
 * `value` (clock rates left cudaDeviceProp in CUDA 13). */
static const struct attr_source {
  enum cudaDeviceAttr attr;
  short offset; /* -1: use value */
  bool wide;
  int value;
} attr_table[] = {
#define F(attr, field) {attr, (short)offsetof(struct cudaDeviceProp, field), false, 0}
#define W(attr, field) {attr, (short)offsetof(struct cudaDeviceProp, field), true, 0}
#define V(attr, v) {attr, -1, false, v}
    F(cudaDevAttrMaxThreadsPerBlock, maxThreadsPerBlock),
    F(cudaDevAttrMaxBlockDimX, maxThreadsDim[0]),
    F(cudaDevAttrMaxBlockDimY, maxThreadsDim[1]),
    F(cudaDevAttrMaxBlockDimZ, maxThreadsDim[2]),
    F(cudaDevAttrMaxGridDimX, maxGridSize[0]),
    F(cudaDevAttrMaxGridDimY, maxGridSize[1]),
    F(cudaDevAttrMaxGridDimZ, maxGridSize[2]),
    W(cudaDevAttrMaxSharedMemoryPerBlock, sharedMemPerBlock),
    W(cudaDevAttrTotalConstantMemory, totalConstMem),
    F(cudaDevAttrWarpSize, warpSize),
    W(cudaDevAttrMaxPitch, memPitch),
    F(cudaDevAttrMaxRegistersPerBlock, regsPerBlock),
    V(cudaDevAttrClockRate, 1980000),
    W(cudaDevAttrTextureAlignment, textureAlignment),
    V(cudaDevAttrGpuOverlap, 1),
    F(cudaDevAttrMultiProcessorCount, multiProcessorCount),
    F(cudaDevAttrIntegrated, integrated),
    F(cudaDevAttrCanMapHostMemory, canMapHostMemory),
    F(cudaDevAttrMaxTexture1DWidth, maxTexture1D),
    F(cudaDevAttrMaxTexture2DWidth, maxTexture2D[0]),
    F(cudaDevAttrMaxTexture2DHeight, maxTexture2D[1]),
    W(cudaDevAttrSurfaceAlignment, surfaceAlignment),
    F(cudaDevAttrConcurrentKernels, concurrentKernels),
    F(cudaDevAttrEccEnabled, ECCEnabled),
    F(cudaDevAttrPciBusId, pciBusID),
    F(cudaDevAttrPciDeviceId, pciDeviceID),
    V(cudaDevAttrMemoryClockRate, 2619000),
    F(cudaDevAttrGlobalMemoryBusWidth, memoryBusWidth),
    F(cudaDevAttrL2CacheSize, l2CacheSize),
    F(cudaDevAttrMaxThreadsPerMultiProcessor, maxThreadsPerMultiProcessor),
    F(cudaDevAttrAsyncEngineCount, asyncEngineCount),
    F(cudaDevAttrUnifiedAddressing, unifiedAddressing),
    F(cudaDevAttrPciDomainId, pciDomainID),
    W(cudaDevAttrTexturePitchAlignment, texturePitchAlignment),
    F(cudaDevAttrComputeCapabilityMajor, major),
    F(cudaDevAttrComputeCapabilityMinor, minor),
    F(cudaDevAttrStreamPrioritiesSupported, streamPrioritiesSupported),
    F(cudaDevAttrGlobalL1CacheSupported, globalL1CacheSupported),
    F(cudaDevAttrLocalL1CacheSupported, localL1CacheSupported),
    W(cudaDevAttrMaxSharedMemoryPerMultiprocessor, sharedMemPerMultiprocessor),
    F(cudaDevAttrMaxRegistersPerMultiprocessor, regsPerMultiprocessor),
    F(cudaDevAttrManagedMemory, managedMemory),
    F(cudaDevAttrIsMultiGpuBoard, isMultiGpuBoard),
    F(cudaDevAttrMultiGpuBoardGroupID, multiGpuBoardGroupID),
    V(cudaDevAttrSingleToDoublePrecisionPerfRatio, 2),
    F(cudaDevAttrConcurrentManagedAccess, concurrentManagedAccess),
    F(cudaDevAttrComputePreemptionSupported, computePreemptionSupported),
    F(cudaDevAttrCanUseHostPointerForRegisteredMem, canUseHostPointerForRegisteredMem),
    F(cudaDevAttrCooperativeLaunch, cooperativeLaunch),
    W(cudaDevAttrMaxSharedMemoryPerBlockOptin, sharedMemPerBlockOptin),
    F(cudaDevAttrHostRegisterSupported, hostRegisterSupported),
    F(cudaDevAttrMaxBlocksPerMultiprocessor, maxBlocksPerMultiProcessor),
    F(cudaDevAttrMaxPersistingL2CacheSize, persistingL2CacheMaxSize),
    F(cudaDevAttrMaxAccessPolicyWindowSize, accessPolicyMaxWindowSize),
    W(cudaDevAttrReservedSharedMemoryPerBlock, reservedSharedMemPerBlock),
    F(cudaDevAttrMemoryPoolsSupported, memoryPoolsSupported),
    F(cudaDevAttrGPUDirectRDMASupported, gpuDirectRDMASupported),
    F(cudaDevAttrClusterLaunch, clusterLaunch),
    F(cudaDevAttrIpcEventSupport, ipcEventSupported),
    V(cudaDevAttrMemSyncDomainCount, 4),
    F(cudaDevAttrNumaId, deviceNumaId),
    F(cudaDevAttrHostNumaId, hostNumaId),
#undef F
#undef W
#undef V
};

static cudaError_t get_attribute(int *value, enum cudaDeviceAttr attr, int dev) {
  if (!value) return cudaErrorInvalidValue;
  if (!valid_device(dev)) return cudaErrorInvalidDevice;
  struct cudaDeviceProp p;
  fill_props(&p, dev);
  *value = 0; /* attributes of features the stand-in lacks */
  for (size_t i = 0; i < sizeof attr_table / sizeof attr_table[0]; i++) {
    const struct attr_source *a = &attr_table[i];
    if (a->attr != attr) continue;
    if (a->offset < 0) {
      *value = a->value;
    } else if (a->wide) {
      size_t v;
      memcpy(&v, (const char *)&p + a->offset, sizeof v);
      *value = (int)v;
    } else {
      memcpy(value, (const char *)&p + a->offset, sizeof *value);
    }
  }
  return cudaSuccess;
}

static cudaError_t get_properties(struct cudaDeviceProp *p, int dev) {
  if (!p) return cudaErrorInvalidValue;
  if (!valid_device(dev)) return cudaErrorInvalidDevice;
  fill_props(p, dev);
  return cudaSuccess;
}

FC_API(cudaGetDeviceProperties, (struct cudaDeviceProp * prop, int device), get_properties(prop, device))
FC_API(cudaDeviceGetAttribute, (int *value, enum cudaDeviceAttr attr, int device), get_attribute(value, attr, device))

/* ---- selection ---- */

static cudaError_t device_count(int *count) {
  if (!count) return cudaErrorInvalidValue;
  *count = fc_cfg.ndev;
  return fc_cfg.ndev ? cudaSuccess : cudaErrorNoDevice;
}

static cudaError_t set_device(int dev) {
  if (!valid_device(dev)) return cudaErrorInvalidDevice;
  fc_tls.device = dev;
  return cudaSuccess;
}

static cudaError_t get_device(int *dev) {
  if (!dev) return cudaErrorInvalidValue;
  *dev = fc_tls.device;
  return cudaSuccess;
}

FC_API(cudaGetDeviceCount, (int *count), device_count(count))
FC_API(cudaSetDevice, (int device), set_device(device))
FC_API(cudaGetDevice, (int *device), get_device(device))
FC_API(cudaInitDevice, (int device, unsigned int deviceFlags FC_UNUSED, unsigned int flags FC_UNUSED),
       valid_device(device) ? cudaSuccess : cudaErrorInvalidDevice)
FC_API(cudaChooseDevice, (int *device, const struct cudaDeviceProp *prop),
       device && prop ? (*device = 0, cudaSuccess) : cudaErrorInvalidValue)

/* ---- per-device settings ---- */

static cudaError_t get_flags(unsigned *flags) {
  if (!flags) return cudaErrorInvalidValue;
  *flags = device_flags[fc_tls.device];
  return cudaSuccess;
}

static cudaError_t set_limit(enum cudaLimit limit, size_t value) {
  if ((unsigned)limit > cudaLimitPersistingL2CacheSize) return cudaErrorUnsupportedLimit;
  limits[fc_tls.device][limit] = value ? value : 1; /* 0 is "never set": see get_limit */
  return cudaSuccess;
}

static cudaError_t get_limit(size_t *value, enum cudaLimit limit) {
  if (!value) return cudaErrorInvalidValue;
  if ((unsigned)limit > cudaLimitPersistingL2CacheSize) return cudaErrorUnsupportedLimit;
  size_t v = limits[fc_tls.device][limit];
  *value = v ? v : limit_defaults[limit];
  return cudaSuccess;
}

static cudaError_t get_cache_config(enum cudaFuncCache *out) {
  if (!out) return cudaErrorInvalidValue;
  *out = cache_config[fc_tls.device];
  return cudaSuccess;
}

FC_API(cudaSetDeviceFlags, (unsigned int flags), (device_flags[fc_tls.device] = flags, cudaSuccess))
FC_API(cudaGetDeviceFlags, (unsigned int *flags), get_flags(flags))
FC_API(cudaDeviceSetLimit, (enum cudaLimit limit, size_t value), set_limit(limit, value))
FC_API(cudaDeviceGetLimit, (size_t *pValue, enum cudaLimit limit), get_limit(pValue, limit))
FC_API(cudaDeviceSetCacheConfig, (enum cudaFuncCache cacheConfig),
       (cache_config[fc_tls.device] = cacheConfig, cudaSuccess))
FC_API(cudaDeviceGetCacheConfig, (enum cudaFuncCache * pCacheConfig), get_cache_config(pCacheConfig))

/* ---- peers, bus ids, reset ---- */

static cudaError_t can_access_peer(int *can, int dev, int peer) {
  if (!can) return cudaErrorInvalidValue;
  if (!valid_device(dev) || !valid_device(peer)) return cudaErrorInvalidDevice;
  *can = dev != peer;
  return cudaSuccess;
}

static cudaError_t pci_bus_id(char *out, int len, int dev) {
  if (!out || len <= 0) return cudaErrorInvalidValue;
  if (!valid_device(dev)) return cudaErrorInvalidDevice;
  snprintf(out, (size_t)len, "00000000:%02X:00.0", 0x18 + dev);
  return cudaSuccess;
}

static cudaError_t device_reset(void) {
  int dev = fc_tls.device;
  fc_wait_until(atomic_load(&fc_dev[dev].all_busy));
  fc_mem_reset_device(dev);
  device_flags[dev] = 0;
  fc_tls.last_error = cudaSuccess;
  return cudaSuccess;
}

FC_API(cudaDeviceCanAccessPeer, (int *canAccessPeer, int device, int peerDevice),
       can_access_peer(canAccessPeer, device, peerDevice))
FC_API(cudaDeviceEnablePeerAccess, (int peerDevice, unsigned int flags FC_UNUSED),
       valid_device(peerDevice) && peerDevice != fc_tls.device ? cudaSuccess : cudaErrorInvalidDevice)
FC_API(cudaDeviceDisablePeerAccess, (int peerDevice),
       valid_device(peerDevice) && peerDevice != fc_tls.device ? cudaSuccess : cudaErrorInvalidDevice)
FC_API(cudaDeviceGetPCIBusId, (char *pciBusId, int len, int device), pci_bus_id(pciBusId, len, device))
FC_API(cudaDeviceReset, (void), device_reset())
