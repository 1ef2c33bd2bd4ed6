/*
 * The observer's walk in C: one call reads, from another process, every thread's Python
 * stack (code object and instruction offset per frame), whether it holds the GIL, its
 * CPU time and state (/proc), and the resident memory: what _observe/reader.py does in
 * Python, with the same offsets (the layout passed in as a dict), the same checks and
 * the same handling of a stack that moves under the read. reader.py stays the fallback
 * (no compiler at install time) and the owner of what is read once per code object:
 * names, files, line tables (a code object this walk has not seen is handed to it).
 *
 * Per sample, with the thread list unchanged: one process_vm_readv for the thread
 * states and the GIL, one for every thread's innermost frame pointer and data-stack
 * chunk (where 3.11+ keeps the frames: the walk reads its copy), one for the identity
 * of every code object on the stacks and each innermost frame pointer again (did the
 * stack move while read?); pread of /proc/PID/status and of each thread's schedstat.
 * Deep stacks read the chunks below; frames outside the chunks (3.10, generators) are
 * read one by one.
 *
 * Everything read is untrusted: sizes and counts are bounded, addresses are only ever
 * given to the kernel, a chain that loops or climbs is cut and counted. As insurance
 * against a fault of this code itself, the C-only phases of a sample run under a
 * SIGSEGV/SIGBUS handler that jumps back and makes the call raise Fault: the observer
 * goes on with the Python reader and says so, the command is not taken down.
 *
 * A stack is returned as a local id; the stacks new since the previous call come with
 * their frames, (code id, byte offset) pairs, innermost first, as a tuple of ints.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#define WALKER_VERSION 1
#define MAX_INTERPS 64
#define MAX_THREADS 4096
#define MAX_CHUNK (1 << 20)    /* bytes of a data-stack chunk read at once */
#define MAX_CHUNKS 256         /* chunks followed below the current one */
#define MAX_FRAME_SPAN 4096    /* bytes of one frame read */
#define IOV_BATCH 1024         /* Linux's UIO_MAXIOV */
#define MAX_READ (1 << 22)     /* one read at most */
#define MAX_BUFFER (256 << 20) /* bytes of copies held for one sample */
#define REFRESH_INTERPRETERS 64
#define MAX_CODES (1 << 20)
#define MAX_STACKS (1 << 18)
#define MAX_STACK_WORDS (1 << 26) /* int64 words of frames kept for the stacks */
#define FD_CACHE 256              /* threads whose /proc files stay open */
#define NATIVE_CACHE 8192
#define OWNED_BY_CSTACK 3
#define NFIELDS 6 /* a code object's identity: type, size, first line, file, name, table */

/* ---- the layout ----------------------------------------------------------------- */

typedef struct {
    int minor;
    long interps_head, interp_next, interp_threads;
    long rt_gil_locked, rt_gil_holder, interp_gil, gil_locked, gil_holder;
    long ts_next, ts_thread_id, ts_native_id, ts_chunk;
    long ts_cframe, cf_current, ts_current_frame, ts_frame;
    long fr_back, fr_code, fr_instr, fr_lasti, fr_owner, fr_size;
    long code_adaptive;
    long field[NFIELDS]; /* ob_type, ob_size, co_firstlineno, co_filename, name, linetable */
    /* derived */
    long leaf_at, ts_span, frame_span, sig_lo, sig_hi;
    int cframe;
} Layout;

/* ---- buffers ------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static int buf_reserve(Buf *b, size_t more) {
    if (b->n + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more) cap *= 2;
    if (cap > MAX_BUFFER) return -1;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static size_t mix(uint64_t x, size_t mask) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & mask;
}

static uint64_t rd64(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int32_t rd32(const char *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* A batch of reads: (remote address, size) -> offset into a buffer, or -1 failed. */
typedef struct {
    uint64_t addr;
    uint64_t size;
    int64_t at;
} Req;

typedef struct {
    Req *r;
    size_t n, cap;
} Reqs;

static int reqs_add(Reqs *q, uint64_t addr, uint64_t size) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        Req *r = realloc(q->r, cap * sizeof(Req));
        if (!r) return -1;
        q->r = r;
        q->cap = cap;
    }
    q->r[q->n].addr = addr;
    q->r[q->n].size = size;
    q->r[q->n].at = -1;
    return (int)(q->n++);
}

/* ---- tables: code objects, stacks, /proc files, 3.10 kernel ids ----------------- */

typedef struct {
    uint64_t addr;
    uint64_t f[NFIELDS];
    int64_t size; /* bytes of bytecode (0 unknown) */
    int32_t id;   /* the reader's code id, -1 not a code object */
    int32_t used;
} CodeEntry;

typedef struct {
    uint64_t hash;
    uint32_t at, len; /* words in the arena */
    int32_t id;
} StackEntry;

typedef struct {
    int tid;
    int sched, stat;
    uint64_t seen;
} TaskFd;

typedef struct {
    uint64_t ident;
    int64_t native;
} NativeEntry;

/* One thread of one sample. */
typedef struct {
    uint64_t tstate, ident, native;
    uint64_t leaf_at_addr; /* where its innermost frame pointer is read again */
    uint64_t leaf, outer;
    uint64_t chunk, top;
    int64_t chunk_copy; /* offset of its current chunk's copy in W->chunks, -1 none */
    size_t raw_at, nraw, nvalid;
    uint32_t dropped;
    int complete, gil;
    int64_t sid;
    int64_t run_ns, wait_ns, utime, stime;
    char state;
} Thread;

typedef struct {
    uint64_t code, where;
} Raw;

/* A chunk copied for one walk. */
typedef struct {
    uint64_t start, end, dead_end;
    int64_t copy; /* offset in W->chunks */
} Chunk;

/* A code object not known yet (handed to the reader after the C phases). */
typedef struct {
    uint64_t addr;
    int64_t head; /* offset of its identity bytes in W->pending_heads */
} Pending;

typedef struct {
    PyObject_HEAD int pid;
    PyObject *source;   /* tests: an object with read_many(requests), instead of pid */
    PyObject *resolver; /* (address, head bytes) -> (code id, size in bytes) */
    PyObject *interner; /* frames tuple -> the caller's stack id */
    Layout L;
    uint64_t runtime, code_type;
    long max_depth, pthread_tid;
    uint64_t samples;
    long stat_every;
    /* interpreters and their threads as last seen */
    uint64_t interps[MAX_INTERPS];
    int ninterps;
    uint64_t gil_base[MAX_INTERPS];
    uint64_t *known[MAX_INTERPS];
    int nknown[MAX_INTERPS];
    /* the code objects seen */
    CodeEntry *codes;
    size_t code_cap, code_count;
    /* the stacks seen */
    StackEntry *stacks;
    size_t stack_cap, stack_count;
    int64_t *arena;
    size_t arena_n, arena_cap;
    /* /proc */
    int status_fd, statm_fd;
    long page;
    TaskFd fds[FD_CACHE];
    NativeEntry *natives;
    /* one sample's working memory */
    Thread *threads;
    size_t nthreads, threads_cap;
    Raw *raw;
    size_t nraw, raw_cap;
    Buf data, chunks, pending_heads;
    Reqs reqs;
    Pending *pending;
    size_t npending, pending_cap;
    uint64_t *seen;
    uint64_t *seen_gen;
    size_t seen_cap;
    uint64_t gen;
    uint64_t *distinct; /* distinct code addresses of one interpreter's sample */
    size_t ndistinct;
    uint64_t *dset, *dset_gen; /* a set of them: address, generation, request index */
    int64_t *dset_idx;
    size_t dset_cap;
    uint64_t dgen;
    int64_t *stack_at; /* per local stack id: where its words are, how many, */
    uint32_t *stack_len;
    int64_t *bound; /* and the caller's id for it */
    size_t stack_index_cap;
    int ready;
    int64_t *new_ids; /* stacks new in this sample */
    size_t nnew, new_cap;
    /* counts, as the Python reader keeps them */
    long long torn, partial, failed;
    int pyerr;   /* a Python error happened inside a read (the fake source) */
    int oom;     /* a table could not grow */
    int runtime_failed;
} Walker;

static PyObject *Fault; /* the exception a fault of this code becomes */
static int seen_add(Walker *W, uint64_t addr);

/* ---- fault protection -------------------------------------------------------------- */

static __thread sigjmp_buf fault_jump;
static __thread volatile sig_atomic_t fault_armed;
static __thread volatile int fault_signal;

static void on_fault(int sig, siginfo_t *info, void *ctx) {
    (void)info;
    (void)ctx;
    if (fault_armed) {
        fault_armed = 0;
        fault_signal = sig;
        siglongjmp(fault_jump, 1);
    }
    /* Not ours: give the signal its previous action (restored by disarm) and return:
     * the instruction faults again and that action runs. */
    signal(sig, SIG_DFL);
}

typedef struct {
    struct sigaction segv, bus;
} Saved;

static void arm(Saved *saved) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &saved->segv);
    sigaction(SIGBUS, &sa, &saved->bus);
    fault_signal = 0;
    fault_armed = 1;
}

static void disarm(Saved *saved) {
    fault_armed = 0;
    sigaction(SIGSEGV, &saved->segv, NULL);
    sigaction(SIGBUS, &saved->bus, NULL);
}

/* Runs step(W) protected (real processes only: the fake source calls Python).
 * Returns 0, or -1 with Fault raised. */
#define PROTECTED(W, what, call)                                                        \
    do {                                                                                \
        if ((W)->source) {                                                              \
            call;                                                                       \
        } else {                                                                        \
            Saved saved_;                                                               \
            arm(&saved_);                                                               \
            if (sigsetjmp(fault_jump, 0) == 0) {                                        \
                call;                                                                   \
                disarm(&saved_);                                                        \
            } else {                                                                    \
                disarm(&saved_);                                                        \
                PyErr_Format(Fault, "the C walker faulted (%s) while %s",               \
                             fault_signal == SIGBUS ? "SIGBUS" : "SIGSEGV", what);      \
                return NULL;                                                            \
            }                                                                           \
        }                                                                               \
    } while (0)

/* ---- reading the other process ------------------------------------------------------ */

/* Reads every request of q into W->data (appended); each request's `at` is its offset,
 * -1 where it failed. A failed batch is retried request by request. */
static void read_fake(Walker *W, Reqs *q, size_t from) {
    PyObject *list = PyList_New((Py_ssize_t)(q->n - from));
    if (!list) {
        W->pyerr = 1;
        return;
    }
    for (size_t i = from; i < q->n; i++) {
        PyObject *pair = Py_BuildValue("(KK)", (unsigned long long)q->r[i].addr,
                                       (unsigned long long)q->r[i].size);
        if (!pair) {
            Py_DECREF(list);
            W->pyerr = 1;
            return;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)(i - from), pair);
    }
    PyObject *got = PyObject_CallMethod(W->source, "read_many", "(O)", list);
    Py_DECREF(list);
    if (!got) {
        W->pyerr = 1;
        return;
    }
    PyObject *seq = PySequence_Fast(got, "read_many must return a list");
    Py_DECREF(got);
    if (!seq) {
        W->pyerr = 1;
        return;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (size_t i = from; i < q->n && (Py_ssize_t)(i - from) < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)(i - from));
        if (!PyBytes_Check(item) || (uint64_t)PyBytes_GET_SIZE(item) != q->r[i].size) continue;
        if (buf_reserve(&W->data, q->r[i].size) < 0) continue;
        memcpy(W->data.p + W->data.n, PyBytes_AS_STRING(item), q->r[i].size);
        q->r[i].at = (int64_t)W->data.n;
        W->data.n += q->r[i].size;
    }
    Py_DECREF(seq);
}

static int plausible(uint64_t addr, uint64_t size) {
    return size > 0 && size <= MAX_READ && addr > 0 && addr + size > addr &&
           addr < (1ULL << 63);
}

static int64_t read_one_into(Walker *W, Buf *b, uint64_t addr, uint64_t size) {
    if (!plausible(addr, size) || buf_reserve(b, size) < 0) return -1;
    struct iovec local = {b->p + b->n, size};
    struct iovec remote = {(void *)(uintptr_t)addr, size};
    if (process_vm_readv(W->pid, &local, 1, &remote, 1, 0) != (ssize_t)size) return -1;
    int64_t at = (int64_t)b->n;
    b->n += size;
    return at;
}

static void read_reqs(Walker *W, Reqs *q, size_t from) {
    if (W->source) {
        read_fake(W, q, from);
        return;
    }
    struct iovec local[IOV_BATCH], remote[IOV_BATCH];
    size_t i = from;
    while (i < q->n) {
        size_t start = i, total = 0, k = 0;
        int ok = 1;
        while (i < q->n && k < IOV_BATCH) {
            if (!plausible(q->r[i].addr, q->r[i].size)) ok = 0;
            total += q->r[i].size;
            i++;
            k++;
        }
        if (!ok || buf_reserve(&W->data, total) < 0) {
            for (size_t j = start; j < i; j++)
                q->r[j].at = read_one_into(W, &W->data, q->r[j].addr, q->r[j].size);
            continue;
        }
        size_t off = W->data.n;
        for (size_t j = start; j < i; j++) {
            local[j - start].iov_base = W->data.p + off;
            local[j - start].iov_len = q->r[j].size;
            remote[j - start].iov_base = (void *)(uintptr_t)q->r[j].addr;
            remote[j - start].iov_len = q->r[j].size;
            off += q->r[j].size;
        }
        ssize_t got = process_vm_readv(W->pid, local, k, remote, k, 0);
        if (got == (ssize_t)total) {
            off = W->data.n;
            for (size_t j = start; j < i; j++) {
                q->r[j].at = (int64_t)off;
                off += q->r[j].size;
            }
            W->data.n = off;
        } else { /* the kernel stops at the first bad one: the others alone */
            for (size_t j = start; j < i; j++)
                q->r[j].at = read_one_into(W, &W->data, q->r[j].addr, q->r[j].size);
        }
    }
}

/* One read into a buffer of its own (a chunk): the offset, -1 failed. */
static int64_t read_into(Walker *W, Buf *b, uint64_t addr, uint64_t size) {
    if (!W->source) return read_one_into(W, b, addr, size);
    Reqs q = {0};
    if (reqs_add(&q, addr, size) < 0) return -1;
    size_t mark = W->data.n;
    read_fake(W, &q, 0);
    int64_t out = -1;
    if (q.r[0].at >= 0 && buf_reserve(b, size) == 0) {
        memcpy(b->p + b->n, W->data.p + q.r[0].at, size);
        out = (int64_t)b->n;
        b->n += size;
    }
    W->data.n = mark;
    free(q.r);
    return out;
}

static const char *at_data(Walker *W, Req *r) {
    return r->at >= 0 ? W->data.p + r->at : NULL;
}

/* ---- /proc ----------------------------------------------------------------------- */

static int open_task(int pid, int tid, const char *what) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/%s", pid, tid, what);
    return open(path, O_RDONLY | O_CLOEXEC);
}

static ssize_t pread_all(int fd, char *out, size_t size) {
    if (fd < 0) return -1;
    ssize_t n = pread(fd, out, size - 1, 0);
    if (n < 0) return -1;
    out[n] = 0;
    return n;
}

static TaskFd *task_fd(Walker *W, int tid) {
    size_t slot = ((size_t)tid * 2654435761u) % FD_CACHE;
    for (size_t k = 0; k < FD_CACHE; k++) {
        TaskFd *f = &W->fds[(slot + k) % FD_CACHE];
        if (f->tid == tid) return f;
        if (f->tid == 0) {
            f->tid = tid;
            f->sched = open_task(W->pid, tid, "schedstat");
            f->stat = -2; /* opened when first read */
            return f;
        }
    }
    return NULL; /* full: opened and closed at each read */
}

static void close_task(TaskFd *f) {
    if (f->sched >= 0) close(f->sched);
    if (f->stat >= 0) close(f->stat);
    f->tid = 0;
    f->sched = f->stat = -1;
    f->seen = 0;
}

/* The fds of threads not seen in this sample are closed (a thread that ended), and the
 * table rebuilt without them so that probing stays correct. */
static void forget_tasks(Walker *W) {
    TaskFd keep[FD_CACHE];
    size_t nkeep = 0;
    int dropped = 0;
    for (size_t i = 0; i < FD_CACHE; i++) {
        TaskFd *f = &W->fds[i];
        if (!f->tid) continue;
        if (f->seen != W->samples) {
            close_task(f);
            dropped = 1;
        } else {
            keep[nkeep++] = *f;
        }
    }
    if (!dropped) return;
    for (size_t i = 0; i < FD_CACHE; i++) {
        W->fds[i].tid = 0;
        W->fds[i].sched = W->fds[i].stat = -1;
        W->fds[i].seen = 0;
    }
    for (size_t i = 0; i < nkeep; i++) {
        size_t slot = ((size_t)keep[i].tid * 2654435761u) % FD_CACHE;
        while (W->fds[slot].tid) slot = (slot + 1) % FD_CACHE;
        W->fds[slot] = keep[i];
    }
}

/* stat: the state letter, user and system ticks (fields 3, 14, 15; the name may hold
 * spaces and parentheses: the fields start after the last ')'). */
static void parse_stat(const char *s, Thread *t) {
    const char *end = strrchr(s, ')');
    if (!end || !end[1] || !end[2]) return;
    const char *p = end + 2;
    t->state = *p;
    int field = 3;
    long long utime = -1, stime = -1;
    while (*p && field < 15) {
        while (*p && *p != ' ') p++;
        while (*p == ' ') p++;
        field++;
        if (field == 14) utime = strtoll(p, NULL, 10);
        if (field == 15) stime = strtoll(p, NULL, 10);
    }
    if (utime >= 0 && stime >= 0) {
        t->utime = utime;
        t->stime = stime;
    }
}

static void read_task(Walker *W, Thread *t, int with_stat) {
    char text[1024];
    t->run_ns = t->wait_ns = t->utime = t->stime = -1;
    t->state = 0;
    if (!W->pid || !t->native || t->native > 0x7fffffff) return;
    int tid = (int)t->native;
    TaskFd *f = task_fd(W, tid);
    int sched = f ? f->sched : open_task(W->pid, tid, "schedstat");
    if (f) f->seen = W->samples;
    if (pread_all(sched, text, sizeof text) > 0) {
        char *rest;
        long long run = strtoll(text, &rest, 10);
        long long wait = strtoll(rest, NULL, 10);
        if (run >= 0 && wait >= 0) {
            t->run_ns = run;
            t->wait_ns = wait;
        }
    }
    if (!f && sched >= 0) close(sched);
    if (!with_stat) return;
    int stat;
    if (f) {
        if (f->stat == -2) f->stat = open_task(W->pid, tid, "stat");
        stat = f->stat;
    } else {
        stat = open_task(W->pid, tid, "stat");
    }
    if (pread_all(stat, text, sizeof text) > 0) parse_stat(text, t);
    if (!f && stat >= 0) close(stat);
}

static int open_proc(int pid, const char *what) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", pid, what);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* The resident bytes and (from status, when asked) their high-water mark: -1
 * unreadable (gone), rss 0 when the process has no memory left (exiting, a zombie).
 * statm is read otherwise: a fifth of status's cost, which counts at 10,000 a second. */
static void read_memory(Walker *W, int status, long long *rss, long long *hwm) {
    char text[8192];
    *rss = *hwm = -1;
    if (!W->pid) return;
    if (!status) {
        if (W->statm_fd < 0) W->statm_fd = open_proc(W->pid, "statm");
        if (pread_all(W->statm_fd, text, 256) <= 0) return;
        char *rest;
        strtoll(text, &rest, 10);
        *rss = strtoll(rest, NULL, 10) * W->page;
        return;
    }
    if (W->status_fd < 0) W->status_fd = open_proc(W->pid, "status");
    if (pread_all(W->status_fd, text, sizeof text) <= 0) return;
    const char *p = strstr(text, "VmRSS:");
    *rss = p ? 1024 * strtoll(p + 6, NULL, 10) : 0;
    p = strstr(text, "VmHWM:");
    if (p) *hwm = 1024 * strtoll(p + 6, NULL, 10);
}

static int64_t native_of(Walker *W, uint64_t ident) {
    if (W->pthread_tid < 0 || !ident) return 0;
    size_t slot = mix(ident, NATIVE_CACHE - 1);
    for (size_t k = 0; k < 16; k++) {
        NativeEntry *e = &W->natives[(slot + k) % NATIVE_CACHE];
        if (e->ident == ident) return e->native;
        if (!e->ident) {
            Buf b = {0};
            int64_t at = read_into(W, &b, ident + (uint64_t)W->pthread_tid, 4);
            int64_t native = at >= 0 ? rd32(b.p + at) : 0;
            free(b.p);
            e->ident = ident;
            e->native = native;
            return native;
        }
    }
    memset(W->natives, 0, NATIVE_CACHE * sizeof(NativeEntry)); /* full: start again */
    return native_of(W, ident);
}

/* ---- interpreters and thread states -------------------------------------------------- */

static int read_u64(Walker *W, uint64_t addr, uint64_t *out) {
    Buf b = {0};
    int64_t at = read_into(W, &b, addr, 8);
    if (at >= 0) *out = rd64(b.p + at);
    free(b.p);
    return at >= 0 ? 0 : -1;
}

static int interpreters(Walker *W) {
    if (W->ninterps && W->samples % REFRESH_INTERPRETERS) return 0;
    const Layout *L = &W->L;
    uint64_t found[MAX_INTERPS];
    int n = 0;
    uint64_t interp;
    if (read_u64(W, W->runtime + (uint64_t)L->interps_head, &interp) < 0) return -1;
    while (interp && n < MAX_INTERPS) {
        int again = 0;
        for (int i = 0; i < n; i++) again |= found[i] == interp;
        if (again) break;
        found[n++] = interp;
        if (read_u64(W, interp + (uint64_t)L->interp_next, &interp) < 0) break;
    }
    /* The list is newest first: the main interpreter is the last. */
    uint64_t ordered[MAX_INTERPS];
    for (int i = 0; i < n; i++) ordered[i] = found[n - 1 - i];
    for (int i = 0; i < n; i++) {
        int same = i < W->ninterps && W->interps[i] == ordered[i];
        if (!same) {
            W->gil_base[i] = 0;
            free(W->known[i]);
            W->known[i] = NULL;
            W->nknown[i] = 0;
        }
        W->interps[i] = ordered[i];
    }
    for (int i = n; i < W->ninterps; i++) {
        free(W->known[i]);
        W->known[i] = NULL;
        W->nknown[i] = 0;
    }
    W->ninterps = n;
    return 0;
}

/* The GIL's state: (address, locked offset, holder offset, span); 0 when unknown. */
static int gil_request(Walker *W, int i, uint64_t *addr, long *locked, long *holder,
                       long *span) {
    const Layout *L = &W->L;
    uint64_t base;
    if (L->rt_gil_locked >= 0) {
        base = W->runtime;
        *locked = L->rt_gil_locked;
        *holder = L->rt_gil_holder;
    } else if (L->interp_gil >= 0) {
        if (!W->gil_base[i] &&
            read_u64(W, W->interps[i] + (uint64_t)L->interp_gil, &W->gil_base[i]) < 0)
            return 0;
        base = W->gil_base[i];
        if (!base) return 0;
        *locked = L->gil_locked;
        *holder = L->gil_holder;
    } else {
        return 0;
    }
    long low = *locked < *holder ? *locked : *holder;
    long high = *locked > *holder ? *locked : *holder;
    *addr = base + (uint64_t)low;
    *locked -= low;
    *holder -= low;
    *span = high - low + 8;
    return 1;
}

static Thread *new_thread(Walker *W, uint64_t tstate) {
    if (W->nthreads == W->threads_cap) {
        size_t cap = W->threads_cap ? 2 * W->threads_cap : 16;
        Thread *t = realloc(W->threads, cap * sizeof(Thread));
        if (!t) return NULL;
        W->threads = t;
        W->threads_cap = cap;
    }
    Thread *t = &W->threads[W->nthreads++];
    memset(t, 0, sizeof *t);
    t->tstate = tstate;
    t->chunk_copy = -1;
    t->complete = 1;
    t->sid = -1;
    return t;
}

/* Fills a thread's ids and where its frames are, from its thread state's bytes. */
static void from_state(Walker *W, Thread *t, const char *d) {
    const Layout *L = &W->L;
    t->ident = rd64(d + L->ts_thread_id);
    if (L->ts_native_id >= 0) t->native = rd64(d + L->ts_native_id);
    if (L->cframe) {
        uint64_t cframe = rd64(d + L->ts_cframe);
        t->leaf_at_addr = cframe ? cframe + (uint64_t)L->cf_current : 0;
        t->leaf = 0;
    } else {
        t->leaf_at_addr = t->tstate + (uint64_t)L->leaf_at;
        t->leaf = rd64(d + L->leaf_at);
    }
    t->chunk = t->top = 0;
    if (L->ts_chunk >= 0) {
        uint64_t chunk = rd64(d + L->ts_chunk), top = rd64(d + L->ts_chunk + 8);
        if (chunk && chunk < top && top - chunk <= MAX_CHUNK) {
            t->chunk = chunk;
            t->top = top;
        }
    }
}

/* The thread states of interpreter i, oldest (main) first, appended to W->threads;
 * the index of the first. The states seen last time are read in the same system call
 * as the thread list's head and the GIL and kept if they still chain. -1: the
 * interpreter's thread list is unreadable. */
static long thread_states(Walker *W, int i, uint64_t *holder) {
    const Layout *L = &W->L;
    uint64_t interp = W->interps[i];
    Reqs *q = &W->reqs;
    q->n = 0;
    W->data.n = 0;
    uint64_t gaddr = 0;
    long locked = 0, hold = 0, span = 0;
    int gil = gil_request(W, i, &gaddr, &locked, &hold, &span);
    reqs_add(q, interp + (uint64_t)L->interp_threads, 8);
    if (gil) reqs_add(q, gaddr, (uint64_t)span);
    size_t first = q->n;
    for (int k = 0; k < W->nknown[i]; k++) reqs_add(q, W->known[i][k], (uint64_t)L->ts_span);
    read_reqs(W, q, 0);
    const char *h = at_data(W, &q->r[0]);
    if (!h) return -1;
    uint64_t head = rd64(h);
    *holder = 0;
    if (gil) {
        const char *g = at_data(W, &q->r[1]);
        if (g && rd32(g + locked)) *holder = rd64(g + hold);
    }
    long start = (long)W->nthreads;
    int n = W->nknown[i];
    int chained = n > 0 && W->known[i][0] == head;
    for (int k = 0; chained && k < n; k++) {
        const char *d = at_data(W, &q->r[first + k]);
        uint64_t next = d ? rd64(d + L->ts_next) : 1;
        chained = d && next == (k + 1 < n ? W->known[i][k + 1] : 0);
    }
    if (chained) {
        for (int k = n - 1; k >= 0; k--) {
            Thread *t = new_thread(W, W->known[i][k]);
            if (!t) return start;
            from_state(W, t, at_data(W, &q->r[first + k]));
        }
        return start;
    }
    /* Walked anew: one read per state, a cycle cut. */
    uint64_t *list = malloc(MAX_THREADS * sizeof(uint64_t));
    int64_t *copies = malloc(MAX_THREADS * sizeof(int64_t));
    Buf b = {0};
    int count = 0;
    uint64_t ts = head;
    W->gen++;
    while (list && copies && ts && count < MAX_THREADS && seen_add(W, ts)) {
        int64_t at = read_into(W, &b, ts, (uint64_t)L->ts_span);
        if (at < 0) break;
        list[count] = ts;
        copies[count++] = at;
        ts = rd64(b.p + at + L->ts_next);
    }
    for (int k = count - 1; k >= 0; k--) {
        Thread *t = new_thread(W, list[k]);
        if (!t) break;
        from_state(W, t, b.p + copies[k]);
    }
    free(b.p);
    free(copies);
    free(W->known[i]);
    W->known[i] = list;
    W->nknown[i] = list ? count : 0;
    return start;
}

/* ---- the walk ------------------------------------------------------------------------ */

static int seen_add(Walker *W, uint64_t addr) {
    /* 1: new, 0: seen in this walk already (a cycle). */
    size_t mask = W->seen_cap - 1;
    size_t slot = mix(addr, mask);
    while (W->seen_gen[slot] == W->gen) {
        if (W->seen[slot] == addr) return 0;
        slot = (slot + 1) & mask;
    }
    W->seen_gen[slot] = W->gen;
    W->seen[slot] = addr;
    return 1;
}

static int raw_add(Walker *W, uint64_t code, uint64_t where) {
    if (W->nraw == W->raw_cap) {
        size_t cap = W->raw_cap ? 2 * W->raw_cap : 1024;
        Raw *r = realloc(W->raw, cap * sizeof(Raw));
        if (!r) return -1;
        W->raw = r;
        W->raw_cap = cap;
    }
    W->raw[W->nraw].code = code;
    W->raw[W->nraw].where = where;
    W->nraw++;
    return 0;
}

/* Loads the chunk below the last one of `ch` (its `previous`), copied up to its top. */
static int load_previous(Walker *W, Chunk *ch, int *nch) {
    if (*nch >= MAX_CHUNKS) return 0;
    const char *last = W->chunks.p + ch[*nch - 1].copy;
    uint64_t prev = rd64(last); /* chunk.previous */
    if (!prev) return 0;
    Buf head = {0};
    int64_t at = read_into(W, &head, prev, 24);
    if (at < 0) {
        free(head.p);
        return 0;
    }
    uint64_t size = rd64(head.p + at + 8), top = rd64(head.p + at + 16);
    free(head.p);
    uint64_t live = 24 + 8 * top;
    if (size < 24 || size > MAX_CHUNK || top > MAX_CHUNK || live > size) return 0;
    int64_t copy = read_into(W, &W->chunks, prev, live);
    if (copy < 0) return 0;
    ch[*nch].start = prev;
    ch[*nch].end = prev + live;
    ch[*nch].dead_end = prev + size;
    ch[*nch].copy = copy;
    (*nch)++;
    return 1;
}

/* Walks the frames of thread t from t->leaf out, appending raw (code, instruction)
 * pairs; sets nraw, complete and outer. A walk stops at the first frame that cannot be
 * one (a cycle, a dead frame, a caller above its callee in a chunk, an unreadable
 * frame). */
static void walk(Walker *W, Thread *t) {
    const Layout *L = &W->L;
    Chunk ch[MAX_CHUNKS];
    int nch = 0, all_loaded = 0;
    uint64_t span = (uint64_t)L->frame_span;
    if (t->chunk_copy >= 0) {
        ch[0].start = t->chunk;
        ch[0].end = t->top;
        const char *c = W->chunks.p + t->chunk_copy;
        uint64_t size = t->top - t->chunk >= 16 ? rd64(c + 8) : 0;
        ch[0].dead_end = size > t->top - t->chunk ? t->chunk + size : t->top;
        ch[0].copy = t->chunk_copy;
        nch = 1;
    } else {
        all_loaded = 1;
    }
    W->gen++;
    t->raw_at = W->nraw;
    t->nraw = 0;
    t->complete = 1;
    t->outer = 0;
    uint64_t addr = t->leaf;
    long depth = 0;
    Buf one = {0};
    while (addr) {
        if (depth >= W->max_depth) break; /* deeper than kept: the innermost stand */
        if (!seen_add(W, addr)) {
            t->complete = 0;
            break;
        }
        depth++;
        const char *f = NULL;
        int in = -1, dead = 0;
        for (;;) {
            for (int k = 0; k < nch; k++) {
                if (ch[k].start <= addr && addr + span <= ch[k].end) in = k;
                else if (ch[k].end <= addr && addr < ch[k].dead_end) dead = 1;
            }
            if (in >= 0 || dead || all_loaded) break;
            if (!load_previous(W, ch, &nch)) all_loaded = 1;
        }
        if (dead && in < 0) {
            t->complete = 0; /* a dead frame above a chunk's top: the chain moved */
            break;
        }
        uint64_t back;
        if (in >= 0) {
            f = W->chunks.p + ch[in].copy + (addr - ch[in].start);
            back = rd64(f + L->fr_back);
            if (ch[in].start <= back && back + span <= ch[in].end && back >= addr) {
                t->complete = 0; /* callers sit below their callees in a chunk */
                break;
            }
        } else {
            one.n = 0;
            int64_t at = read_into(W, &one, addr, span);
            if (at < 0) {
                t->complete = 0;
                break;
            }
            f = one.p + at;
            back = rd64(f + L->fr_back);
        }
        if (L->minor >= 12 && (unsigned char)f[L->fr_owner] == OWNED_BY_CSTACK) {
            addr = back;
            continue;
        }
        uint64_t code = rd64(f + L->fr_code);
        uint64_t where = L->fr_instr >= 0 ? rd64(f + L->fr_instr)
                                          : (uint64_t)(int64_t)rd32(f + L->fr_lasti);
        if (raw_add(W, code, where) < 0) {
            t->complete = 0;
            break;
        }
        t->nraw++;
        t->outer = addr;
        addr = back;
    }
    free(one.p);
}

/* ---- code objects -------------------------------------------------------------------- */

static CodeEntry *code_slot(Walker *W, uint64_t addr) {
    size_t mask = W->code_cap - 1;
    size_t slot = mix(addr, mask);
    while (W->codes[slot].used && W->codes[slot].addr != addr) slot = (slot + 1) & mask;
    return &W->codes[slot];
}

static int code_grow(Walker *W) {
    if (W->code_count * 2 < W->code_cap) return 0;
    if (W->code_count >= MAX_CODES) { /* a program making code without end */
        memset(W->codes, 0, W->code_cap * sizeof(CodeEntry));
        W->code_count = 0;
        return 0;
    }
    CodeEntry *old = W->codes;
    size_t old_cap = W->code_cap;
    CodeEntry *fresh = calloc(2 * old_cap, sizeof(CodeEntry));
    if (!fresh) return -1;
    W->codes = fresh;
    W->code_cap = 2 * old_cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].used) *code_slot(W, old[i].addr) = old[i];
    free(old);
    return 0;
}

static void fields_of(Walker *W, const char *head, uint64_t *f) {
    for (int k = 0; k < NFIELDS; k++) {
        const char *p = head + (W->L.field[k] - W->L.sig_lo);
        f[k] = k == 2 ? (uint64_t)(uint32_t)rd32(p) : rd64(p);
    }
}

static int pending_add(Walker *W, uint64_t addr, const char *head) {
    for (size_t k = 0; k < W->npending; k++)
        if (W->pending[k].addr == addr) return 0;
    if (W->npending == W->pending_cap) {
        size_t cap = W->pending_cap ? 2 * W->pending_cap : 64;
        Pending *p = realloc(W->pending, cap * sizeof(Pending));
        if (!p) return -1;
        W->pending = p;
        W->pending_cap = cap;
    }
    size_t size = (size_t)(W->L.sig_hi - W->L.sig_lo);
    if (buf_reserve(&W->pending_heads, size) < 0) return -1;
    memcpy(W->pending_heads.p + W->pending_heads.n, head, size);
    W->pending[W->npending].addr = addr;
    W->pending[W->npending].head = (int64_t)W->pending_heads.n;
    W->pending_heads.n += size;
    W->npending++;
    return 0;
}

/* The byte offset of a frame's instruction in its code object. */
static int64_t offset_of(const Layout *L, uint64_t code, uint64_t where) {
    if (L->fr_instr >= 0) return (int64_t)(where - code - (uint64_t)L->code_adaptive);
    return 2 * (int64_t)where;
}

/* How many of a walk's frames are valid, given their code objects' identity bytes
 * (heads[i] for frame i, NULL unreadable): a code object known by this identity, or a
 * new one of the code type (pending: handed to the reader), its offset inside it. */
static size_t valid_prefix(Walker *W, Raw *raw, size_t n, const char **heads) {
    const Layout *L = &W->L;
    uint64_t f[NFIELDS];
    for (size_t i = 0; i < n; i++) {
        const char *h = heads[i];
        if (!h) return i;
        fields_of(W, h, f);
        CodeEntry *e = code_slot(W, raw[i].code);
        int64_t size;
        if (e->used && !memcmp(e->f, f, sizeof f)) {
            if (e->id < 0) return i;
            size = e->size;
        } else {
            if (W->code_type && f[0] != W->code_type) return i;
            size = L->minor >= 11 ? 2 * (int64_t)f[1] : 0; /* 3.11+: code units */
            if (pending_add(W, raw[i].code, h) < 0) return i;
        }
        int64_t off = offset_of(L, raw[i].code, raw[i].where);
        if (off < -2 || (size && off >= size)) return i;
    }
    return n;
}

/* Room in the set of distinct code objects for n more. */
static int dset_reserve(Walker *W, size_t n) {
    size_t cap = W->dset_cap;
    while (cap < 2 * n + 64) cap *= 2;
    if (cap == W->dset_cap) return 0;
    uint64_t *a = calloc(cap, sizeof(uint64_t)), *g = calloc(cap, sizeof(uint64_t));
    int64_t *x = calloc(cap, sizeof(int64_t));
    uint64_t *d = calloc(cap, sizeof(uint64_t));
    if (!a || !g || !x || !d) {
        free(a);
        free(g);
        free(x);
        free(d);
        return -1;
    }
    free(W->dset);
    free(W->dset_gen);
    free(W->dset_idx);
    free(W->distinct);
    W->dset = a;
    W->dset_gen = g;
    W->dset_idx = x;
    W->distinct = d;
    W->dset_cap = cap;
    W->dgen = 0;
    return 0;
}

/* The distinct code objects of threads [from, to), their identity bytes read in one
 * system call with each thread's innermost frame pointer again (from `again_at` on). */
static void code_heads(Walker *W, size_t from, size_t to, size_t *again_at, int leaves) {
    const Layout *L = &W->L;
    Reqs *q = &W->reqs;
    q->n = 0;
    W->ndistinct = 0;
    size_t frames = 0;
    for (size_t ti = from; ti < to; ti++) frames += W->threads[ti].nraw;
    int room = dset_reserve(W, frames) == 0;
    size_t mask = W->dset_cap - 1;
    W->dgen++;
    for (size_t ti = from; ti < to && room; ti++) {
        Thread *t = &W->threads[ti];
        for (size_t i = 0; i < t->nraw; i++) {
            uint64_t code = W->raw[t->raw_at + i].code;
            size_t slot = mix(code, mask);
            int found = 0;
            while (W->dset_gen[slot] == W->dgen) {
                if (W->dset[slot] == code) {
                    found = 1;
                    break;
                }
                slot = (slot + 1) & mask;
            }
            if (found) continue;
            W->dset_gen[slot] = W->dgen;
            W->dset[slot] = code;
            W->dset_idx[slot] = (int64_t)q->n;
            W->distinct[W->ndistinct++] = code;
            reqs_add(q, code + (uint64_t)L->sig_lo, (uint64_t)(L->sig_hi - L->sig_lo));
        }
    }
    *again_at = q->n;
    for (size_t ti = from; ti < to && leaves; ti++) {
        Thread *t = &W->threads[ti];
        reqs_add(q, t->leaf_at_addr ? t->leaf_at_addr : 1, 8);
    }
    read_reqs(W, q, 0);
}

/* The identity bytes of a code object, after code_heads (NULL unreadable). */
static const char *head_of(Walker *W, uint64_t code) {
    size_t mask = W->dset_cap - 1;
    size_t slot = mix(code, mask);
    while (W->dset_gen[slot] == W->dgen) {
        if (W->dset[slot] == code) return at_data(W, &W->reqs.r[W->dset_idx[slot]]);
        slot = (slot + 1) & mask;
    }
    return NULL;
}

static size_t thread_valid(Walker *W, Thread *t) {
    const char *stack_heads[64];
    const char **heads = t->nraw <= 64 ? stack_heads : malloc(t->nraw * sizeof(char *));
    if (!heads) return 0;
    for (size_t i = 0; i < t->nraw; i++) heads[i] = head_of(W, W->raw[t->raw_at + i].code);
    size_t n = valid_prefix(W, W->raw + t->raw_at, t->nraw, (const char **)heads);
    if (heads != stack_heads) free(heads);
    return n;
}

/* Reads the leaves and current chunks of threads [from, to) in one system call. */
static void leaves_and_chunks(Walker *W, size_t from, size_t to) {
    const Layout *L = &W->L;
    Reqs *q = &W->reqs;
    q->n = 0;
    W->data.n = 0;
    for (size_t i = from; i < to; i++) {
        Thread *t = &W->threads[i];
        if (L->cframe) reqs_add(q, t->leaf_at_addr ? t->leaf_at_addr : 1, 8);
        if (t->chunk) reqs_add(q, t->chunk, t->top - t->chunk);
    }
    read_reqs(W, q, 0);
    size_t k = 0;
    for (size_t i = from; i < to; i++) {
        Thread *t = &W->threads[i];
        if (L->cframe) {
            const char *d = at_data(W, &q->r[k++]);
            t->leaf = d ? rd64(d) : 0;
        }
        t->chunk_copy = -1;
        if (t->chunk) {
            const char *d = at_data(W, &q->r[k]);
            size_t size = q->r[k].size;
            k++;
            if (d && buf_reserve(&W->chunks, size) == 0) {
                memcpy(W->chunks.p + W->chunks.n, d, size);
                t->chunk_copy = (int64_t)W->chunks.n;
                W->chunks.n += size;
            }
        }
    }
}

/* The outer frames two reads agree on (both innermost first): how many, from the end. */
static size_t agreed_outer(const Raw *a, size_t na, const Raw *b, size_t nb) {
    size_t n = 0;
    while (n < na && n < nb && a[na - 1 - n].code == b[nb - 1 - n].code &&
           a[na - 1 - n].where == b[nb - 1 - n].where)
        n++;
    return n;
}

/* A stack that moved under the read, read once more alone. */
static void read_again(Walker *W, Thread *t) {
    const Layout *L = &W->L;
    W->torn++;
    size_t first_at = t->raw_at, first_n = t->nvalid;
    Buf b = {0};
    int64_t at = read_into(W, &b, t->tstate, (uint64_t)L->ts_span);
    if (at < 0) {
        free(b.p);
        W->failed++;
        t->nraw = t->nvalid = 0;
        t->complete = 0;
        return;
    }
    size_t self = (size_t)(t - W->threads);
    from_state(W, t, b.p + at);
    free(b.p);
    leaves_and_chunks(W, self, self + 1);
    uint64_t leaf = t->leaf;
    walk(W, t);
    int whole = t->complete;
    size_t again_at;
    code_heads(W, self, self + 1, &again_at, 0);
    t->nvalid = thread_valid(W, t);
    /* The innermost frame pointer now, from the thread state read afresh. */
    uint64_t now = 0;
    Buf s = {0};
    int64_t sat = read_into(W, &s, t->tstate, (uint64_t)L->ts_span);
    if (sat >= 0) {
        if (L->cframe) {
            uint64_t cframe = rd64(s.p + sat + L->ts_cframe);
            if (!cframe || read_u64(W, cframe + (uint64_t)L->cf_current, &now) < 0) now = 1;
        } else {
            now = rd64(s.p + sat + L->leaf_at);
        }
    } else {
        now = 1;
    }
    free(s.p);
    if (whole && t->nvalid == t->nraw && now == leaf) {
        t->complete = 1;
        t->dropped = 0;
        return;
    }
    size_t n = agreed_outer(W->raw + first_at, first_n, W->raw + t->raw_at, t->nvalid);
    W->partial++;
    t->complete = 0;
    t->dropped = (uint32_t)(t->nvalid - n);
    t->raw_at = t->raw_at + t->nvalid - n;
    t->nraw = t->nvalid = n;
}

/* Everything of interpreter i: its threads, walked and checked. 0, or -1 unreadable. */
static int read_interpreter(Walker *W, int i) {
    uint64_t holder = 0;
    long start = thread_states(W, i, &holder);
    if (start < 0) return -1;
    size_t from = (size_t)start, to = W->nthreads;
    for (size_t k = from; k < to; k++) {
        Thread *t = &W->threads[k];
        t->gil = holder && holder == t->tstate;
        if (W->L.ts_native_id < 0) t->native = (uint64_t)native_of(W, t->ident);
    }
    W->chunks.n = 0;
    leaves_and_chunks(W, from, to);
    for (size_t k = from; k < to; k++) walk(W, &W->threads[k]);
    size_t again_at;
    code_heads(W, from, to, &again_at, 1);
    uint64_t *leaves = malloc((to - from + 1) * sizeof(uint64_t));
    if (!leaves) return 0;
    for (size_t k = from; k < to; k++) {
        const char *d = at_data(W, &W->reqs.r[again_at + (k - from)]);
        leaves[k - from] = d ? rd64(d) : (uint64_t)-1;
    }
    for (size_t k = from; k < to; k++) {
        Thread *t = &W->threads[k];
        t->nvalid = thread_valid(W, t);
    }
    for (size_t k = from; k < to; k++) {
        Thread *t = &W->threads[k];
        if (t->nvalid < t->nraw || leaves[k - from] != t->leaf) {
            W->chunks.n = 0; /* the first copies are not needed any more */
            read_again(W, t);
        }
    }
    free(leaves);
    return 0;
}

/* The C phase of a sample: every interpreter's threads, /proc. */
static void collect(Walker *W, int with_stat) {
    W->nthreads = 0;
    W->nraw = 0;
    W->npending = 0;
    W->pending_heads.n = 0;
    W->runtime_failed = 0;
    if (interpreters(W) < 0 || W->pyerr) {
        W->runtime_failed = 1;
        return;
    }
    for (int i = 0; i < W->ninterps && !W->pyerr; i++) {
        if (read_interpreter(W, i) < 0 && i == 0) {
            W->runtime_failed = 1;
            return;
        }
    }
    if (W->pid) {
        for (size_t k = 0; k < W->nthreads; k++) read_task(W, &W->threads[k], with_stat);
        forget_tasks(W);
    }
}

/* ---- stacks ---------------------------------------------------------------------------- */

static uint64_t hash_words(const int64_t *w, size_t n) {
    uint64_t h = 0x84222325cbf29ce4ULL ^ n;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint64_t)w[i];
        h *= 0x100000001b3ULL;
        h ^= h >> 29;
    }
    return h;
}

static int stack_grow(Walker *W) {
    if (W->stack_count * 2 < W->stack_cap) return 0;
    size_t cap = 2 * W->stack_cap;
    StackEntry *fresh = calloc(cap, sizeof(StackEntry));
    if (!fresh) return -1;
    for (size_t i = 0; i < W->stack_cap; i++) {
        if (!W->stacks[i].id) continue;
        size_t slot = W->stacks[i].hash & (cap - 1);
        while (fresh[slot].id) slot = (slot + 1) & (cap - 1);
        fresh[slot] = W->stacks[i];
    }
    free(W->stacks);
    W->stacks = fresh;
    W->stack_cap = cap;
    return 0;
}

static void stacks_clear(Walker *W) {
    memset(W->stacks, 0, W->stack_cap * sizeof(StackEntry));
    W->stack_count = 0;
    W->arena_n = 0;
}

static int push_new(Walker *W, int64_t id) {
    if (W->nnew == W->new_cap) {
        size_t cap = W->new_cap ? 2 * W->new_cap : 64;
        int64_t *p = realloc(W->new_ids, cap * sizeof(int64_t));
        if (!p) return -1;
        W->new_ids = p;
        W->new_cap = cap;
    }
    W->new_ids[W->nnew++] = id;
    return 0;
}

/* The local id of a stack of n words (stored as id + 1 in the table: 0 is free). */
static int64_t intern(Walker *W, const int64_t *w, size_t n) {
    if (stack_grow(W) < 0) return -1;
    uint64_t h = hash_words(w, n);
    size_t mask = W->stack_cap - 1;
    size_t slot = h & mask;
    while (W->stacks[slot].id) {
        StackEntry *e = &W->stacks[slot];
        if (e->hash == h && e->len == n && !memcmp(W->arena + e->at, w, n * sizeof(int64_t)))
            return e->id - 1;
        slot = (slot + 1) & mask;
    }
    if (W->arena_n + n > W->arena_cap) {
        size_t cap = W->arena_cap ? W->arena_cap : 4096;
        while (cap < W->arena_n + n) cap *= 2;
        int64_t *a = realloc(W->arena, cap * sizeof(int64_t));
        if (!a) return -1;
        W->arena = a;
        W->arena_cap = cap;
    }
    int64_t id = (int64_t)W->stack_count;
    if ((size_t)id >= W->stack_index_cap) {
        size_t cap = W->stack_index_cap ? 2 * W->stack_index_cap : 1024;
        int64_t *at = realloc(W->stack_at, cap * sizeof(int64_t));
        if (!at) return -1;
        W->stack_at = at;
        uint32_t *len = realloc(W->stack_len, cap * sizeof(uint32_t));
        if (!len) return -1;
        W->stack_len = len;
        int64_t *bound = realloc(W->bound, cap * sizeof(int64_t));
        if (!bound) return -1;
        W->bound = bound;
        W->stack_index_cap = cap;
    }
    if (push_new(W, id) < 0) return -1;
    memcpy(W->arena + W->arena_n, w, n * sizeof(int64_t));
    StackEntry *e = &W->stacks[slot];
    e->hash = h;
    e->at = (uint32_t)W->arena_n;
    e->len = (uint32_t)n;
    e->id = (int32_t)(id + 1);
    W->stack_at[id] = (int64_t)W->arena_n;
    W->stack_len[id] = (uint32_t)n;
    W->bound[id] = -1;
    W->arena_n += n;
    W->stack_count++;
    return id;
}

/* Each thread's frames as (code id, offset) words, interned; a frame whose code
 * object the reader refused ends the stack there (counted as a partial read). */
static void finish(Walker *W) {
    const Layout *L = &W->L;
    size_t cap = 2 * (size_t)W->max_depth + 2;
    int64_t *words = malloc(cap * sizeof(int64_t));
    if (!words) return;
    W->nnew = 0;
    /* Room for every thread's stack: emptied between samples, never within one. */
    if (W->stack_count + W->nthreads >= MAX_STACKS ||
        W->arena_n + W->nthreads * cap > MAX_STACK_WORDS)
        stacks_clear(W);
    for (size_t k = 0; k < W->nthreads; k++) {
        Thread *t = &W->threads[k];
        size_t n = 0;
        for (size_t i = 0; i < t->nvalid && n + 2 <= cap; i++) {
            Raw *r = &W->raw[t->raw_at + i];
            CodeEntry *e = code_slot(W, r->code);
            if (!e->used || e->id < 0) {
                t->complete = 0;
                break;
            }
            int64_t off = offset_of(L, r->code, r->where);
            if (off < -2 || (e->size && off >= e->size)) {
                t->complete = 0;
                break;
            }
            words[n++] = e->id;
            words[n++] = off;
        }
        t->sid = intern(W, words, n);
        if (t->sid < 0) {
            W->oom = 1;
            t->sid = 0;
        }
    }
    free(words);
}

/* ---- the Python side ------------------------------------------------------------------ */

/* Hands the code objects not known yet to the reader: (address, identity bytes) ->
 * (code id or -1, size in bytes). */
static int resolve_pending(Walker *W) {
    size_t size = (size_t)(W->L.sig_hi - W->L.sig_lo);
    for (size_t k = 0; k < W->npending; k++) {
        Pending *p = &W->pending[k];
        const char *head = W->pending_heads.p + p->head;
        PyObject *got = PyObject_CallFunction(W->resolver, "Ky#",
                                              (unsigned long long)p->addr, head,
                                              (Py_ssize_t)size);
        if (!got) return -1;
        long long id = -1, bytes = 0;
        if (!PyArg_ParseTuple(got, "LL", &id, &bytes)) {
            Py_DECREF(got);
            return -1;
        }
        Py_DECREF(got);
        if (code_grow(W) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        CodeEntry *e = code_slot(W, p->addr);
        if (!e->used) W->code_count++;
        e->used = 1;
        e->addr = p->addr;
        fields_of(W, head, e->f);
        e->id = id >= 0 && id < INT32_MAX ? (int32_t)id : -1;
        e->size = bytes > 0 ? bytes : 0;
    }
    return 0;
}

static PyObject *thread_tuple(Walker *W, Thread *t) {
    char state[2] = {t->state, 0};
    return Py_BuildValue("(KKKLOkOKLLLLs)", (unsigned long long)t->tstate,
                         (unsigned long long)t->ident, (unsigned long long)t->native,
                         (long long)W->bound[t->sid], t->complete ? Py_True : Py_False,
                         (unsigned long)t->dropped, t->gil ? Py_True : Py_False,
                         (unsigned long long)(t->complete ? t->outer : 0),
                         (long long)t->run_ns, (long long)t->wait_ns, (long long)t->utime,
                         (long long)t->stime, state);
}

/* The stacks new in this sample handed to the interner: their frames as a tuple of
 * (code id, byte offset) ints, innermost first; its id for each is kept. */
static int bind_new(Walker *W) {
    for (size_t k = 0; k < W->nnew; k++) {
        int64_t id = W->new_ids[k];
        int64_t at = W->stack_at[id];
        uint32_t len = W->stack_len[id];
        PyObject *frames = PyTuple_New((Py_ssize_t)len);
        if (!frames) return -1;
        for (uint32_t i = 0; i < len; i++) {
            PyObject *v = PyLong_FromLongLong(W->arena[at + i]);
            if (!v) {
                Py_DECREF(frames);
                return -1;
            }
            PyTuple_SET_ITEM(frames, i, v);
        }
        PyObject *got = PyObject_CallOneArg(W->interner, frames);
        Py_DECREF(frames);
        if (!got) return -1;
        long long sid = PyLong_AsLongLong(got);
        Py_DECREF(got);
        if (sid == -1 && PyErr_Occurred()) return -1;
        W->bound[id] = sid;
    }
    return 0;
}

static PyObject *memory_value(long long v) {
    if (v < 0) Py_RETURN_NONE;
    return PyFloat_FromDouble((double)v);
}

static PyObject *Walker_sample(Walker *W, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"stat", "status", NULL};
    int with_stat = 1, status = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pp", names, &with_stat, &status))
        return NULL;
    if (!W->resolver || !W->interner) {
        PyErr_SetString(PyExc_ValueError, "the walker is closed");
        return NULL;
    }
    long long rss = -1, hwm = -1;
    W->pyerr = 0;
    W->oom = 0;
    W->samples++;
    read_memory(W, status, &rss, &hwm);
    PROTECTED(W, "reading the stacks", collect(W, with_stat));
    if (W->pyerr) return NULL;
    if (resolve_pending(W) < 0) return NULL;
    PROTECTED(W, "interning the stacks", finish(W));
    if (W->oom) {
        PyErr_SetString(Fault, "the C walker ran out of memory for its tables");
        return NULL;
    }
    if (bind_new(W) < 0) return NULL;
    PyObject *threads;
    if (W->runtime_failed) {
        threads = Py_None;
        Py_INCREF(threads);
    } else {
        threads = PyList_New((Py_ssize_t)W->nthreads);
        if (!threads) return NULL;
        for (size_t k = 0; k < W->nthreads; k++) {
            PyObject *t = thread_tuple(W, &W->threads[k]);
            if (!t) {
                Py_DECREF(threads);
                return NULL;
            }
            PyList_SET_ITEM(threads, (Py_ssize_t)k, t);
        }
    }
    return Py_BuildValue("(NNN)", memory_value(rss), memory_value(hwm), threads);
}

static void walker_free_tables(Walker *W) {
    for (int i = 0; i < MAX_INTERPS; i++) {
        free(W->known[i]);
        W->known[i] = NULL;
    }
    free(W->codes);
    free(W->stacks);
    free(W->arena);
    free(W->natives);
    free(W->threads);
    free(W->raw);
    free(W->data.p);
    free(W->chunks.p);
    free(W->pending_heads.p);
    free(W->reqs.r);
    free(W->pending);
    free(W->seen);
    free(W->seen_gen);
    free(W->distinct);
    free(W->dset);
    free(W->dset_gen);
    free(W->dset_idx);
    free(W->stack_at);
    free(W->stack_len);
    free(W->bound);
    free(W->new_ids);
    memset(&W->L, 0, sizeof W->L);
    W->codes = NULL;
    W->stacks = NULL;
    W->arena = NULL;
    W->natives = NULL;
    W->threads = NULL;
    W->raw = NULL;
    W->data.p = W->chunks.p = W->pending_heads.p = NULL;
    W->reqs.r = NULL;
    W->pending = NULL;
    W->seen = W->seen_gen = W->distinct = W->dset = W->dset_gen = NULL;
    W->dset_idx = W->new_ids = W->stack_at = NULL;
    W->stack_len = NULL;
    W->bound = NULL;
}

static void walker_close_files(Walker *W) {
    if (!W->ready) return;
    for (size_t i = 0; i < FD_CACHE; i++)
        if (W->fds[i].tid) close_task(&W->fds[i]);
    if (W->status_fd >= 0) close(W->status_fd);
    if (W->statm_fd >= 0) close(W->statm_fd);
    W->status_fd = W->statm_fd = -1;
}

/* Closes the /proc files (opened again by a later sample, should one come). */
static PyObject *Walker_close(Walker *W, PyObject *unused) {
    (void)unused;
    walker_close_files(W);
    Py_RETURN_NONE;
}

static void Walker_dealloc(Walker *W) {
    walker_close_files(W);
    walker_free_tables(W);
    Py_XDECREF(W->resolver);
    Py_XDECREF(W->interner);
    Py_XDECREF(W->source);
    Py_TYPE(W)->tp_free((PyObject *)W);
}

/* An offset from the layout dict, -1 when absent. */
static long get_offset(PyObject *offsets, const char *name, int *bad) {
    PyObject *v = PyDict_GetItemString(offsets, name);
    if (!v) return -1;
    long x = PyLong_AsLong(v);
    if (x == -1 && PyErr_Occurred()) {
        *bad = 1;
        return -1;
    }
    if (x < 0 || x >= (1 << 16)) *bad = 1;
    return x;
}

static int parse_layout(Walker *W, PyObject *offsets, int minor) {
    Layout *L = &W->L;
    int bad = 0;
    L->minor = minor;
#define GET(field, name) L->field = get_offset(offsets, name, &bad)
    GET(interps_head, "runtime.interpreters_head");
    GET(interp_next, "interp.next");
    GET(interp_threads, "interp.threads_head");
    GET(rt_gil_locked, "runtime.gil_locked");
    GET(rt_gil_holder, "runtime.gil_holder");
    GET(interp_gil, "interp.gil");
    GET(gil_locked, "gil.locked");
    GET(gil_holder, "gil.holder");
    GET(ts_next, "tstate.next");
    GET(ts_thread_id, "tstate.thread_id");
    GET(ts_native_id, "tstate.native_thread_id");
    GET(ts_chunk, "tstate.datastack_chunk");
    GET(ts_cframe, "tstate.cframe");
    GET(cf_current, "cframe.current_frame");
    GET(ts_current_frame, "tstate.current_frame");
    GET(ts_frame, "tstate.frame");
    GET(fr_back, "frame.back");
    GET(fr_code, "frame.code");
    GET(fr_instr, "frame.instr");
    GET(fr_lasti, "frame.lasti");
    GET(fr_owner, "frame.owner");
    GET(fr_size, "frame.size");
    GET(code_adaptive, "code.adaptive");
    GET(field[0], "object.type");
    GET(field[1], "bytes.size");
    GET(field[2], "code.firstlineno");
    GET(field[3], "code.filename");
    GET(field[5], "code.linetable");
#undef GET
    L->field[4] = get_offset(offsets, "code.qualname", &bad);
    if (L->field[4] < 0) L->field[4] = get_offset(offsets, "code.name", &bad);
    if (bad) return -1;
    L->cframe = L->ts_cframe >= 0;
    L->leaf_at = L->cframe ? L->ts_cframe
                           : (L->ts_current_frame >= 0 ? L->ts_current_frame : L->ts_frame);
    long need[] = {L->interps_head, L->interp_next, L->interp_threads, L->ts_next,
                   L->ts_thread_id, L->leaf_at, L->fr_back, L->fr_code};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i] < 0) return -1;
    if (L->fr_instr < 0 && L->fr_lasti < 0) return -1;
    if (L->cframe && L->cf_current < 0) return -1;
    if (L->fr_instr >= 0 && L->code_adaptive < 0) return -1;
    if (minor >= 12 && L->fr_owner < 0) return -1;
    if (L->rt_gil_locked >= 0 && L->rt_gil_holder < 0) return -1;
    if (L->interp_gil >= 0 && (L->gil_locked < 0 || L->gil_holder < 0)) return -1;
    long lo = L->field[0], hi = L->field[0];
    for (int k = 0; k < NFIELDS; k++) {
        if (L->field[k] < 0) return -1;
        if (L->field[k] < lo) lo = L->field[k];
        if (L->field[k] > hi) hi = L->field[k];
    }
    L->sig_lo = lo;
    L->sig_hi = hi + 8;
    /* The thread state's span: every tstate field, 16 more (the chunk's top). */
    long ts = 0;
    long tsf[] = {L->ts_next, L->ts_thread_id, L->ts_native_id, L->ts_chunk, L->ts_cframe,
                  L->ts_current_frame, L->ts_frame};
    for (size_t i = 0; i < sizeof tsf / sizeof tsf[0]; i++)
        if (tsf[i] > ts) ts = tsf[i];
    L->ts_span = ts + 8 + 16;
    long fs = L->fr_size;
    long ff[] = {L->fr_back + 8, L->fr_code + 8, L->fr_lasti + 4, L->fr_instr + 8,
                 L->fr_owner + 1};
    for (size_t i = 0; i < sizeof ff / sizeof ff[0]; i++)
        if (ff[i] > fs) fs = ff[i];
    if (fs > MAX_FRAME_SPAN) return -1;
    L->frame_span = fs;
    return 0;
}

static int Walker_init(Walker *W, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"source",   "offsets",  "minor",     "runtime",     "code_type",
                            "resolver", "interner", "max_depth", "pthread_tid", NULL};
    PyObject *source, *offsets, *resolver, *interner;
    int minor;
    unsigned long long runtime, code_type;
    long max_depth = 1024, pthread_tid = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!iKKOO|ll", names, &source,
                                     &PyDict_Type, &offsets, &minor, &runtime, &code_type,
                                     &resolver, &interner, &max_depth, &pthread_tid))
        return -1;
    if (minor < 10 || minor > 13) {
        PyErr_Format(PyExc_ValueError, "Python 3.%d: no walk for this version", minor);
        return -1;
    }
    if (max_depth < 1 || max_depth > 1 << 16) {
        PyErr_Format(PyExc_ValueError, "max_depth must be in [1, 65536], got %ld", max_depth);
        return -1;
    }
    if (!PyCallable_Check(resolver) || !PyCallable_Check(interner)) {
        PyErr_SetString(PyExc_TypeError, "resolver and interner must be callable");
        return -1;
    }
    if (W->ready) {
        PyErr_SetString(PyExc_RuntimeError, "a Walker is initialised once");
        return -1;
    }
    W->status_fd = W->statm_fd = -1;
    W->page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < FD_CACHE; i++) {
        W->fds[i].tid = 0;
        W->fds[i].sched = W->fds[i].stat = -1;
    }
    W->ready = 1;
    if (PyLong_Check(source)) {
        long pid = PyLong_AsLong(source);
        if (pid <= 0 || pid > INT32_MAX) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "pid must be a positive process id, got %ld", pid);
            return -1;
        }
        W->pid = (int)pid;
    } else {
        W->pid = 0;
        Py_INCREF(source);
        W->source = source;
    }
    if (parse_layout(W, offsets, minor) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "the layout lacks a field the walk needs");
        return -1;
    }
    W->runtime = runtime;
    W->code_type = code_type;
    W->max_depth = max_depth;
    W->pthread_tid = pthread_tid;
    W->code_cap = 1024;
    W->codes = calloc(W->code_cap, sizeof(CodeEntry));
    W->stack_cap = 1024;
    W->stacks = calloc(W->stack_cap, sizeof(StackEntry));
    W->natives = calloc(NATIVE_CACHE, sizeof(NativeEntry));
    /* The walk's set holds a walk's frames or a thread list: never more than half full. */
    size_t seen = 2 * MAX_THREADS;
    while (seen < 2 * (size_t)max_depth + 64) seen *= 2;
    W->seen_cap = seen;
    W->seen = calloc(seen, sizeof(uint64_t));
    W->seen_gen = calloc(seen, sizeof(uint64_t));
    W->dset_cap = 64;
    W->dset = calloc(W->dset_cap, sizeof(uint64_t));
    W->dset_gen = calloc(W->dset_cap, sizeof(uint64_t));
    W->dset_idx = calloc(W->dset_cap, sizeof(int64_t));
    W->distinct = calloc(W->dset_cap, sizeof(uint64_t));
    if (!W->codes || !W->stacks || !W->natives || !W->seen || !W->seen_gen || !W->dset ||
        !W->dset_gen || !W->dset_idx || !W->distinct) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(resolver);
    W->resolver = resolver;
    Py_INCREF(interner);
    W->interner = interner;
    return 0;
}

static PyObject *Walker_set_interner(Walker *W, PyObject *interner) {
    if (!PyCallable_Check(interner)) {
        PyErr_SetString(PyExc_TypeError, "interner must be callable");
        return NULL;
    }
    if (!W->stacks) {
        PyErr_SetString(PyExc_ValueError, "the walker is not initialised");
        return NULL;
    }
    Py_INCREF(interner);
    Py_XSETREF(W->interner, interner);
    stacks_clear(W); /* every stack is handed to the new interner anew */
    Py_RETURN_NONE;
}

static PyObject *Walker_counts(Walker *W, void *unused) {
    (void)unused;
    return Py_BuildValue("(LLLK)", W->torn, W->partial, W->failed,
                         (unsigned long long)W->samples);
}

static PyMethodDef Walker_methods[] = {
    {"sample", (PyCFunction)(void (*)(void))Walker_sample, METH_VARARGS | METH_KEYWORDS,
     "sample(stat=True, status=True) -> (rss, hwm, threads): one read of the process.\n\n"
     "rss and hwm are bytes (None unreadable, rss 0 once its memory is gone; hwm with\n"
     "status=True only); threads is None when the runtime cannot be read, else one tuple\n"
     "per thread: (thread state, ident, kernel id, stack id, complete, dropped, holds the\n"
     "GIL, outermost frame, run ns, runnable-waiting ns, user ticks, system ticks, state\n"
     "letter), -1 where not read (ticks and state with stat=True only). A stack id is the\n"
     "interner's: a stack first seen is handed to it as a tuple of (code id, byte offset)\n"
     "pairs, innermost first."},
    {"set_interner", (PyCFunction)Walker_set_interner, METH_O,
     "set_interner(interner): stacks go to another table from now on (ids start again)."},
    {"close", (PyCFunction)Walker_close, METH_NOARGS,
     "close() closes the /proc files (a later sample opens them again)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Walker_getset[] = {
    {"counts", (getter)Walker_counts, NULL,
     "(torn, partial, failed, samples): stack reads that moved and were read again, kept as\n"
     "their outer frames, that gave nothing; samples taken.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject WalkerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "onnxrt_backend_dev.monitoring._observe._walker.Walker",
    .tp_basicsize = sizeof(Walker),
    .tp_dealloc = (destructor)Walker_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Walker(source, offsets, minor, runtime, code_type, resolver, interner,\n"
              "max_depth=1024, pthread_tid=-1): reads the Python stacks of a process\n"
              "(source: its pid, or, in tests, an object with read_many).",
    .tp_methods = Walker_methods,
    .tp_getset = Walker_getset,
    .tp_init = (initproc)Walker_init,
    .tp_new = PyType_GenericNew,
};

/* ---- plain reads (the Python reader's memory, see memory.ProcessMemory) ------------------- */

static PyObject *read_many(PyObject *self, PyObject *args) {
    (void)self;
    int pid;
    PyObject *requests;
    if (!PyArg_ParseTuple(args, "iO", &pid, &requests)) return NULL;
    PyObject *seq = PySequence_Fast(requests, "requests must be a sequence of (address, size)");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Walker fake; /* only its pid and buffers are used */
    memset(&fake, 0, sizeof fake);
    fake.pid = pid;
    Reqs q = {0};
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long addr, size;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KK", &addr, &size) ||
            reqs_add(&q, addr, size) < 0) {
            Py_DECREF(seq);
            free(q.r);
            if (!PyErr_Occurred()) PyErr_NoMemory();
            return NULL;
        }
    }
    Py_DECREF(seq);
    read_reqs(&fake, &q, 0);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *item;
        if (q.r[i].at >= 0) {
            item = PyBytes_FromStringAndSize(fake.data.p + q.r[i].at, (Py_ssize_t)q.r[i].size);
        } else if (q.r[i].size == 0) {
            item = PyBytes_FromStringAndSize("", 0);
        } else {
            item = Py_None;
            Py_INCREF(item);
        }
        if (!item) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, item);
    }
    free(q.r);
    free(fake.data.p);
    return out;
}

static PyObject *read_one(PyObject *self, PyObject *args) {
    (void)self;
    int pid;
    unsigned long long addr, size;
    if (!PyArg_ParseTuple(args, "iKK", &pid, &addr, &size)) return NULL;
    if (!plausible(addr, size)) {
        errno = EFAULT;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!out) return NULL;
    struct iovec local = {PyBytes_AS_STRING(out), size};
    struct iovec remote = {(void *)(uintptr_t)addr, size};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got == (ssize_t)size) return out;
    Py_DECREF(out);
    if (got < 0) return PyErr_SetFromErrno(PyExc_OSError);
    return PyErr_Format(PyExc_OSError, "short read (%zd)", got);
}

/* ---- line tables ------------------------------------------------------------------------ */
/* The line of one byte offset, as _observe/linetable.py decodes a table (read once per
 * code object by the reader): the line of the last range starting at or before the
 * offset that has one, the first line when none does. The table is untrusted: a
 * malformed entry ends the decoding, what came before stands. */

#define MAX_RANGES (1 << 20)

static int varint(const uint8_t *t, size_t n, size_t *i, long long *out) {
    if (*i >= n) return 0;
    uint8_t b = t[(*i)++];
    unsigned long long value = b & 63;
    int shift = 6;
    while (b & 64) {
        if (*i >= n) return 0;
        b = t[(*i)++];
        value |= (unsigned long long)(b & 63) << shift;
        shift += 6;
        if (shift > 60) return 0;
    }
    *out = (long long)value;
    return 1;
}

static int svarint(const uint8_t *t, size_t n, size_t *i, long long *out) {
    long long v;
    if (!varint(t, n, i, &v)) return 0;
    *out = v & 1 ? -(v >> 1) : v >> 1;
    return 1;
}

static long long line_311(const uint8_t *t, size_t n, long long first, long long offset) {
    long long line = first, best = -1, addr = 0, v;
    size_t i = 0;
    for (long count = 0; i < n && count < MAX_RANGES; count++) {
        uint8_t head = t[i];
        if (!(head & 0x80)) break; /* not the start of an entry: a torn or foreign table */
        int code = (head >> 3) & 15, length = (head & 7) + 1;
        i++;
        long long here = line;
        if (code == 15) {
            here = -1;
        } else if (code == 14) {
            if (!svarint(t, n, &i, &v)) break;
            line += v;
            here = line;
            if (!varint(t, n, &i, &v) || !varint(t, n, &i, &v) || !varint(t, n, &i, &v)) break;
        } else if (code == 13) {
            if (!svarint(t, n, &i, &v)) break;
            line += v;
            here = line;
        } else if (code >= 10) {
            line += code - 10;
            here = line;
            i += 2;
        } else {
            i += 1;
        }
        if (addr > offset) break;
        if (here >= 0) best = here;
        addr += 2 * length;
    }
    return best >= 0 ? best : first;
}

static long long line_310(const uint8_t *t, size_t n, long long first, long long offset) {
    long long line = first, best = -1, addr = 0;
    for (size_t i = 0; i + 1 < n && i / 2 < MAX_RANGES; i += 2) {
        long long end = addr + t[i];
        int delta = (int8_t)t[i + 1];
        long long here = -1;
        if (delta != -128) {
            line += delta;
            here = line;
        }
        if (addr > offset) break;
        if (end > addr && here >= 0) best = here;
        addr = end;
    }
    return best >= 0 ? best : first;
}

static PyObject *line_of(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer table;
    long long first, offset;
    int minor;
    if (!PyArg_ParseTuple(args, "y*LLi", &table, &first, &offset, &minor)) return NULL;
    long long line = first;
    if (offset >= 0) {
        const uint8_t *t = table.buf;
        size_t n = (size_t)table.len;
        line = minor >= 11 ? line_311(t, n, first, offset) : line_310(t, n, first, offset);
    }
    PyBuffer_Release(&table);
    return PyLong_FromLongLong(line);
}

/* ---- module functions --------------------------------------------------------------------- */

static volatile uintptr_t fault_address = 8; /* unmapped: the first page */

__attribute__((noinline)) static void deliberate_fault(void) {
    *(volatile int *)fault_address = 1;
}

static PyObject *selftest_fault(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    Walker fake;
    memset(&fake, 0, sizeof fake);
    PROTECTED(&fake, "testing the fault handler", deliberate_fault());
    Py_RETURN_NONE;
}

static PyObject *set_timer_slack(PyObject *self, PyObject *arg) {
    (void)self;
    long ns = PyLong_AsLong(arg);
    if (ns == -1 && PyErr_Occurred()) return NULL;
    if (ns < 1) {
        PyErr_Format(PyExc_ValueError, "timer slack must be >= 1 ns, got %ld", ns);
        return NULL;
    }
    if (prctl(PR_SET_TIMERSLACK, (unsigned long)ns, 0, 0, 0) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* prctl for the supervisor of children (PR_SET_PDEATHSIG in a forked child): called
 * between fork and exec, it sets errno and returns -1 rather than raise. */
static PyObject *prctl_call(PyObject *self, PyObject *args) {
    (void)self;
    int option;
    unsigned long arg;
    if (!PyArg_ParseTuple(args, "ik", &option, &arg)) return NULL;
    return PyLong_FromLong(prctl(option, arg, 0, 0, 0));
}

static PyMethodDef module_methods[] = {
    {"prctl", prctl_call, METH_VARARGS,
     "prctl(option, arg) -> prctl(2)'s result (-1 and errno set on failure)."},
    {"_selftest_fault", selftest_fault, METH_NOARGS,
     "Faults on purpose inside the protection: raises Fault (tests)."},
    {"read", read_one, METH_VARARGS,
     "read(pid, address, size) -> the bytes, or OSError with the system's reason."},
    {"read_many", read_many, METH_VARARGS,
     "read_many(pid, requests) -> one bytes per (address, size) read from process pid with\n"
     "process_vm_readv (None where it failed; one system call per 1,024 requests)."},
    {"line", line_of, METH_VARARGS,
     "line(table, first_line, offset, minor) -> the line of a byte offset in a code\n"
     "object of Python 3.minor, from its co_linetable (as _observe/linetable.py decodes it)."},
    {"set_timer_slack", set_timer_slack, METH_O,
     "set_timer_slack(ns): how late the kernel may wake this thread's sleeps (prctl)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_walker",
                                    "The observer's walk of another process's stacks, in C.",
                                    -1, module_methods};

PyMODINIT_FUNC PyInit__walker(void) {
    if (PyType_Ready(&WalkerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    /* The package's one error family: _errors.WalkerFault. */
    PyObject *errors = PyImport_ImportModule("onnxrt_backend_dev.monitoring._errors");
    Fault = errors ? PyObject_GetAttrString(errors, "WalkerFault") : NULL;
    Py_XDECREF(errors);
    Py_INCREF(&WalkerType);
    if (!Fault || PyModule_AddObject(m, "Walker", (PyObject *)&WalkerType) < 0 ||
        PyModule_AddObject(m, "Fault", Fault) < 0 ||
        PyModule_AddIntConstant(m, "VERSION", WALKER_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
