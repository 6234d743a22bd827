// The machine's speed of light, measured: peak FMA throughput and streaming bandwidth.
//
// Compiled by dace_ai.performance.measure with the compiler and flags of the real build (plus
// OpenMP), run in a child process with a timeout; prints one JSON object on stdout:
//
//   roofline THREADS[,THREADS...] SECONDS SIZE[,SIZE...]
//   {"vector_bytes": 64, "chains": 24,
//    "fma": {"1": {"float32": GFLOP/s, "float64": GFLOP/s}, "2": {...}},
//    "stream": {"1": {"SIZE": {"triad": GB/s, "read": GB/s, "copy": GB/s, "copy_nontemporal": GB/s}, ...},
//               "2": {...}}}
//
// A SIZE is the working set in bytes of all threads together (a shared cache, memory), or with
// a trailing "p" of each thread (a private cache: each core streams its own).
//
// Peak FLOP/s needs every FMA unit busy every cycle: each thread runs many independent
// accumulator chains (more than latency x units) of the widest vectors the flags allow, so no
// chain waits on its own previous result. Bandwidth is measured for working sets of the given
// sizes (one per cache level and one far beyond the last-level cache) with four kernels: a
// STREAM triad, a pure read (no write-allocate), the C library's memcpy and a copy with
// non-temporal stores, so no program moving the same bytes can beat the best one.
//
// Every figure is work divided by the CPU time of the slowest thread, best of several runs: on
// a machine shared with other processes, wall time would measure the neighbours; the CPU time
// of a thread measures the units it ran on. The figures are upper bounds, as a roofline must be.
#include <omp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__AVX512F__)
#define VECTOR_BYTES 64
#define CHAINS 30
#elif defined(__AVX__)
#define VECTOR_BYTES 32
#define CHAINS 12
#elif defined(__aarch64__)
#define VECTOR_BYTES 16
#define CHAINS 24
#else
#define VECTOR_BYTES 16
#define CHAINS 12
#endif

// Clang splits 512-bit generic vectors into two 256-bit halves where it prefers 256-bit code
// (-march=native on many AVX-512 CPUs) unless a function asks for the full width, as code written
// with _mm512 intrinsics gets anyway.
#if defined(__clang__) && defined(__AVX512F__)
#define FULL_WIDTH __attribute__((min_vector_width(512)))
#else
#define FULL_WIDTH
#endif

template <typename T>
struct Vec {
    typedef T type __attribute__((vector_size(VECTOR_BYTES)));
};

static double thread_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// `iterations` rounds of CHAINS independent vector FMAs; the result is used by the caller so the
// work cannot be optimised away.
template <typename T>
__attribute__((noinline)) FULL_WIDTH T fma_chains(long iterations, T seed) {
    typedef typename Vec<T>::type V;
    V acc[CHAINS];
    const int lanes = VECTOR_BYTES / sizeof(T);
    // Broadcast, never written lane by lane: an addressed vector is kept in memory, and every FMA
    // would then load its operand instead of running from registers.
    const V mul = V{} + (T(1) - T(1e-7) * seed), add = V{} + T(1e-7) * seed;
    for (int c = 0; c < CHAINS; ++c) acc[c] = mul * T(c + 1);
    for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 64
        for (int c = 0; c < CHAINS; ++c) acc[c] = acc[c] * mul + add;
    }
    V total = acc[0];
    for (int c = 1; c < CHAINS; ++c) total += acc[c];
    T sum = 0;
    for (int l = 0; l < lanes; ++l) sum += total[l];
    return sum;
}

static volatile double sink = 0;

template <typename T>
double fma_gflops(int threads, double seconds) {
    const double per_iteration = 2.0 * CHAINS * (VECTOR_BYTES / sizeof(T));
    long iterations = 1 << 12;  // calibrated on one thread to about `seconds` of CPU time
    for (;;) {
        double t0 = thread_seconds();
        sink = sink + fma_chains<T>(iterations, T(1));
        double t = thread_seconds() - t0;
        if (t > seconds / 4 || iterations > (1L << 40)) {
            iterations = (long)(iterations * (seconds / (t > 0 ? t : 1e-9))) + 1;
            break;
        }
        iterations *= 4;
    }
    double best = 0;
    for (int repeat = 0; repeat < 8; ++repeat) {
        double slowest = 0;
#pragma omp parallel num_threads(threads)
        {
            T local = fma_chains<T>(iterations / 16 + 1, T(omp_get_thread_num() + 2));  // wake the units up
#pragma omp barrier
            double t0 = thread_seconds();
            local += fma_chains<T>(iterations, T(omp_get_thread_num() + 2));
            double t = thread_seconds() - t0;
#pragma omp critical
            {
                if (t > slowest) slowest = t;
                sink = sink + local;
            }
        }
        double rate = per_iteration * iterations * threads / slowest / 1e9;
        if (rate > best) best = rate;
    }
    return best;
}

typedef void (*Kernel)(double*, double*, double*, long);

FULL_WIDTH static void triad(double* a, double* b, double* c, long n) {
    const double s = 3.0;
#pragma omp simd
    for (long i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

FULL_WIDTH static void read_only(double* a, double*, double*, long n) {
    typedef Vec<double>::type V;
    const int lanes = VECTOR_BYTES / sizeof(double);
    V acc[16] = {};
    long i = 0;
    for (; i + 16 * lanes <= n; i += 16 * lanes) {
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) acc[k] += *(const V*)(a + i + k * lanes);
    }
    double s = 0;
    for (; i < n; ++i) s += a[i];
    for (int k = 0; k < 16; ++k)
        for (int l = 0; l < lanes; ++l) s += acc[k][l];
    sink = sink + s;
}

static void copy(double* a, double* b, double*, long n) { std::memcpy(a, b, n * sizeof(double)); }

// A copy whose stores bypass the caches (no write-allocate read of the destination), as the C
// library's memcpy does beyond a size it picks: so the figure holds whichever copy a program makes.
// Four pages are copied interleaved, line by line, so four read streams keep the memory busy.
static void copy_nontemporal(double* a, double* b, double*, long n) {
#if defined(__x86_64__) && defined(__AVX512F__)
    typedef __m512d V;
#define LOAD _mm512_load_pd
#define STORE _mm512_stream_pd
#elif defined(__x86_64__) && defined(__AVX__)
    typedef __m256d V;
#define LOAD _mm256_load_pd
#define STORE _mm256_stream_pd
#elif defined(__x86_64__)
    typedef __m128d V;
#define LOAD _mm_load_pd
#define STORE _mm_stream_pd
#endif
#if defined(__x86_64__)
    const long lanes = sizeof(V) / sizeof(double), page = 512, block = 4 * page;  // 4 KiB pages of doubles
    long i = 0;
    for (; i + block <= n; i += block) {
        for (long line = 0; line < page; line += 32) {  // four cache lines of each page per step
            for (long p = 0; p < 4; ++p) {
                double* to = a + i + p * page + line;
                const double* from = b + i + p * page + line;
                _mm_prefetch((const char*)(from + 64), _MM_HINT_T0);
                for (long l = 0; l < 32; l += lanes) STORE(to + l, LOAD(from + l));
            }
        }
    }
    for (; i + lanes <= n; i += lanes) STORE(a + i, LOAD(b + i));
    for (; i < n; ++i) a[i] = b[i];
    _mm_sfence();
#undef LOAD
#undef STORE
#else
    std::memcpy(a, b, n * sizeof(double));
#endif
}

// Bytes moved per element of each kernel (STREAM's convention: no write-allocate traffic counted).
static const int KERNEL_COUNT = 4;
static const Kernel KERNELS[] = {triad, read_only, copy, copy_nontemporal};
static const char* NAMES[] = {"triad", "read", "copy", "copy_nontemporal"};
static const double BYTES_PER_ELEMENT[] = {24.0, 8.0, 16.0, 16.0};

// GB/s of each kernel over a working set of `bytes` (three arrays, each thread streaming its own
// contiguous share, as often as fills about 20 ms), best of five runs.
static void stream(double* a, double* b, double* c, long bytes, int threads, double out[KERNEL_COUNT]) {
    long n = bytes / (long)(3 * sizeof(double));
    n -= n % (threads * 64);
    if (n < threads * 64) n = threads * 64;
    long passes = (long)(2e7 * threads / (double)(n * sizeof(double))) + 1;
    bool cached = n * sizeof(double) * 3 / threads < (64L << 20);  // a cache's working set: warm it first
    for (int k = 0; k < KERNEL_COUNT; ++k) {
        double best = 1e30;
        for (int repeat = 0; repeat < 5; ++repeat) {
            double slowest = 0;
#pragma omp parallel num_threads(threads)
            {
                int t = omp_get_thread_num();
                long begin = n / threads * t, count = n / threads;
                if (cached && repeat == 0) KERNELS[k](a + begin, b + begin, c + begin, count);
#pragma omp barrier
                double t0 = thread_seconds();
                for (long p = 0; p < passes; ++p) KERNELS[k](a + begin, b + begin, c + begin, count);
                double elapsed = thread_seconds() - t0;
#pragma omp critical
                if (elapsed > slowest) slowest = elapsed;
            }
            if (slowest < best) best = slowest;
        }
        out[k] = BYTES_PER_ELEMENT[k] * n * passes / best / 1e9;
    }
}

// "1,2" -> {1, 2}; "49152p,268435456" -> {49152, 268435456} with per_thread {true, false}.
static std::vector<long> numbers(const char* text, std::vector<bool>* per_thread = nullptr) {
    std::vector<long> values;
    for (const char* p = text; *p;) {
        char* end = nullptr;
        long v = std::strtol(p, &end, 10);
        if (end == p) break;
        values.push_back(v);
        bool mine = *end == 'p';
        if (per_thread) per_thread->push_back(mine);
        p = end + mine;
        p += *p == ',';
    }
    return values;
}

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s THREADS[,THREADS...] SECONDS BYTES[,BYTES...]\n", argv[0]);
        return 2;
    }
    std::vector<bool> per_thread;
    std::vector<long> thread_list = numbers(argv[1]), sizes = numbers(argv[3], &per_thread);
    double seconds = std::atof(argv[2]);
    long largest = 0;
    int most = 1;
    for (long t : thread_list) most = t > most ? (int)t : most;
    for (size_t j = 0; j < sizes.size(); ++j) {
        long total = per_thread[j] ? sizes[j] * most : sizes[j];
        largest = total > largest ? total : largest;
    }
    long n = largest / (long)(3 * sizeof(double)) + 64 * most;
    std::vector<double*> arrays;
    for (int k = 0; k < 3; ++k) {
        void* p = nullptr;
        if (posix_memalign(&p, 2 << 20, n * sizeof(double)) != 0) {
            std::fprintf(stderr, "could not allocate %ld bytes\n", (long)(n * sizeof(double)));
            return 3;
        }
        double* a = (double*)p;
#if defined(MADV_HUGEPAGE)
        madvise(p, n * sizeof(double), MADV_HUGEPAGE);  // as NumPy asks for its large arrays: fewer TLB misses
#endif
#pragma omp parallel for num_threads(most) schedule(static)
        for (long i = 0; i < n; ++i) a[i] = 1.0 + (i & 7);  // first touch by the threads that stream it
        arrays.push_back(a);
    }
    std::printf("{\"vector_bytes\": %d, \"chains\": %d, \"fma\": {", VECTOR_BYTES, CHAINS);
    for (size_t i = 0; i < thread_list.size(); ++i) {
        int t = (int)thread_list[i];
        double f32 = fma_gflops<float>(t, seconds), f64 = fma_gflops<double>(t, seconds);
        std::printf("%s\"%d\": {\"float32\": %.6g, \"float64\": %.6g}", i ? ", " : "", t, f32, f64);
    }
    std::printf("}, \"stream\": {");
    for (size_t i = 0; i < thread_list.size(); ++i) {
        int t = (int)thread_list[i];
        std::printf("%s\"%d\": {", i ? ", " : "", t);
        for (size_t j = 0; j < sizes.size(); ++j) {
            double out[KERNEL_COUNT];
            stream(arrays[0], arrays[1], arrays[2], per_thread[j] ? sizes[j] * t : sizes[j], t, out);
            std::printf("%s\"%ld%s\": {", j ? ", " : "", sizes[j], per_thread[j] ? "p" : "");
            for (int k = 0; k < KERNEL_COUNT; ++k) std::printf("%s\"%s\": %.6g", k ? ", " : "", NAMES[k], out[k]);
            std::printf("}");
        }
        std::printf("}");
    }
    std::printf("}}\n");
    for (double* a : arrays) std::free(a);
    return sink == 12345.678 ? 1 : 0;
}
