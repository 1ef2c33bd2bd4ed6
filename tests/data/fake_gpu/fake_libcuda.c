/* A fake CUDA driver for a dry run of benchmarks/gpu_check.py without a GPU: one device,
   a 300 MiB context, allocations counted and published per process in FAKE_CUDA_DIR
   (the fake pynvml beside it reads them as NVML's per-process usage). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONTEXT (300LL * 1024 * 1024)
#define SLOTS 4096
static long long live = 0;
static int context = 0;
static unsigned long long pointers[SLOTS];
static unsigned long long sizes[SLOTS];
static unsigned long long next_pointer = 0x100000;

static void publish(void) {
    const char *dir = getenv("FAKE_CUDA_DIR");
    char path[512];
    FILE *f;
    if (dir == NULL) return;
    snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
    f = fopen(path, "w");
    if (f == NULL) return;
    fprintf(f, "%lld\n", context ? CONTEXT + live : 0);
    fclose(f);
}

int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDeviceGetCount(int *count) { *count = 1; return 0; }
int cuDriverGetVersion(int *version) { *version = 12040; return 0; }
int cuDeviceGet(int *device, int index) {
    if (index != 0) return 101;
    *device = index;
    return 0;
}
int cuDeviceGetName(char *name, int len, int device) {
    (void)device;
    strncpy(name, "Fake GPU", (size_t)len);
    return 0;
}
int cuDevicePrimaryCtxRetain(void **ctx, int device) {
    (void)device;
    *ctx = (void *)0xC0;
    context = 1;
    publish();
    return 0;
}
int cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
int cuDevicePrimaryCtxRelease_v2(int device) {
    (void)device;
    context = 0;
    publish();
    return 0;
}
int cuMemAlloc_v2(unsigned long long *pointer, size_t size) {
    int i;
    for (i = 0; i < SLOTS; i++) {
        if (pointers[i] == 0) {
            next_pointer += size;
            pointers[i] = next_pointer;
            sizes[i] = size;
            *pointer = next_pointer;
            live += (long long)size;
            publish();
            return 0;
        }
    }
    return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}
int cuMemFree_v2(unsigned long long pointer) {
    int i;
    for (i = 0; i < SLOTS; i++) {
        if (pointers[i] == pointer) {
            pointers[i] = 0;
            live -= (long long)sizes[i];
            publish();
            return 0;
        }
    }
    return 1;
}
int cuGetErrorName(int code, const char **name) {
    *name = code == 101 ? "CUDA_ERROR_INVALID_DEVICE" : "CUDA_ERROR_UNKNOWN";
    return 0;
}
int cuGetErrorString(int code, const char **text) {
    *text = code == 101 ? "invalid device ordinal" : "unknown error";
    return 0;
}
