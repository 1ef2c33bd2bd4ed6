/*
 * Allocation tracking for onnxrt_backend_dev.monitoring: a small shim interposing the
 * C allocator (malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc, reallocarray, anonymous mmap and munmap).
 *
 * Two ways in:
 *
 * - LD_PRELOAD (the program run by `run`, `profile`, `spy --where`): every allocation is
 *   counted in per-thread counters (exact live bytes and their peak, flushed every 64 KiB),
 *   and allocations are SAMPLED by bytes: each byte has the same chance, with random
 *   exponential gaps of mean ONNXRT_ALLOC_MEAN bytes (tcmalloc's and Go's heap profilers
 *   do the same), so an allocation of s bytes is sampled with probability
 *   1 - exp(-s / mean), independently of the others. A sampled allocation records its
 *   size, address, thread, time and the Python stack of the thread as raw (code object,
 *   instruction) pairs, read from the frame chain with the offsets the observer uses
 *   (ONNXRT_ALLOC_LAYOUT). Its free is recorded too. Records go to a ring in this
 *   library's own memory (`onnxrt_alloc_ring`), which the observer, another process,
 *   reads with process_vm_readv: no thread, no pipe, no file in the program.
 *
 * - ctypes (a pytest block): `onnxrt_alloc_block_begin` rewrites the GOT entries of the
 *   allocator in every loaded object (and of those dlopen'ed later) to these hooks, and
 *   counts exactly the bytes allocated and still live of every allocation made inside
 *   the block (an address table), as pytest-memray does.
 *
 * Rules inside a hook: no allocation, no lock held across a call out (the block table's
 * mutex excepted, which pthread_atfork keeps consistent), no Python call except the two
 * that only read (PyGILState_GetThisThreadState, _Py_IsFinalizing), a per-thread guard
 * against re-entry. What is lost is counted, never waited for.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <execinfo.h>
#include <link.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN static
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- the ring read by the observer (its layout is read by _alloc/ring.py) ---------- */

#define RING_VERSION 2
#define RING_CAPACITY 2048 /* 2.2 MB: the pages written are resident in the program */
#define MAX_FRAMES 64
#define KIND_ALLOC 1
#define KIND_FREE 2
#define KIND_PEAK 3
#define FLAG_FINALIZING 1 /* the interpreter was finalizing */
#define FLAG_TRUNCATED 2  /* the stack was deeper than MAX_FRAMES */
#define FLAG_NO_THREAD 4  /* no Python thread state: a native thread */
#define FLAG_MMAP 8       /* an anonymous mmap, not the heap */
#define FLAG_IN_BLOCK 16  /* unused by the ring: reserved */

struct record {
    _Atomic uint64_t seq; /* index + 1 once written, 0 while being written */
    uint32_t kind;
    uint16_t flags;
    uint16_t nframes;
    uint64_t address;
    uint64_t size;
    uint64_t time_ns;  /* CLOCK_MONOTONIC */
    int64_t live;      /* exact live bytes of the process (per-thread counters flushed) */
    uint64_t tid;      /* kernel thread id */
    uint64_t caller;   /* the native return address of the allocation call */
    uint64_t nallocs;  /* allocations made by this thread so far (temporaries) */
    uint64_t caller2;  /* the return address one frame further out (0 unknown) */
    uint64_t frames[2 * MAX_FRAMES]; /* (code object, instruction pointer or lasti) */
    _Atomic uint64_t seq_end;         /* index + 1, written last */
};

struct ring {
    char magic[8];
    uint32_t version;
    uint32_t record_size;
    uint32_t capacity;
    uint32_t max_frames;
    int32_t pid;
    uint32_t state; /* bit 0 sampling, 1 stacks, 2 counting, 3 finalize known, 4 exiting */
    uint64_t mean;
    uint64_t fork_head;      /* first index written by this process (after a fork) */
    _Atomic uint64_t head;   /* next index to claim */
    _Atomic int64_t live;    /* exact live bytes (flushed per-thread counters) */
    _Atomic int64_t peak;    /* the highest `live` */
    _Atomic uint64_t allocs; /* allocation calls */
    _Atomic uint64_t allocated; /* bytes allocated (usable sizes) */
    _Atomic uint64_t frees;
    _Atomic uint64_t table_full;  /* sampled allocations whose free cannot be followed */
    _Atomic uint64_t reentrant;   /* allocations made inside a hook (not sampled) */
    _Atomic uint64_t peak_time;   /* CLOCK_MONOTONIC ns of the peak's last flush */
    _Atomic uint64_t samples;     /* sampled allocations */
    _Atomic uint64_t generation;  /* forks since the start */
    _Atomic uint64_t read;        /* written by the observer: 1 + the index it read up to */
    char why[104]; /* why stacks are off, when they are */
    uint64_t own;  /* bytes its start made resident (its data, all touched; the unwinder) */
    struct record records[RING_CAPACITY];
};

EXPORT struct ring onnxrt_alloc_ring;
/* What _alloc/ring.py reads by fixed offsets. */
_Static_assert(offsetof(struct record, frames) == 80, "record layout");
_Static_assert(offsetof(struct record, seq_end) == 1104, "record layout");
_Static_assert(sizeof(struct record) == 1112, "record layout");
_Static_assert(offsetof(struct ring, head) == 48, "ring layout");
_Static_assert(offsetof(struct ring, read) == 136, "ring layout");
_Static_assert(offsetof(struct ring, why) == 144, "ring layout");
_Static_assert(offsetof(struct ring, records) == 256, "ring layout");

/* ---- the real functions ----------------------------------------------------------- */

struct real {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    size_t (*usable)(void *);
    void *(*dlopen)(const char *, int);
    void *(*dlsym)(void *, const char *);
};
HIDDEN struct real real;
HIDDEN _Atomic int resolving; /* 1 while dlsym runs: allocations go to the bump buffer */

/* What every hook reads first, in one cache line. */
struct hot {
    int active;       /* counting or a block: a hook does more than pass the call on */
    int resolved;     /* the real functions are known */
    int glibc_chunks; /* glibc serves the allocations: its chunk headers are read */
    int counting;     /* live bytes are counted (and allocations maybe sampled) */
    int sampling;     /* allocations are sampled */
    int block_active; /* a block counts its allocations */
};
HIDDEN _Alignas(64) struct hot H;
#define resolved H.resolved
#define glibc_chunks H.glibc_chunks
#define counting H.counting
#define sampling H.sampling
#define block_active H.block_active

/* After counting, sampling or a block changes. */
HIDDEN void update_active(void) { H.active = counting || block_active; }

/* dlsym may allocate before malloc itself is known: a static buffer serves it. */
#define BUMP_SIZE (64 * 1024)
HIDDEN _Alignas(64) char bump[BUMP_SIZE];
HIDDEN _Atomic size_t bump_used;

HIDDEN void *bump_alloc(size_t size, size_t align) {
    if (align < 16) align = 16;
    size_t need = size + align + 16;
    size_t at = atomic_fetch_add(&bump_used, need);
    if (at + need > BUMP_SIZE) return NULL;
    uintptr_t p = (uintptr_t)(bump + at + 16);
    p = (p + align - 1) & ~(uintptr_t)(align - 1);
    ((size_t *)p)[-1] = size;
    return (void *)p;
}

HIDDEN inline int in_bump(const void *p) {
    return (const char *)p >= bump && (const char *)p < bump + BUMP_SIZE;
}

HIDDEN void resolve(void) {
    if (resolved || atomic_exchange(&resolving, 1)) return;
    real.malloc = dlsym(RTLD_NEXT, "malloc");
    real.calloc = dlsym(RTLD_NEXT, "calloc");
    real.realloc = dlsym(RTLD_NEXT, "realloc");
    real.free = dlsym(RTLD_NEXT, "free");
    real.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    real.memalign = dlsym(RTLD_NEXT, "memalign");
    real.valloc = dlsym(RTLD_NEXT, "valloc");
    real.pvalloc = dlsym(RTLD_NEXT, "pvalloc");
    real.mmap = dlsym(RTLD_NEXT, "mmap");
    real.munmap = dlsym(RTLD_NEXT, "munmap");
    real.usable = dlsym(RTLD_NEXT, "malloc_usable_size");
    real.dlopen = dlsym(RTLD_NEXT, "dlopen");
    real.dlsym = dlsym(RTLD_NEXT, "dlsym");
    resolved = real.malloc && real.calloc && real.realloc && real.free && real.mmap &&
               real.munmap && real.usable;
#if defined(__x86_64__)
    Dl_info where;
    if (resolved && dladdr((void *)real.malloc, &where) && where.dli_fname)
        glibc_chunks = strstr(where.dli_fname, "/libc.so") != NULL;
#endif
    atomic_store(&resolving, 0);
}

/* ---- configuration ---------------------------------------------------------------- */

struct layout {
    int minor;          /* 10..13 */
    long leaf;          /* tstate -> frame (3.10, 3.13) or cframe (3.11, 3.12) */
    long cframe;        /* cframe -> current_frame, -1 without cframe */
    long back, code, instr, lasti, owner;
    long firstline;     /* code -> co_firstlineno */
    long codebytes;     /* 3.10: code -> co_code (a bytes object); -1: the code's own size */
    int owner_check;    /* 3.12+: skip frames owned by the C stack */
};

HIDDEN struct layout L;
HIDDEN int stacks;           /* Python stacks are read */
HIDDEN double mean_bytes = 262144.0;
HIDDEN uint64_t seed_base;
HIDDEN long exit_wait_ns = 1000000000L;
HIDDEN void *(*this_thread_state)(void);
HIDDEN int (*is_finalizing)(void);

HIDDEN long parse_long(const char *s, int *ok) {
    long sign = 1, v = 0;
    int digits = 0;
    while (*s == ' ') s++;
    if (*s == '-') {
        sign = -1;
        s++;
    }
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        s++;
        digits++;
    }
    if (!digits || (*s && *s != ',' && *s != ' ')) *ok = 0;
    return sign * v;
}

/* ONNXRT_ALLOC_LAYOUT: "minor,leaf,cframe,back,code,instr,lasti,owner,firstline,codebytes" */
#define LAYOUT_FIELDS 10
HIDDEN int parse_layout(const char *s) {
    long v[LAYOUT_FIELDS];
    int ok = 1;
    for (int i = 0; i < LAYOUT_FIELDS; i++) {
        v[i] = parse_long(s, &ok);
        while (*s && *s != ',') s++;
        if (i < LAYOUT_FIELDS - 1) {
            if (*s != ',') return 0;
            s++;
        }
    }
    if (!ok || v[0] < 10 || v[0] > 13) return 0;
    for (int i = 1; i < LAYOUT_FIELDS; i++)
        if (v[i] < -1 || v[i] > 65536) return 0;
    L.minor = (int)v[0];
    L.leaf = v[1];
    L.cframe = v[2];
    L.back = v[3];
    L.code = v[4];
    L.instr = v[5];
    L.lasti = v[6];
    L.owner = v[7];
    L.firstline = v[8];
    L.codebytes = v[9];
    L.owner_check = L.minor >= 12 && L.owner >= 0;
    return L.leaf >= 0 && L.back >= 0 && L.code >= 0 && (L.instr >= 0 || L.lasti >= 0) &&
           L.firstline >= 0;
}

HIDDEN void set_why(const char *text) {
    size_t n = strlen(text);
    if (n >= sizeof(onnxrt_alloc_ring.why)) n = sizeof(onnxrt_alloc_ring.why) - 1;
    memcpy(onnxrt_alloc_ring.why, text, n);
    onnxrt_alloc_ring.why[n] = 0;
}

/* The interpreter the layout was made for must be the one running here. */
HIDDEN int python_matches(void) {
    const unsigned *hex = dlsym(RTLD_DEFAULT, "Py_Version");
    if (hex) return (int)((*hex >> 16) & 0xFF) == L.minor && (*hex >> 24) == 3;
    const char *(*get_version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    if (!get_version) return 0;
    const char *v = get_version();
    return v && v[0] == '3' && v[1] == '.' && v[2] == '1' && v[3] == '0' + (L.minor - 10) &&
           (v[4] < '0' || v[4] > '9');
}

/* Removes our own entry from LD_PRELOAD, in place, before Python copies the
 * environment: a program's subprocesses do not inherit the shim unless asked. */
HIDDEN void forget_preload(const char *path) {
    extern char **environ;
    size_t plen = strlen(path);
    if (!plen || !environ) return;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "LD_PRELOAD=", 11) != 0) continue;
        char *s = *e + 11, *out = s;
        const char *r = s;
        while (*r) {
            const char *start = r;
            while (*r && *r != ':' && *r != ' ') r++;
            size_t n = (size_t)(r - start);
            int ours = n == plen && memcmp(start, path, n) == 0;
            if (n && !ours) {
                if (out != s) *out++ = ':';
                memmove(out, start, n);
                out += n;
            }
            while (*r == ':' || *r == ' ') r++;
        }
        *out = 0;
        if (!*s) { /* nothing left: the entry goes */
            char **f = e;
            do {
                f[0] = f[1];
                f++;
            } while (f[0]);
        }
        return;
    }
}

HIDDEN void on_fork_child(void);
HIDDEN void on_fork_prepare(void);
HIDDEN void on_fork_parent(void);
HIDDEN void wait_for_observer(void);
HIDDEN pthread_key_t flush_key;
HIDDEN int flush_key_ok;
HIDDEN void flush_at_thread_exit(void *unused);
HIDDEN void warm_unwinder(void);
HIDDEN void touch_own(void);

HIDDEN void start(void);
HIDDEN long resident_bytes(void);

/* Its settings read, nothing of the tool stays in the program's environment (its own
 * subprocesses would inherit them), unless they load the shim too. */
HIDDEN void forget_settings(void) {
    static const char *const names[] = {
        "ONNXRT_ALLOC_MEAN", "ONNXRT_ALLOC_LAYOUT", "ONNXRT_ALLOC_SEED",
        "ONNXRT_ALLOC_EXIT_WAIT_NS", "ONNXRT_ALLOC_SHIM",
    };
    if (!getenv("ONNXRT_ALLOC_SHIM") || getenv("ONNXRT_ALLOC_CHILDREN")) return;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unsetenv(names[i]);
}

/* What the start made resident is the shim's own, taken off the program's figures. */
__attribute__((constructor)) HIDDEN void init(void) {
    long before = resident_bytes();
    start();
    long after = resident_bytes();
    if (onnxrt_alloc_ring.own && before > 0 && after >= before)
        onnxrt_alloc_ring.own = (uint64_t)(after - before);
    forget_settings();
}

HIDDEN void start(void) {
    resolve();
    struct ring *R = &onnxrt_alloc_ring;
    memcpy(R->magic, "ONNXALC", 8);
    R->version = RING_VERSION;
    R->record_size = sizeof(struct record);
    R->capacity = RING_CAPACITY;
    R->max_frames = MAX_FRAMES;
    R->pid = (int32_t)getpid();
    pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
    flush_key_ok = pthread_key_create(&flush_key, flush_at_thread_exit) == 0;
    const char *mean = getenv("ONNXRT_ALLOC_MEAN");
    if (!mean) return; /* loaded by ctypes for a block: nothing sampled */
    if (!resolved) {
        set_why("the allocator's functions could not be found");
        return;
    }
    int ok = 1;
    long m = parse_long(mean, &ok);
    if (!ok || m < 0) {
        set_why("ONNXRT_ALLOC_MEAN is not a number of bytes");
        return;
    }
    const char *seed = getenv("ONNXRT_ALLOC_SEED");
    if (seed) seed_base = (uint64_t)parse_long(seed, &ok);
    const char *wait = getenv("ONNXRT_ALLOC_EXIT_WAIT_NS");
    if (wait) {
        long w = parse_long(wait, &ok);
        if (w >= 0 && w <= 10000000000L) exit_wait_ns = w;
    }
    const char *path = getenv("ONNXRT_ALLOC_SHIM");
    if (path && !getenv("ONNXRT_ALLOC_CHILDREN")) forget_preload(path);
    counting = 1;
    sampling = m > 0;
    update_active();
    mean_bytes = m > 0 ? (double)m : 1.0;
    R->mean = (uint64_t)(m > 0 ? m : 0);
    const char *layout = getenv("ONNXRT_ALLOC_LAYOUT");
    this_thread_state = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    if (!is_finalizing) is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
    if (!layout || !parse_layout(layout))
        set_why("no interpreter layout was given to the shim");
    else if (!this_thread_state)
        set_why("the program is not a Python interpreter the shim can read");
    else if (!python_matches())
        set_why("the program's Python is not the version whose layout was checked");
    else
        stacks = 1;
    R->state = (uint32_t)(sampling | stacks << 1 | counting << 2 | (is_finalizing != NULL) << 3);
    touch_own(); /* once the header is whole: a reader never sees a mean of 0 */
    if (sampling) warm_unwinder();
    atexit(wait_for_observer);
}

/* ---- per-thread state ------------------------------------------------------------- */

struct tls {
    int64_t countdown; /* bytes until the next sample */
    int64_t delta;     /* live bytes not yet flushed */
    uint64_t nallocs;  /* allocations by this thread */
    uint64_t unflushed_allocs, unflushed_bytes, unflushed_frees;
    uint64_t rng;
    uint32_t tid;
    int in_hook;
    int in_alloc; /* inside the real allocator: its own mmap calls (jemalloc, tcmalloc) are
                     what the allocation already counts */
    int ready;
};
HIDDEN TLS struct tls T;
#define FLUSH_BYTES (64 * 1024)

HIDDEN uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

HIDDEN uint32_t thread_id(void) {
    if (!T.tid) T.tid = (uint32_t)syscall(SYS_gettid);
    return T.tid;
}

HIDDEN uint64_t next_random(void) { /* xorshift64* */
    uint64_t x = T.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    T.rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* An exponential gap of mean `mean_bytes`, at least one byte. */
HIDDEN int64_t next_gap(void) {
    double u = (double)((next_random() >> 11) + 1) * (1.0 / 9007199254740993.0);
    double gap = -log(u) * mean_bytes;
    if (gap < 1.0) gap = 1.0;
    if (gap > 9.0e18) gap = 9.0e18;
    return (int64_t)gap;
}

HIDDEN void thread_start(void) {
    T.ready = 1;
    uint64_t s = seed_base ? seed_base * 0x9E3779B97F4A7C15ull + thread_id()
                           : now_ns() ^ ((uint64_t)thread_id() << 32) ^ (uintptr_t)&T;
    T.rng = s ? s : 0x853c49e6748fea9bull;
    for (int i = 0; i < 4; i++) next_random();
    T.countdown = next_gap();
    if (flush_key_ok) {
        T.in_hook++;
        pthread_setspecific(flush_key, (void *)1);
        T.in_hook--;
    }
}

/* ---- the ring --------------------------------------------------------------------- */

HIDDEN struct record *claim(uint64_t *index) {
    struct ring *R = &onnxrt_alloc_ring;
    uint64_t i = atomic_fetch_add_explicit(&R->head, 1, memory_order_relaxed);
    struct record *r = &R->records[i % RING_CAPACITY];
    atomic_store_explicit(&r->seq, 0, memory_order_relaxed);
    atomic_store_explicit(&r->seq_end, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    *index = i;
    return r;
}

HIDDEN void publish(struct record *r, uint64_t i) {
    atomic_store_explicit(&r->seq_end, i + 1, memory_order_release);
    atomic_store_explicit(&r->seq, i + 1, memory_order_release);
}

HIDDEN void flush(void) {
    struct ring *R = &onnxrt_alloc_ring;
    int64_t d = T.delta;
    T.delta = 0;
    int64_t live = atomic_fetch_add_explicit(&R->live, d, memory_order_relaxed) + d;
    if (T.unflushed_allocs) {
        atomic_fetch_add_explicit(&R->allocs, T.unflushed_allocs, memory_order_relaxed);
        atomic_fetch_add_explicit(&R->allocated, T.unflushed_bytes, memory_order_relaxed);
        T.unflushed_allocs = T.unflushed_bytes = 0;
    }
    if (T.unflushed_frees) {
        atomic_fetch_add_explicit(&R->frees, T.unflushed_frees, memory_order_relaxed);
        T.unflushed_frees = 0;
    }
    int64_t peak = atomic_load_explicit(&R->peak, memory_order_relaxed);
    if (live <= peak) return;
    while (live > peak && !atomic_compare_exchange_weak(&R->peak, &peak, live)) {
    }
    if (live <= peak) return; /* another thread raised it higher meanwhile */
    uint64_t t = now_ns();
    atomic_store_explicit(&R->peak_time, t, memory_order_relaxed);
    if (!sampling) return;
    /* A peak record at most every `mean` bytes of new peak: the observer dates the
     * peak from them and knows which sampled allocations were live then. */
    static _Atomic int64_t last_marked;
    int64_t marked = atomic_load_explicit(&last_marked, memory_order_relaxed);
    if (live < marked + (int64_t)mean_bytes) return;
    if (!atomic_compare_exchange_strong(&last_marked, &marked, live)) return;
    uint64_t i;
    struct record *r = claim(&i);
    r->kind = KIND_PEAK;
    r->flags = 0;
    r->nframes = 0;
    r->address = 0;
    r->size = 0;
    r->time_ns = t;
    r->live = live;
    r->tid = thread_id();
    r->caller = 0;
    r->caller2 = 0;
    r->nallocs = T.nallocs;
    publish(r, i);
}

HIDDEN void flush_at_thread_exit(void *unused) {
    (void)unused;
    if (T.delta || T.unflushed_allocs || T.unflushed_frees) flush();
}

/* The calling thread's Python stack, innermost first; -1 when the thread has no
 * Python thread state. Reads its own thread's frames only: they change in this thread
 * alone, and this thread is here. A stack deeper than MAX_FRAMES keeps its innermost
 * INNER_FRAMES and its outermost MAX_FRAMES - INNER_FRAMES (the user's own frames are
 * often the outermost, under deep library calls such as nested imports). */
/* A frame's second word: the instruction as an offset into its code object (3.11+) or
 * its lasti (3.10), in the low 32 bits; in the high 32, a check of the code object
 * (first line and size), with which the observer tells a code object freed since and
 * another made at its address. */
HIDDEN uint64_t frame_word(const char *f, uint64_t code) {
    uint32_t low;
    if (L.instr >= 0)
        low = (uint32_t)(*(uint64_t *)(f + L.instr) - code);
    else
        low = (uint32_t) * (int32_t *)(f + L.lasti);
    uint32_t check = 0;
    if (code && !(code & 7)) {
        const char *c = (const char *)code;
        uint64_t size;
        if (L.codebytes >= 0) {
            const char *bytes = *(const char *const *)(c + L.codebytes);
            size = bytes && !((uintptr_t)bytes & 7) ? *(const uint64_t *)(bytes + 16) : 0;
        } else {
            size = 2 * *(const uint64_t *)(c + 16); /* ob_size: code units */
        }
        check = (uint32_t)(*(const int32_t *)(c + L.firstline)) * 65599u + (uint32_t)size;
    }
    return (uint64_t)low | (uint64_t)check << 32;
}

#define INNER_FRAMES 48
#define OUTER_FRAMES (MAX_FRAMES - INNER_FRAMES)
#define MAX_WALK 100000
HIDDEN int read_stack(uint64_t *out, uint16_t *flags) {
    if (!stacks) return -1;
    char *ts = (char *)this_thread_state();
    if (!ts) return -1;
    char *f = *(char **)(ts + L.leaf);
    if (L.cframe >= 0) {
        if (!f) return 0;
        f = *(char **)(f + L.cframe);
    }
    uint64_t outer[2 * OUTER_FRAMES];
    int n = 0, beyond = 0, walked = 0;
    while (f && walked < MAX_WALK) {
        walked++;
        if ((uintptr_t)f & 7) break;
        char *back = *(char **)(f + L.back);
        if (L.owner_check && *(uint8_t *)(f + L.owner) == 3) {
            f = back;
            continue;
        }
        uint64_t code = *(uint64_t *)(f + L.code);
        uint64_t where = frame_word(f, code);
        if (n < INNER_FRAMES) {
            out[2 * n] = code;
            out[2 * n + 1] = where;
            n++;
        } else {
            int k = beyond % OUTER_FRAMES;
            outer[2 * k] = code;
            outer[2 * k + 1] = where;
            beyond++;
        }
        f = back;
    }
    int kept = beyond < OUTER_FRAMES ? beyond : OUTER_FRAMES;
    int first = beyond <= OUTER_FRAMES ? 0 : beyond % OUTER_FRAMES;
    for (int i = 0; i < kept; i++) {
        int k = (first + i) % OUTER_FRAMES;
        out[2 * n] = outer[2 * k];
        out[2 * n + 1] = outer[2 * k + 1];
        n++;
    }
    if (beyond > OUTER_FRAMES || f) *flags |= FLAG_TRUNCATED;
    return n;
}

HIDDEN int finalizing(void) { return is_finalizing && is_finalizing(); }

/* ---- the live sampled addresses (lock-free, bounded) ------------------------------- */

#define TABLE_BITS 15 /* 32,768 sampled allocations live at once (8 GiB at 256 KiB) */
#define TABLE_SIZE (1u << TABLE_BITS)
#define FILTER_SIZE (1u << 16)
#define MAX_PROBE 64
#define TOMB ((uintptr_t)1)
HIDDEN _Atomic uintptr_t table[TABLE_SIZE];
HIDDEN _Atomic uint8_t filter[FILTER_SIZE];

HIDDEN inline uint64_t mix(uintptr_t p) { return ((uint64_t)p >> 4) * 0x9E3779B97F4A7C15ull; }

HIDDEN void filter_add(uint32_t f, int d) {
    uint8_t v = atomic_load_explicit(&filter[f], memory_order_relaxed);
    for (;;) {
        if (v == 255) return; /* saturated: stays (a free is then always looked up) */
        uint8_t w = (uint8_t)(v + d);
        if (atomic_compare_exchange_weak(&filter[f], &v, w)) return;
    }
}

HIDDEN int table_insert(uintptr_t p) {
    uint64_t h = mix(p);
    uint32_t at = (uint32_t)(h >> (64 - TABLE_BITS));
    for (int k = 0; k < MAX_PROBE; k++) {
        uint32_t s = (at + (uint32_t)k) & (TABLE_SIZE - 1);
        uintptr_t v = atomic_load_explicit(&table[s], memory_order_relaxed);
        if ((v == 0 || v == TOMB) && atomic_compare_exchange_strong(&table[s], &v, p)) {
            filter_add((uint32_t)h & (FILTER_SIZE - 1), 1);
            return 1;
        }
    }
    return 0;
}

HIDDEN int table_remove(uintptr_t p) {
    uint64_t h = mix(p);
    if (!atomic_load_explicit(&filter[(uint32_t)h & (FILTER_SIZE - 1)], memory_order_relaxed))
        return 0;
    uint32_t at = (uint32_t)(h >> (64 - TABLE_BITS));
    for (int k = 0; k < MAX_PROBE; k++) {
        uint32_t s = (at + (uint32_t)k) & (TABLE_SIZE - 1);
        uintptr_t v = atomic_load_explicit(&table[s], memory_order_relaxed);
        if (v == 0) return 0;
        if (v == p && atomic_compare_exchange_strong(&table[s], &v, TOMB)) {
            filter_add((uint32_t)h & (FILTER_SIZE - 1), -1);
            return 1;
        }
    }
    return 0;
}

/* ---- sampling --------------------------------------------------------------------- */

/* The return address one frame out of the allocation's caller, from the unwinder (a
 * sampled allocation only): the caller is often a wrapper (operator new in libstdc++,
 * strdup in libc) and the library that wanted the memory is the next one out. */
HIDDEN int backtrace_ok;
HIDDEN uintptr_t outer_caller(uintptr_t caller) {
    if (!backtrace_ok || !caller) return 0;
    void *frames[8];
    int n = backtrace(frames, 8);
    for (int i = 0; i + 1 < n; i++)
        if ((uintptr_t)frames[i] == caller) return (uintptr_t)frames[i + 1];
    return 0;
}

/* The unwinder's first call loads it (allocating): at the start, not in a hook. */
HIDDEN void warm_unwinder(void) {
    void *warm[2];
    T.in_hook++;
    backtrace_ok = backtrace(warm, 2) > 0;
    T.in_hook--;
}

HIDDEN void record_alloc(void *p, size_t size, uintptr_t caller, uint16_t flags) {
    struct ring *R = &onnxrt_alloc_ring;
    T.in_hook++;
    if (!table_insert((uintptr_t)p)) atomic_fetch_add_explicit(&R->table_full, 1, memory_order_relaxed);
    uint64_t i;
    struct record *r = claim(&i);
    int n = read_stack(r->frames, &flags);
    if (n < 0) {
        flags |= FLAG_NO_THREAD;
        n = 0;
    }
    if (finalizing()) flags |= FLAG_FINALIZING;
    r->kind = KIND_ALLOC;
    r->flags = flags;
    r->nframes = (uint16_t)n;
    r->address = (uintptr_t)p;
    r->size = size;
    r->time_ns = now_ns();
    r->live = atomic_load_explicit(&R->live, memory_order_relaxed) + T.delta;
    r->tid = thread_id();
    r->caller = caller;
    r->caller2 = outer_caller(caller);
    r->nallocs = T.nallocs;
    publish(r, i);
    atomic_fetch_add_explicit(&R->samples, 1, memory_order_relaxed);
    T.in_hook--;
}

HIDDEN void record_free(void *p) {
    struct ring *R = &onnxrt_alloc_ring;
    T.in_hook++;
    uint64_t i;
    struct record *r = claim(&i);
    r->kind = KIND_FREE;
    r->flags = finalizing() ? FLAG_FINALIZING : 0;
    r->nframes = 0;
    r->address = (uintptr_t)p;
    r->size = 0;
    r->time_ns = now_ns();
    r->live = atomic_load_explicit(&R->live, memory_order_relaxed) + T.delta;
    r->tid = thread_id();
    r->caller = 0;
    r->caller2 = 0;
    r->nallocs = T.nallocs;
    publish(r, i);
    T.in_hook--;
}

/* The block's exact table (see below). */
HIDDEN void block_alloc(void *p, size_t usable);
HIDDEN void block_free(void *p);

/* The rare part of an allocation's accounting, out of line: the block's table, the
 * sample (when the thread's countdown ran out), the flush of the thread's counters. An
 * allocation made inside a hook (the shim's own calls) is counted, never sampled. */
__attribute__((noinline, cold)) HIDDEN void alloc_slow(void *p, size_t size, size_t usable,
                                                        uintptr_t caller, uint16_t flags) {
    if (block_active && !T.in_hook) block_alloc(p, usable);
    if (!counting) return;
    if (sampling && T.countdown <= 0) {
        if (T.in_hook) {
            atomic_fetch_add_explicit(&onnxrt_alloc_ring.reentrant, 1, memory_order_relaxed);
            T.countdown = 1; /* counts down again from its next allocation */
        } else {
            if (!T.ready) {
                thread_start();
                T.countdown -= (int64_t)size;
            }
            if (T.countdown <= 0) {
                T.countdown = next_gap();
                record_alloc(p, size, caller, flags);
            }
        }
    }
    if (T.delta > FLUSH_BYTES && !T.in_hook) {
        T.in_hook++;
        flush();
        T.in_hook--;
    }
}

/* After every allocation: the thread's counters, inline; the rest when due. */
HIDDEN inline __attribute__((always_inline)) void on_alloc(void *p, size_t size, size_t usable,
                                                           uintptr_t caller, uint16_t flags) {
    if (LIKELY(counting)) {
        T.nallocs++;
        T.delta += (int64_t)usable;
        T.unflushed_allocs++;
        T.unflushed_bytes += usable;
        if (sampling) T.countdown -= (int64_t)size;
        if (LIKELY(T.countdown > 0 || !sampling) && LIKELY(T.delta <= FLUSH_BYTES) &&
            LIKELY(!block_active))
            return;
    }
    alloc_slow(p, size, usable, caller, flags);
}

/* The rare part of a free's accounting: the block's table, the free of a sampled
 * address, the flush. */
__attribute__((noinline, cold)) HIDDEN void free_slow(void *p) {
    if (block_active && !T.in_hook) block_free(p);
    if (!counting) return;
    if (sampling && table_remove((uintptr_t)p)) record_free(p);
    if (T.delta < -FLUSH_BYTES && !T.in_hook) {
        T.in_hook++;
        flush();
        T.in_hook--;
    }
}

/* Before every free: the thread's counters, inline; a possibly sampled address (the
 * filter in front of the table says) and the rest out of line. */
HIDDEN inline __attribute__((always_inline)) void on_free(void *p, size_t usable) {
    if (LIKELY(counting)) {
        T.delta -= (int64_t)usable;
        T.unflushed_frees++;
        uint32_t f = (uint32_t)mix((uintptr_t)p) & (FILTER_SIZE - 1);
        int maybe = sampling && atomic_load_explicit(&filter[f], memory_order_relaxed);
        if (LIKELY(!maybe) && LIKELY(T.delta >= -FLUSH_BYTES) && LIKELY(!block_active)) return;
    }
    free_slow(p);
}

/* The bytes of an allocation: malloc_usable_size, read from glibc's chunk header
 * directly where glibc serves the allocations (its own function also reads the next
 * chunk's header, a cache miss that cost 5 % of a small-object workload); another
 * allocator's (jemalloc...) function otherwise. */
HIDDEN inline size_t usable_of(void *p) {
    if (!p) return 0;
    if (LIKELY(glibc_chunks)) {
        size_t head = ((const size_t *)p)[-1];
        return (head & ~(size_t)7) - ((head & 2) ? 16 : 8); /* 2: IS_MMAPPED */
    }
    return real.usable(p);
}

/* ---- the hooks -------------------------------------------------------------------- */

#define CALLER() ((uintptr_t)__builtin_return_address(0))
#define ENSURE(fallback)                                                                   \
    do {                                                                                   \
        if (UNLIKELY(!resolved)) {                                                         \
            resolve();                                                                     \
            if (!resolved) return fallback;                                                \
        }                                                                                  \
    } while (0)

/* Around the real allocator: the thread marked inside it, so that its own mmap calls
 * (jemalloc, tcmalloc) are not counted again; glibc's internal ones never reach us. */
#define REAL(call)                                                                         \
    ({                                                                                     \
        if (UNLIKELY(!glibc_chunks)) T.in_alloc++;                                         \
        __typeof__(call) r_ = (call);                                                      \
        if (UNLIKELY(!glibc_chunks)) T.in_alloc--;                                         \
        r_;                                                                                \
    })

HIDDEN void *hook_malloc(size_t size) {
    ENSURE(bump_alloc(size, 16));
    if (LIKELY(!H.active)) return real.malloc(size); /* idle: the call passed on */
    void *p = REAL(real.malloc(size));
    if (LIKELY(p != NULL)) on_alloc(p, size, usable_of(p), CALLER(), 0);
    return p;
}

HIDDEN void *hook_calloc(size_t n, size_t size) {
    ENSURE(bump_alloc(n * size, 16)); /* the bump buffer is zeroed (bss) */
    if (LIKELY(!H.active)) return real.calloc(n, size);
    void *p = REAL(real.calloc(n, size));
    if (LIKELY(p != NULL)) on_alloc(p, n * size, usable_of(p), CALLER(), 0);
    return p;
}

HIDDEN void hook_free(void *p) {
    if (UNLIKELY(!p || in_bump(p))) return;
    ENSURE();
    if (LIKELY(!H.active)) {
        real.free(p);
        return;
    }
    on_free(p, usable_of(p));
    REAL((real.free(p), 0));
}

HIDDEN void *hook_realloc(void *p, size_t size) {
    if (UNLIKELY(p && in_bump(p))) {
        ENSURE(NULL);
        void *q = hook_malloc(size);
        size_t old = ((size_t *)p)[-1];
        if (q) memcpy(q, p, old < size ? old : size);
        return q;
    }
    ENSURE(bump_alloc(size, 16));
    if (LIKELY(!H.active)) return real.realloc(p, size);
    if (p) on_free(p, usable_of(p));
    void *q = REAL(real.realloc(p, size));
    if (q) {
        on_alloc(q, size, usable_of(q), CALLER(), 0);
    } else if (p && size) { /* failed: p is still allocated */
        on_alloc(p, 0, usable_of(p), CALLER(), 0);
    }
    return q;
}

HIDDEN void *hook_reallocarray(void *p, size_t n, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return hook_realloc(p, total);
}

HIDDEN int hook_posix_memalign(void **out, size_t align, size_t size) {
    ENSURE(12);
    if (LIKELY(!H.active)) return real.posix_memalign(out, align, size);
    int rc = REAL(real.posix_memalign(out, align, size));
    if (rc == 0 && *out) on_alloc(*out, size, usable_of(*out), CALLER(), 0);
    return rc;
}

HIDDEN void *hook_aligned_alloc(size_t align, size_t size) {
    ENSURE(bump_alloc(size, align));
    if (LIKELY(!H.active)) return real.aligned_alloc(align, size);
    void *p = REAL(real.aligned_alloc(align, size));
    if (p) on_alloc(p, size, usable_of(p), CALLER(), 0);
    return p;
}

HIDDEN void *hook_memalign(size_t align, size_t size) {
    ENSURE(bump_alloc(size, align));
    if (LIKELY(!H.active)) return real.memalign(align, size);
    void *p = REAL(real.memalign(align, size));
    if (p) on_alloc(p, size, usable_of(p), CALLER(), 0);
    return p;
}

HIDDEN void *hook_valloc(size_t size) {
    ENSURE(NULL);
    void *p = REAL(real.valloc(size));
    if (p) on_alloc(p, size, usable_of(p), CALLER(), 0);
    return p;
}

HIDDEN void *hook_pvalloc(size_t size) {
    ENSURE(NULL);
    if (!real.pvalloc) return NULL;
    void *p = REAL(real.pvalloc(size));
    if (p) on_alloc(p, size, usable_of(p), CALLER(), 0);
    return p;
}

/* Anonymous mappings counted in the live bytes, by start address: munmap subtracts
 * only what mmap added (a file mapping, or one the table had no room for, is neither). */
#define MTABLE_SIZE (1u << 14)
HIDDEN _Atomic uintptr_t mtable_addr[MTABLE_SIZE];
HIDDEN size_t mtable_len[MTABLE_SIZE];
_Static_assert(sizeof(size_t) == 8, "64-bit only");

HIDDEN int mtable_insert(uintptr_t p, size_t len) {
    uint32_t at = (uint32_t)(mix(p) >> 50);
    for (int k = 0; k < MAX_PROBE; k++) {
        uint32_t s = (at + (uint32_t)k) & (MTABLE_SIZE - 1);
        uintptr_t v = atomic_load_explicit(&mtable_addr[s], memory_order_relaxed);
        if ((v == 0 || v == TOMB) && atomic_compare_exchange_strong(&mtable_addr[s], &v, p)) {
            mtable_len[s] = len;
            return 1;
        }
    }
    return 0;
}

/* The bytes of a counted mapping that an munmap of [p, p + len) releases (a mapping
 * unmapped from its start; what remains of it stays counted under its new start). */
HIDDEN size_t mtable_remove(uintptr_t p, size_t len) {
    uint32_t at = (uint32_t)(mix(p) >> 50);
    for (int k = 0; k < MAX_PROBE; k++) {
        uint32_t s = (at + (uint32_t)k) & (MTABLE_SIZE - 1);
        uintptr_t v = atomic_load_explicit(&mtable_addr[s], memory_order_relaxed);
        if (v == 0) return 0;
        if (v == p && atomic_compare_exchange_strong(&mtable_addr[s], &v, TOMB)) {
            size_t had = mtable_len[s];
            if (len >= had) return had;
            if (!mtable_insert(p + len, had - len)) return had; /* no room: released */
            return len;
        }
    }
    return 0;
}

HIDDEN void *hook_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (UNLIKELY(!resolved)) {
        resolve();
        if (!real.mmap) return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    }
    void *p = real.mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && !(flags & MAP_FIXED) && !T.in_hook &&
        !T.in_alloc) {
        if (!counting || mtable_insert((uintptr_t)p, len)) on_alloc(p, len, len, CALLER(), FLAG_MMAP);
    }
    return p;
}

HIDDEN int hook_munmap(void *addr, size_t len) {
    if (UNLIKELY(!resolved)) {
        resolve();
        if (!real.munmap) return (int)syscall(SYS_munmap, addr, len);
    }
    if (T.in_alloc) return real.munmap(addr, len);
    if (block_active && !T.in_hook) block_free(addr);
    if (counting && !T.in_hook) {
        size_t had = mtable_remove((uintptr_t)addr, len);
        if (had) {
            if (sampling && table_remove((uintptr_t)addr)) record_free(addr);
            T.delta -= (int64_t)had;
            T.unflushed_frees++;
        }
    }
    return real.munmap(addr, len);
}

/* The exported names: what LD_PRELOAD interposes. Inside this file the hooks are
 * called by their own names, never through these (a ctypes load must not bind
 * malloc to itself). */
#define ALIAS(name, hook) extern __typeof(hook) name __attribute__((alias(#hook), visibility("default")))
ALIAS(malloc, hook_malloc);
ALIAS(calloc, hook_calloc);
ALIAS(realloc, hook_realloc);
ALIAS(reallocarray, hook_reallocarray);
ALIAS(free, hook_free);
ALIAS(posix_memalign, hook_posix_memalign);
ALIAS(aligned_alloc, hook_aligned_alloc);
ALIAS(memalign, hook_memalign);
ALIAS(valloc, hook_valloc);
ALIAS(pvalloc, hook_pvalloc);
ALIAS(mmap, hook_mmap);
ALIAS(mmap64, hook_mmap);
ALIAS(munmap, hook_munmap);

/* ---- fork and exit ---------------------------------------------------------------- */

HIDDEN pthread_mutex_t block_lock = PTHREAD_MUTEX_INITIALIZER;

HIDDEN void on_fork_prepare(void) { pthread_mutex_lock(&block_lock); }

HIDDEN void on_fork_parent(void) { pthread_mutex_unlock(&block_lock); }

/* The child's records are its own: its pid in the header, its first index noted (the
 * parent's records before it are not the child's). Nothing here waits on a lock
 * another thread of the parent held: the ring and the table are lock-free. */
HIDDEN void on_fork_child(void) {
    pthread_mutex_unlock(&block_lock);
    struct ring *R = &onnxrt_alloc_ring;
    T.tid = 0;
    R->pid = (int32_t)getpid();
    R->fork_head = atomic_load(&R->head);
    atomic_store(&R->read, 0); /* nobody reads the child's ring yet: its exit waits not */
    atomic_fetch_add(&R->generation, 1);
}

/* At exit, after the interpreter's finalization: the observer (another process) reads
 * the ring every few milliseconds, and tells how far it read (`read`); the last records
 * must be read before the memory goes. Waits until they are, at most `exit_wait_ns`
 * (an observer that never read this ring is not waited for). */
HIDDEN void wait_for_observer(void) {
    struct ring *R = &onnxrt_alloc_ring;
    if (!sampling || R->pid != (int32_t)getpid() || !exit_wait_ns) return;
    if (T.delta || T.unflushed_allocs || T.unflushed_frees) flush();
    R->state |= 16; /* exiting: the reader says how far it read at every poll now */
    uint64_t start = now_ns();
    while (atomic_load(&R->read) && atomic_load(&R->read) - 1 < atomic_load(&R->head) &&
           now_ns() - start < (uint64_t)exit_wait_ns) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* ---- exact counting of a block (in-process, pytest) -------------------------------- */

struct entry {
    uintptr_t address;
    size_t size;
};
#define MAX_DEPTH 8
HIDDEN struct entry *btable;
HIDDEN size_t bcap, bused, btombs;
HIDDEN int depth;
HIDDEN int64_t blive;            /* bytes live of the block's allocations */
HIDDEN int64_t bbase[MAX_DEPTH]; /* blive when each nested block began */
HIDDEN int64_t bpeak[MAX_DEPTH];
HIDDEN uint64_t bcount[MAX_DEPTH], bbytes[MAX_DEPTH];
HIDDEN uint64_t blost;           /* allocations not followed (the table could not grow) */

HIDDEN int btable_grow(void) {
    size_t ncap = bcap ? bcap * 2 : 1 << 16;
    struct entry *n = real.mmap(NULL, ncap * sizeof(struct entry), PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (n == MAP_FAILED) return 0;
    for (size_t i = 0; i < bcap; i++) {
        uintptr_t a = btable[i].address;
        if (a <= TOMB) continue;
        size_t s = (size_t)(mix(a) >> 20) & (ncap - 1);
        while (n[s].address) s = (s + 1) & (ncap - 1);
        n[s] = btable[i];
    }
    if (btable) real.munmap(btable, bcap * sizeof(struct entry));
    btable = n;
    bcap = ncap;
    btombs = 0;
    return 1;
}

HIDDEN void block_alloc(void *p, size_t usable) {
    T.in_hook++;
    pthread_mutex_lock(&block_lock);
    if (block_active) {
        if ((bused + btombs + 1) * 2 > bcap && !btable_grow()) {
            blost++;
        } else {
            size_t s = (size_t)(mix((uintptr_t)p) >> 20) & (bcap - 1);
            while (btable[s].address > TOMB && btable[s].address != (uintptr_t)p)
                s = (s + 1) & (bcap - 1);
            if (btable[s].address == (uintptr_t)p) { /* reused without a free we saw */
                blive -= (int64_t)btable[s].size;
            } else {
                if (btable[s].address == TOMB) btombs--;
                bused++;
            }
            btable[s].address = (uintptr_t)p;
            btable[s].size = usable;
            blive += (int64_t)usable;
            for (int d = 0; d < depth; d++) {
                bcount[d]++;
                bbytes[d] += usable;
                if (blive - bbase[d] > bpeak[d]) bpeak[d] = blive - bbase[d];
            }
        }
    }
    pthread_mutex_unlock(&block_lock);
    T.in_hook--;
}

HIDDEN void block_free(void *p) {
    T.in_hook++;
    pthread_mutex_lock(&block_lock);
    if (block_active && bcap) {
        size_t s = (size_t)(mix((uintptr_t)p) >> 20) & (bcap - 1);
        for (size_t k = 0; k < bcap && btable[s].address; k++) {
            if (btable[s].address == (uintptr_t)p) {
                blive -= (int64_t)btable[s].size;
                btable[s].address = TOMB;
                bused--;
                btombs++;
                break;
            }
            s = (s + 1) & (bcap - 1);
        }
    }
    pthread_mutex_unlock(&block_lock);
    T.in_hook--;
}

/* GOT patching: every loaded object's relocations naming an allocator function are
 * pointed at the hooks, so that a process not started under LD_PRELOAD is followed. */
HIDDEN void *hook_dlopen(const char *file, int mode);
HIDDEN void *hook_dlsym(void *handle, const char *name);
struct hook {
    const char *name;
    void *fn;
};
HIDDEN const struct hook HOOKS[] = {
    {"malloc", (void *)hook_malloc},
    {"calloc", (void *)hook_calloc},
    {"realloc", (void *)hook_realloc},
    {"reallocarray", (void *)hook_reallocarray},
    {"free", (void *)hook_free},
    {"posix_memalign", (void *)hook_posix_memalign},
    {"aligned_alloc", (void *)hook_aligned_alloc},
    {"memalign", (void *)hook_memalign},
    {"valloc", (void *)hook_valloc},
    {"pvalloc", (void *)hook_pvalloc},
    {"mmap", (void *)hook_mmap},
    {"mmap64", (void *)hook_mmap},
    {"munmap", (void *)hook_munmap},
    {"dlopen", (void *)hook_dlopen},
    {"dlsym", (void *)hook_dlsym},
};
#define NHOOKS (sizeof(HOOKS) / sizeof(HOOKS[0]))
HIDDEN int patched_objects;
HIDDEN uint64_t patched_slots;
/* One slot of malloc pointed at the hook, in an object never unloaded (the executable or
 * libpython): another tool patching the GOT after this one (pytest-memray starts a
 * tracker per test) takes the calls; a block then says so. */
HIDDEN void **witness;
HIDDEN int witness_here; /* the object being patched may hold the witness */

#if defined(__x86_64__)
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#endif

#ifdef R_JUMP_SLOT
HIDDEN void patch_relocations(ElfW(Addr) base, const ElfW(Rela) * rel, size_t count,
                              const ElfW(Sym) * symtab, const char *strtab, size_t strsz,
                              uintptr_t relro_start, uintptr_t relro_end) {
    long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < count; i++) {
        unsigned long type = ELF64_R_TYPE(rel[i].r_info);
        if (type != R_JUMP_SLOT && type != R_GLOB_DAT) continue;
        size_t sym = ELF64_R_SYM(rel[i].r_info);
        if (!sym || symtab[sym].st_name >= strsz) continue;
        const char *name = strtab + symtab[sym].st_name;
        for (size_t h = 0; h < NHOOKS; h++) {
            if (strcmp(name, HOOKS[h].name) != 0) continue;
            void **slot = (void **)(base + rel[i].r_offset);
            if (h == 0 && !witness && witness_here) witness = slot;
            if (*slot == HOOKS[h].fn) break;
            uintptr_t at = (uintptr_t)slot;
            int relro = at >= relro_start && at < relro_end;
            uintptr_t pg = at & ~(uintptr_t)(page - 1);
            if (relro && mprotect((void *)pg, (size_t)page, PROT_READ | PROT_WRITE) != 0) break;
            *slot = HOOKS[h].fn;
            patched_slots++;
            if (relro) mprotect((void *)pg, (size_t)page, PROT_READ);
            break;
        }
    }
}

/* The objects already patched, by (base address, name): each dlopen patches only what
 * it loaded, not every object again (importing scipy dlopens a hundred modules). The
 * loader's lock, held around dl_iterate_phdr's callbacks, serializes this. */
#define SEEN_SIZE 8192
HIDDEN uintptr_t seen_base[SEEN_SIZE];
HIDDEN uint64_t seen_name[SEEN_SIZE];

HIDDEN int seen_before(uintptr_t base, const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
    h |= 1;
    uint32_t at = (uint32_t)(mix(base ^ h) >> 51);
    for (int k = 0; k < SEEN_SIZE; k++) {
        uint32_t s = (at + (uint32_t)k) & (SEEN_SIZE - 1);
        if (seen_name[s] == h && seen_base[s] == base) return 1;
        if (!seen_name[s]) {
            seen_name[s] = h;
            seen_base[s] = base;
            return 0;
        }
    }
    return 0; /* full: patched again (idempotent, only slower) */
}

HIDDEN int patch_object(struct dl_phdr_info *info, size_t size, void *self) {
    (void)size;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    if (info->dlpi_addr == (ElfW(Addr))self || strstr(name, "linux-vdso") ||
        strstr(name, "/ld-linux") || strstr(name, "ld-linux-"))
        return 0;
    if (seen_before(info->dlpi_addr, name)) return 0;
    witness_here = !*name || strstr(name, "libpython") != NULL;
    ElfW(Addr) base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t relro_start = 0, relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) {
            relro_start = base + ph->p_vaddr;
            relro_end = relro_start + ph->p_memsz;
        }
    }
    if (!dyn) return 0;
    ElfW(Addr) symtab = 0, strtab = 0, jmprel = 0, rela = 0;
    size_t strsz = 0, pltrelsz = 0, relasz = 0;
    long pltrel = DT_RELA;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = d->d_un.d_ptr; break;
        case DT_STRTAB: strtab = d->d_un.d_ptr; break;
        case DT_STRSZ: strsz = d->d_un.d_val; break;
        case DT_JMPREL: jmprel = d->d_un.d_ptr; break;
        case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
        case DT_RELA: rela = d->d_un.d_ptr; break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_PLTREL: pltrel = (long)d->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab || pltrel != DT_RELA) return 0;
    /* glibc relocates these in place; an object it did not (a base below) is fixed. */
    if (symtab < base) symtab += base;
    if (strtab < base) strtab += base;
    if (jmprel && jmprel < base) jmprel += base;
    if (rela && rela < base) rela += base;
    const ElfW(Sym) *syms = (const ElfW(Sym) *)symtab;
    if (jmprel)
        patch_relocations(base, (const ElfW(Rela) *)jmprel, pltrelsz / sizeof(ElfW(Rela)), syms,
                          (const char *)strtab, strsz, relro_start, relro_end);
    if (rela)
        patch_relocations(base, (const ElfW(Rela) *)rela, relasz / sizeof(ElfW(Rela)), syms,
                          (const char *)strtab, strsz, relro_start, relro_end);
    patched_objects++;
    return 0;
}

HIDDEN void patch_all(void) {
    Dl_info self;
    if (!dladdr((void *)patch_all, &self)) return;
    dl_iterate_phdr(patch_object, (void *)(uintptr_t)self.dli_fbase);
}
#else
HIDDEN void patch_all(void) {}
#endif

HIDDEN _Atomic int patching_done;

/* A library loaded by path is patched once loaded. A name without a slash is searched
 * along the caller's RUNPATH: that call goes on unchanged (a tail call, so the loader
 * still sees its caller), and what it loads is patched at the next block. */
HIDDEN void *hook_dlopen(const char *file, int mode) {
    ENSURE(NULL);
    if (!file || !strchr(file, '/')) return real.dlopen(file, mode);
    void *h = real.dlopen(file, mode);
    if (h && atomic_load(&patching_done)) {
        T.in_hook++;
        patch_all();
        T.in_hook--;
    }
    return h;
}

/* The allocator looked up in a library after the patching (ctypes' `libc.malloc`) is
 * the hook too. RTLD_NEXT and RTLD_DEFAULT search from the caller: those calls go on
 * unchanged (a tail call, so the loader still sees its caller). */
HIDDEN void *hook_dlsym(void *handle, const char *name) {
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || !name)
        return real.dlsym(handle, name);
    void *p = real.dlsym(handle, name);
    if (!p) return p;
    const void *reals[] = {real.malloc, real.calloc, real.realloc, real.free,
                           real.posix_memalign, real.aligned_alloc, real.memalign,
                           real.valloc, real.pvalloc, real.mmap, real.munmap};
    const void *hooks[] = {hook_malloc, hook_calloc, hook_realloc, hook_free,
                           hook_posix_memalign, hook_aligned_alloc, hook_memalign,
                           hook_valloc, hook_pvalloc, hook_mmap, hook_munmap};
    for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++)
        if (p == reals[i]) return (void *)hooks[i];
    return p;
}

/* Starts a block: returns its depth (1 the outermost), -1 when the shim cannot, -2 when
 * another tool took the allocator's calls from the hooks. */
EXPORT int onnxrt_alloc_block_begin(void) {
    resolve();
    if (!resolved) return -1;
    if (!atomic_exchange(&patching_done, 1)) {
        T.in_hook++;
        patch_all();
        T.in_hook--;
    }
    if (witness && *(void *volatile *)witness != (void *)hook_malloc) return -2;
    T.in_hook++;
    pthread_mutex_lock(&block_lock);
    int d = depth;
    if (d >= MAX_DEPTH) {
        pthread_mutex_unlock(&block_lock);
        T.in_hook--;
        return -1;
    }
    if (d == 0) {
        blive = 0;
        blost = 0;
        if (bcap) memset(btable, 0, bcap * sizeof(struct entry));
        bused = btombs = 0;
    }
    bbase[d] = blive;
    bpeak[d] = 0;
    bcount[d] = bbytes[d] = 0;
    depth = d + 1;
    block_active = 1;
    update_active();
    pthread_mutex_unlock(&block_lock);
    T.in_hook--;
    return d + 1;
}

/* Ends the innermost block: out = {live, peak, allocations, bytes allocated, lost,
 * objects patched, slots patched} (live and peak over the block's start). */
EXPORT int onnxrt_alloc_block_end(int64_t *out) {
    T.in_hook++;
    pthread_mutex_lock(&block_lock);
    int d = depth - 1;
    if (d < 0) {
        pthread_mutex_unlock(&block_lock);
        T.in_hook--;
        return -1;
    }
    out[0] = blive - bbase[d];
    out[1] = bpeak[d];
    out[2] = (int64_t)bcount[d];
    out[3] = (int64_t)bbytes[d];
    out[4] = (int64_t)blost;
    out[5] = patched_objects;
    out[6] = (int64_t)patched_slots;
    depth = d;
    if (d == 0) block_active = 0;
    update_active();
    pthread_mutex_unlock(&block_lock);
    T.in_hook--;
    return d + 1;
}

/* Tells whether the process runs under the preloaded shim (counting and sampling). */
EXPORT int onnxrt_alloc_state(void) { return (int)onnxrt_alloc_ring.state; }

/* ---- sampling started in a process already running (spy --where) ------------------ */

/* Starts sampling in this process, not started under LD_PRELOAD: the allocator's GOT
 * entries are pointed at the hooks (see onnxrt_alloc_block_begin), the Python
 * functions the stacks need are looked up, the ring is this process's. Frees of what
 * was allocated before are counted too: the live bytes are a net change from now.
 * Returns the ring's state bits, -1 when it cannot start (the reason in its `why`). */
EXPORT int onnxrt_alloc_sample_start(long mean, const char *layout, long seed) {
    struct ring *R = &onnxrt_alloc_ring;
    resolve();
    if (!resolved || mean < 1 || !layout) return -1;
    T.in_hook++;
    if (!parse_layout(layout)) {
        set_why("no interpreter layout was given to the shim");
        T.in_hook--;
        return -1;
    }
    this_thread_state = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    if (!is_finalizing) is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
    if (!this_thread_state || !python_matches()) {
        set_why("this Python is not the version whose layout was checked");
        T.in_hook--;
        return -1;
    }
    if (seed) seed_base = (uint64_t)seed;
    mean_bytes = (double)mean;
    R->mean = (uint64_t)mean;
    R->pid = (int32_t)getpid();
    warm_unwinder();
    if (!atomic_exchange(&patching_done, 1)) patch_all();
    stacks = 1;
    counting = 1;
    sampling = 1;
    update_active();
    R->state = (uint32_t)(sampling | stacks << 1 | counting << 2 | (is_finalizing != NULL) << 3);
    T.in_hook--;
    return (int)R->state;
}

/* Stops what onnxrt_alloc_sample_start started (the hooks stay, passing calls on). */
EXPORT void onnxrt_alloc_sample_stop(void) {
    sampling = 0;
    counting = 0;
    update_active();
    onnxrt_alloc_ring.state = 0;
}

/* ---- its own pages ----------------------------------------------------------------- */

/* Every page of the shim's own data (the ring, its tables) touched once at its start,
 * once the ring's header is whole: resident from the program's first line on, a constant
 * share of its RSS the observer takes off every figure (R->own), rather than pages
 * becoming resident as the ring fills. */
HIDDEN void touch_own(void) {
    const struct {
        const void *at;
        size_t n;
    } own[] = {
        {&onnxrt_alloc_ring, sizeof onnxrt_alloc_ring}, {bump, sizeof bump},
        {(const void *)table, sizeof table}, {(const void *)filter, sizeof filter},
        {(const void *)mtable_addr, sizeof mtable_addr}, {mtable_len, sizeof mtable_len},
        {seen_base, sizeof seen_base}, {seen_name, sizeof seen_name},
    };
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = UINTPTR_MAX, hi = 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        uintptr_t a = (uintptr_t)own[i].at;
        if (a < lo) lo = a;
        if (a + own[i].n > hi) hi = a + own[i].n;
    }
    lo &= ~(page - 1);
    /* The static data of one object lie in one writable segment: the whole span is. */
    for (uintptr_t a = lo; a < hi; a += page) {
        volatile char *c = (volatile char *)a;
        *c = *c;
    }
    onnxrt_alloc_ring.own = (uint64_t)((hi - lo + page - 1) & ~(page - 1));
}

/* The process's resident bytes (/proc/self/statm), -1 if unreadable. */
HIDDEN long resident_bytes(void) {
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *at = strchr(buf, ' ');
    if (!at) return -1;
    int ok = 1;
    long pages = parse_long(at + 1, &ok);
    return ok && pages > 0 ? pages * sysconf(_SC_PAGESIZE) : -1;
}
